"""multivon's by-hand call on referee's built-in evaluators: ``evaluator.evaluate(case, output)``
returns the ``EvalResult`` there and then, while the engine's protocol call
(``await evaluator.evaluate(actual, expected)``) is unchanged. Written from multivon's public
signatures; no test code copied."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from referee import (
    BLEU,
    Contains,
    EvalCase,
    EvalResult,
    EvalSuite,
    ExactMatch,
    ExecutionResult,
    Faithfulness,
    Latency,
    ToolCallAccuracy,
)
from referee.evaluators import ContextRecall
from referee.testing.server import ScriptedJudgeServer

CASE = EvalCase(input="Where is the refund?", expected_output="30 days")


def test_a_deterministic_evaluator_called_by_hand_returns_its_result():
    result = Contains(["30 days"]).evaluate(CASE, "Refunds take 30 days.")
    assert isinstance(result, EvalResult)
    assert (result.evaluator, result.score, result.passed) == ("contains", 1.0, True)
    missed = ExactMatch().evaluate(CASE, output="45 days")  # multivon's keyword too
    assert (missed.score, missed.passed) == (0.0, False)
    assert Contains(["x"]).evaluate(case=CASE, output="x").passed


def test_latency_by_hand_reads_the_latency_keyword():
    assert Latency(max_ms=200).evaluate(CASE, "ok", latency_ms=150).passed
    slow = Latency(max_ms=200).evaluate(CASE, "ok", latency_ms=250)
    assert not slow.passed and slow.metadata["latency_ms"] == 250


def test_the_protocol_call_still_returns_an_awaitable():
    pending = Contains(["30 days"]).evaluate(ExecutionResult(actual_response="30 days"), CASE)
    assert inspect.isawaitable(pending)
    assert asyncio.run(pending).passed


def test_a_skip_reads_with_multivons_mark_and_is_stored_without_it():
    skipped = BLEU().evaluate(EvalCase(input="q"), "anything")
    assert skipped.skipped and not skipped.passed and skipped.metadata["skipped"] is True
    assert skipped.reason.startswith("[skipped] ")
    assert not skipped.details["reason"].startswith("[skipped]")  # stored as referee writes it
    no_trace = ToolCallAccuracy().evaluate(EvalCase(input="q", expected_tool_calls=["search"]), "x")
    assert no_trace.skipped and no_trace.reason.startswith("[skipped] ")
    # referee's own JUnit report already says "skipped"; its message keeps the plain reason.
    report = EvalSuite("skip").add_cases([EvalCase(input="q")]).add_evaluator(BLEU()).run(
        lambda _: "x", verbose=False, save=False)
    assert '<skipped message="BLEU needs' in report.to_junit_xml()


def test_a_judge_evaluator_by_hand_asks_the_judge(isolated_judge):
    case = EvalCase(input="Q3 revenue?", context="Q3 revenue was $4.2M.")
    with ScriptedJudgeServer(reply="Yes") as server:
        faithfulness = Faithfulness(threshold=0.5, judge=server.judge_config())
        result = faithfulness.evaluate(case, "Q3 revenue was $4.2M.")
        asked = len(server.requests)
        through_protocol = asyncio.run(faithfulness.evaluate(
            ExecutionResult(actual_response="Q3 revenue was $4.2M."), case))
        skipped = ContextRecall(judge=server.judge_config()).evaluate(EvalCase(input="q"),
                                                                      output="A")
    assert isinstance(result, EvalResult) and asked == 4  # scored by the judge, one question each
    assert (result.score, result.passed) == (through_protocol.score, through_protocol.passed)
    assert result.details["questions"] == through_protocol.details["questions"]
    assert skipped.skipped and skipped.reason.startswith("[skipped] ")


async def test_a_judge_evaluator_by_hand_works_inside_a_running_loop(isolated_judge):
    # pytest-asyncio (or Jupyter) already runs a loop on this thread.
    case = EvalCase(input="Q3 revenue?", context="Q3 revenue was $4.2M.")
    with ScriptedJudgeServer(reply="No") as server:
        faithfulness = Faithfulness(threshold=0.9, judge=server.judge_config())
        result = faithfulness.evaluate(case, "Q3 revenue was $9M.")
        awaited = await faithfulness.evaluate(ExecutionResult(actual_response="Q3 revenue was $9M."),
                                              case)
    assert isinstance(result, EvalResult) and result.score == awaited.score
    assert not result.passed and len(server.requests) == 8


def test_a_subclass_with_its_own_async_evaluate_answers_both_ways():
    class ShoutedContains(Contains):
        async def evaluate(self, actual, expected):
            louder = actual.model_copy(update={"actual_response": actual.actual_response.upper()})
            return await super().evaluate(louder, expected)

    check = ShoutedContains(["30 DAYS"], case_sensitive=True)
    assert check.evaluate(CASE, "within 30 days").passed
    report = EvalSuite("shout").add_cases([CASE]).add_evaluator(check).run(
        lambda _: "within 30 days", verbose=False, save=False)
    assert report.case_results[0].results[0].passed


def test_a_by_hand_call_without_a_case_names_what_was_expected():
    with pytest.raises(TypeError, match=r"Contains.evaluate\(case, output\): expected an EvalCase"):
        Contains(["x"]).evaluate(case="not a case", output="x")


def test_every_built_in_evaluator_says_whether_it_calls_a_judge():
    from referee import evaluators

    judged = {"Faithfulness", "Relevance", "GEval", "CheckEvaluator", "PlanQuality",
              "AnswerAccuracy", "Toxicity"}
    for name in judged:
        assert getattr(evaluators, name).uses_llm_judge is True, name
    for name in ("Contains", "WordCount", "BLEU", "ChrfScore", "ToolCallAccuracy", "Latency"):
        assert getattr(evaluators, name).uses_llm_judge is False, name
