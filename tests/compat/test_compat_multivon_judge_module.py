"""multivon-eval's ``multivon_eval.judge`` names (``get_global_judge``, ``resolve_judge``) and
its public wordings, which user code and its own tests match on (issue 31)."""

from __future__ import annotations

import re

import pytest

import referee.judge
from referee import CheckEvaluator, CustomRubric, EvalCase, JudgePanel, JudgeUnavailable
from referee.execution import ExecutionResult
from referee.judge import JudgeConfig, configure, get_global_judge, resolve_judge
from referee.judge.panel import effective_panel
from referee.testing import ScriptedJudgeServer

pytestmark = pytest.mark.usefixtures("isolated_judge")


def test_both_are_exported_like_multivons_judge_module() -> None:
    assert {"get_global_judge", "resolve_judge"} <= set(referee.judge.__all__)


def test_nothing_configured_reads_as_a_judge_config_that_sets_nothing() -> None:
    judge = get_global_judge()
    assert isinstance(judge, JudgeConfig) and not judge.model_fields_set
    assert judge.reliability_check is False  # multivon's own code reads it so


def test_handing_it_back_restores_what_was_configured(monkeypatch) -> None:
    monkeypatch.setenv("JUDGE_PANEL", "openai/a,openai/b")
    saved = get_global_judge()  # nothing configured
    configure(JudgeConfig(provider="openai", model="m", temperature=0.7))
    assert get_global_judge().model == "m"
    configure(saved)
    # As before: no configured judge, so the environment's panel judges again.
    assert effective_panel(None) is not None and len(effective_panel(None).members) == 2

    panel = JudgePanel(members=[JudgeConfig(provider="openai", model="a"),
                                JudgeConfig(provider="openai", model="b")])
    configure(panel)
    kept = get_global_judge()
    configure(None)
    configure(kept)
    assert effective_panel(None) == panel


def test_resolve_judge_merges_over_the_configured_judge(monkeypatch) -> None:
    for name in ("JUDGE_PROVIDER", "JUDGE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    configure(JudgeConfig(provider="openai", model="m", temperature=0.7, max_tokens=2048,
                          timeout=60, reliability_sample=9))
    assert resolve_judge(JudgeConfig(temperature=0.0)).temperature == 0.0
    inherited = resolve_judge(JudgeConfig(provider="anthropic"))
    assert (inherited.provider, inherited.temperature, inherited.max_tokens, inherited.timeout,
            inherited.reliability_sample) == ("anthropic", 0.7, 2048, 60, 9)
    configure(JudgeConfig())
    defaults = resolve_judge(None)
    assert (defaults.provider, defaults.temperature, defaults.max_tokens, defaults.timeout,
            defaults.reliability_sample) == ("anthropic", 0.0, 1024, 30, 5)


async def test_no_verdict_at_all_is_worded_as_multivon_words_it() -> None:
    with ScriptedJudgeServer(reply="beats me") as server:
        rubric = CustomRubric([("Q1?", True), ("Q2?", True), ("Q3?", True)],
                              judge=server.judge_config())
        with pytest.raises(JudgeUnavailable, match="no parseable Yes/No verdict") as caught:
            await rubric.evaluate(ExecutionResult(actual_response="out"), EvalCase(input="q"))
    assert "3 of 3 question(s) UNKNOWN" in str(caught.value)


async def test_a_check_whose_questions_cannot_be_generated_warns_of_its_fallback() -> None:
    with ScriptedJudgeServer(reply="Sorry, I can't help with that.") as server:
        check = CheckEvaluator("The reply is polite", judge=server.judge_config())
        with pytest.warns(UserWarning) as caught:
            await check.prepare()
    [warning] = [w for w in caught if "question generation failed" in str(w.message)]
    assert re.search(r"Using fallback: the criterion itself as a single yes/no question",
                     str(warning.message))
