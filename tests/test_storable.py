"""referee.storable: the stand-ins for values JSON cannot hold, and the fast path."""

from __future__ import annotations

import math

import pytest

from referee import EvalCase, ExecutionResult
from referee.case import Invocation, ToolCall
from referee.report.model import CaseResult, CaseStatus
from referee.result import CriterionResult
from referee.storable import make_storable


def _case(**fields) -> CaseResult:
    return CaseResult(eval_id="x", status=CaseStatus.PASSED, **fields)


@pytest.mark.parametrize("result, path, stored_as", [
    (_case(execution=ExecutionResult(tool_calls=[ToolCall(name="t", args={"a": [math.nan]})])),
     "execution.tool_calls[0].args.a[0]", '"NaN"'),
    (_case(execution=ExecutionResult(latency_s=math.inf)), "execution.latency_s", "null"),
    (_case(criterion_results=[CriterionResult(criterion="c", score=1, passed=True,
                                              threshold=math.nan)]),
     "criterion_results[0].threshold", "0.0"),
    (_case(case=EvalCase(conversation=[Invocation(user_content={"x": -math.inf})])),
     "case.conversation[0].user_content.x", '"-Infinity"'),
    (_case(metadata={"when": {1, 2}, "raw": bytearray(b"\xfe")}), "metadata.raw", "base64"),
])
def test_each_unstorable_value_is_found_wherever_it_is(result, path, stored_as) -> None:
    stored, converted = make_storable(result)
    assert [(c.path, c.stored_as) for c in converted] == [(path, stored_as)]
    assert stored is not result
    CaseResult.model_validate_json(stored.model_dump_json())  # it round-trips


def test_a_storable_case_is_returned_as_is() -> None:
    result = _case(execution=ExecutionResult(actual_response="NaN", metadata={"k": "Infinity"}),
                   metadata={"ok": [1, 2.5, None, "x"]})
    stored, converted = make_storable(result)
    assert stored is result and converted == []


def test_values_pydantic_can_store_are_left_to_pydantic() -> None:
    import datetime

    when = datetime.datetime(2026, 1, 2, 3, 4, 5)
    result = _case(metadata={"when": when, "tags": {"a"}, "blob": b"\xff"})
    stored, converted = make_storable(result)
    assert [c.path for c in converted] == ["metadata.blob"]
    assert stored.metadata["when"] == "2026-01-02T03:04:05" and stored.metadata["tags"] == ["a"]


# A model's reply may end in half of an emoji (a lone surrogate). The stored run shows U+FFFD
# for it; the judge must be asked about the same text, not fail on it.
CUT_EMOJI = "Returns are accepted within 30 days \ud83d"


@pytest.mark.parametrize("provider", ["openai", "anthropic", "google"])
def test_a_lone_surrogate_in_the_output_is_judged_through_each_wire(
        provider: str, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from referee import EvalSuite
    from referee.evaluators import Faithfulness, GEval, Relevance
    from referee.testing import ScriptedJudgeServer

    monkeypatch.setenv("REFEREE_CACHE_DIR", str(tmp_path / "cache"))

    def reply(request) -> str:
        return '{"score": 0.8, "reason": "fine"}' if "Criterion" in request.prompt else "Yes"

    with ScriptedJudgeServer(reply) as server:
        judge = server.judge_config(provider, cache=True)
        suite = EvalSuite("cut-emoji")
        suite.add_cases([EvalCase(input="How long do I have?", context="Returns: 30 days.")])
        suite.add_evaluators(Faithfulness(judge=judge), Relevance(judge=judge),
                             GEval("polite", judge=judge))
        report = suite.run(lambda prompt: CUT_EMOJI, verbose=False, runs_dir=tmp_path / "runs")
        [case] = report.results
        assert [r.error for r in case.criterion_results] == [None, None, None]
        assert case.criterion_results[2].score == pytest.approx(0.8)  # the judge's reply read
        assert server.requests and all("\ud83d" not in r.prompt and "30 days \ufffd" in r.prompt
                                       for r in server.requests)


async def test_a_lone_surrogate_reaches_an_agent_evaluator_judge_as_u_fffd(tmp_path) -> None:
    from referee import AgentEvaluator, CriterionConfig
    from referee.config import CriteriaConfig, EvalConfig
    from referee.testing import ScriptedJudgeServer

    with ScriptedJudgeServer('{"score": 0.9, "reasoning": "same"}') as server:
        config = EvalConfig(criteria=CriteriaConfig(response_match=CriterionConfig(
            judge_model="openai/local", base_url=server.base_url(), num_samples=1)))
        report = await AgentEvaluator(lambda case: ExecutionResult(actual_response=CUT_EMOJI),
                                      config=config).evaluate(
            [EvalCase.single_turn("How long?", "30 days")], verbose=False, output_dir=tmp_path)
        [result] = report.cases[0].criterion_results
        assert result.error is None and result.score == pytest.approx(0.9)
        [request] = server.requests
        assert "\ud83d" not in request.prompt and "30 days \ufffd" in request.prompt


def test_text_read_from_a_file_joins_surrogate_pairs_and_names_a_lone_half():
    from referee.storable import LoneSurrogate, surrogate_pairs_joined

    assert surrogate_pairs_joined({"a": ["\ud83d\ude00"]}) == {"a": ["\U0001F600"]}
    with pytest.raises(LoneSurrogate, match=r"lone surrogate '\\udc01'") as caught:
        surrogate_pairs_joined({"a": ["ok", "\ud83d\ude00 then \udc01"]})
    assert caught.value.loc == ("a", 1)
