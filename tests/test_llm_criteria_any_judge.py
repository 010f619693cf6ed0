"""Issue 12, section 5: the AgentEvaluator-style criteria run on any judge.

A provider prefix on ``judge_model`` (``openai/llama3``) and a base URL (``CriterionConfig``
field or the provider's variable) reach a local OpenAI-compatible server, with no Google or
OpenAI key; ``referee run`` names every judged criterion's judge before the first case.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from referee import AgentEvaluator, CriterionConfig, EvalCase, ExecutionResult
from referee.config import CriteriaConfig, EvalConfig
from referee.criteria.llm import ResponseMatchCriterion
from referee.judge import judge_config_for_model, provider_for_model
from referee.judge.config import split_judge_model
from referee.report.model import CaseStatus
from referee.testing import ScriptedJudgeServer

ROOT = Path(__file__).resolve().parent.parent
KEY_VARS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "GOOGLE_API_KEY", "GEMINI_API_KEY",
            "GOOGLE_GENAI_USE_VERTEXAI", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN",
            "ANTHROPIC_BASE_URL", "JUDGE_PROVIDER", "JUDGE_MODEL")
SCORE = json.dumps({"score": 0.9, "reasoning": "same meaning"})


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in KEY_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("REFEREE_CACHE", "0")


@pytest.mark.parametrize("name,expected", [
    ("openai/llama3", ("openai", "llama3")),
    ("anthropic/claude-haiku-4-5", ("anthropic", "claude-haiku-4-5")),
    ("google/gemini-2.5-flash", ("google", "gemini-2.5-flash")),
    ("OpenAI/meta-llama/Llama-3-8B", ("openai", "meta-llama/Llama-3-8B")),  # a gateway's name
    # Bare names keep the documented inference, paths included.
    ("gemini-2.5-flash", ("google", "gemini-2.5-flash")),
    ("models/gemini-2.0-pro", ("google", "models/gemini-2.0-pro")),
    ("gpt-4o-mini", ("openai", "gpt-4o-mini")),
    ("claude-haiku-4-5", ("anthropic", "claude-haiku-4-5")),
    ("llama3", (None, "llama3")),
    ("meta-llama/llama-3", (None, "meta-llama/llama-3")),
])
def test_a_provider_prefix_names_the_provider_and_bare_names_are_inferred(name, expected):
    assert split_judge_model(name) == expected
    assert provider_for_model(name) == expected[0]


def test_an_openai_compatible_endpoint_needs_no_key(no_keys, monkeypatch) -> None:
    assert judge_config_for_model("openai/llama3") is None  # no key, no endpoint
    cfg = judge_config_for_model("openai/llama3", base_url="http://127.0.0.1:11434/v1")
    assert cfg is not None and (cfg.provider, cfg.model, cfg.base_url) == (
        "openai", "llama3", "http://127.0.0.1:11434/v1")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")
    from_env = judge_config_for_model("openai/llama3")
    assert from_env is not None and from_env.base_url == "http://127.0.0.1:8000/v1"
    # The criterion's own field wins over the variable.
    field = judge_config_for_model("openai/llama3", base_url="http://127.0.0.1:11434/v1")
    assert field is not None and field.base_url == "http://127.0.0.1:11434/v1"


def _agent(case: EvalCase) -> ExecutionResult:
    return ExecutionResult(actual_response="Returns are accepted within 30 days.")


CASES = [EvalCase.single_turn(f"refund window {i}?", "30 days", eval_id=f"c{i}")
         for i in range(3)]


@pytest.mark.parametrize("via", ["field", "environment"])
async def test_agent_evaluator_criterion_runs_on_a_local_openai_compatible_model(
        no_keys, monkeypatch, tmp_path: Path, via: str) -> None:
    # As llama-cpp-python's server: no /v1/responses at all (404).
    with ScriptedJudgeServer(SCORE, responses_api=False) as server:
        fields = {"judge_model": "openai/local-llama", "num_samples": 2}
        if via == "field":
            fields["base_url"] = server.base_url()
        else:
            monkeypatch.setenv("OPENAI_BASE_URL", server.base_url())
        config = EvalConfig(criteria=CriteriaConfig(
            response_match=CriterionConfig(**fields)))
        report = await AgentEvaluator(_agent, config=config).evaluate(
            CASES, verbose=False, output_dir=tmp_path)
        assert [c.status for c in report.cases] == [CaseStatus.PASSED] * 3
        for case in report.cases:
            [result] = case.criterion_results
            assert result.score == pytest.approx(0.9)
            assert "judge_unavailable" not in result.details
        assert server.request_count == 3 * 2
        assert {r.model for r in server.requests} == {"local-llama"}
        # api_style not set: Chat Completions, the API every OpenAI-compatible server has.
        assert {r.path for r in server.requests} == {"/v1/chat/completions"}
        assert {r.body["response_format"]["type"] for r in server.requests} == {"json_object"}
        # The key the SDK insists on is a placeholder, never one of the user's.
        assert {r.headers["authorization"] for r in server.requests} == {"Bearer not-needed"}


def test_api_style_left_unset_follows_the_endpoint(no_keys, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-123456")
    own = judge_config_for_model("gpt-4o-mini")
    assert own is not None and own.api_style == "responses"  # OpenAI itself: as documented
    at_openai = judge_config_for_model("gpt-4o-mini", base_url="https://api.openai.com/v1")
    assert at_openai is not None and at_openai.api_style == "responses"
    local = judge_config_for_model("openai/llama3", base_url="http://127.0.0.1:8080/v1")
    assert local is not None and local.api_style == "chat"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://gpu-box.lan:8000/v1")
    gateway = judge_config_for_model("openai/llama3")
    assert gateway is not None and gateway.api_style == "chat"
    # An api_style the user set is kept, wherever the endpoint is.
    chosen = ResponseMatchCriterion(CriterionConfig(judge_model="openai/llama3",
                                                    api_style="responses"))
    assert chosen.judge_config().api_style == "responses"
    unset = ResponseMatchCriterion(CriterionConfig(judge_model="openai/llama3"))
    assert unset.judge_config().api_style == "chat"
    assert ResponseMatchCriterion(CriterionConfig(
        judge_model="gpt-4o-mini", base_url="")).judge_config().base_url == (
        "http://gpu-box.lan:8000/v1")


async def test_a_server_without_the_responses_api_names_the_fix(no_keys) -> None:
    with ScriptedJudgeServer(SCORE, responses_api=False) as server:
        criterion = ResponseMatchCriterion(CriterionConfig(
            judge_model="openai/local-llama", base_url=server.base_url(), num_samples=1,
            api_style="responses"))
        result = await criterion.evaluate(ExecutionResult(actual_response="30 days"),
                                          CASES[0])
    assert result.error == "All LLM samples failed"
    failure = json.dumps(result.details)
    assert "HTTP 404" in failure and "not retryable" in failure
    assert "api_style='chat'" in failure, failure


@pytest.mark.parametrize("provider,model,key_var", [
    ("anthropic", "claude-haiku-4-5", "ANTHROPIC_API_KEY"),
    ("google", "gemini-2.5-flash", "GOOGLE_API_KEY"),
])
async def test_other_provider_prefixes_reach_their_endpoint(no_keys, monkeypatch, provider,
                                                            model, key_var) -> None:
    monkeypatch.setenv(key_var, "scripted-key-123456")
    with ScriptedJudgeServer(SCORE) as server:
        criterion = ResponseMatchCriterion(CriterionConfig(
            judge_model=f"{provider}/{model}", base_url=server.base_url(provider),
            num_samples=1))
        result = await criterion.evaluate(ExecutionResult(actual_response="30 days"),
                                          CASES[0])
        assert result.error is None and result.score == pytest.approx(0.9)
        [request] = server.requests
        assert (request.provider, request.model) == (provider, model)


AGENT = textwrap.dedent("""
    import sys
    from referee import ExecutionResult

    def agent(case):
        print("AGENT-CALLED", file=sys.stderr, flush=True)
        return ExecutionResult(actual_response="Returns are accepted within 30 days.")
""")


def test_referee_run_names_each_judge_before_the_first_case(no_keys, tmp_path: Path) -> None:
    with ScriptedJudgeServer(SCORE) as server:
        (tmp_path / "agent.py").write_text(AGENT)
        (tmp_path / "cases.jsonl").write_text(
            json.dumps({"input": "refund window?", "expected_output": "30 days"}) + "\n")
        (tmp_path / "config.json").write_text(json.dumps({"criteria": {
            "response_match": {"judge_model": "openai/local-llama", "num_samples": 1,
                               "base_url": server.base_url()},
            "llm_judge": {"judge_model": "gemini-2.5-flash", "num_samples": 1},
        }}))
        env = {k: v for k, v in os.environ.items() if k not in KEY_VARS}
        env.update(PYTHONPATH=str(ROOT), REFEREE_CACHE="0")
        done = subprocess.run(
            [sys.executable, "-m", "referee.cli", "run", str(tmp_path / "cases.jsonl"),
             "--agent", f"{tmp_path / 'agent.py'}:agent", "--config",
             str(tmp_path / "config.json"), "--out", str(tmp_path / "runs")],
            capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    lines = done.stderr.splitlines()
    local = next(i for i, line in enumerate(lines) if line.startswith(
        "referee: judge for response_match_score: openai/local-llama at http://127.0.0.1:"))
    # Which OpenAI API the judge is called through: a local server may lack one of them.
    assert lines[local].endswith("via Chat Completions (/chat/completions)"), lines[local]
    missing = next(i for i, line in enumerate(lines) if "judge for final_response_match_v2" in line)
    assert "gemini-2.5-flash: no provider available" in lines[missing]
    assert max(local, missing) < lines.index("AGENT-CALLED"), done.stderr
