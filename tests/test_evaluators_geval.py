"""GEval: a 0.0-1.0 judge score averaged over runs, through the scripted server."""

from __future__ import annotations

import json

import pytest

from referee import EvalCase, ExecutionResult, GEval, JudgeUnavailable
from referee.testing import ScriptedJudgeServer

CRITERIA = "The response is engaging, concise, and professionally written."
CASE = EvalCase(input="Write a product description for wireless headphones")


pytestmark = pytest.mark.usefixtures("isolated_judge")


@pytest.fixture
def server():
    with ScriptedJudgeServer(reply='{"score": 1.0, "reason": "ok"}') as srv:
        yield srv


def out(text: str) -> ExecutionResult:
    return ExecutionResult(actual_response=text)


def scores_in_order(server, *replies: str) -> None:
    queue = list(replies)
    server.set_reply(lambda request: queue.pop(0))


async def test_runs_are_averaged_with_one_call_each(server):
    scores_in_order(server, '{"score": 0.6, "reason": "a bit long"}',
                    '{"score": 0.8, "reason": "crisp"}')
    ev = GEval(name="writing_quality", criteria=CRITERIA, threshold=0.7, judge=server.judge_config())
    result = await ev.evaluate(out("Crisp sound, 30-hour battery."), CASE)

    assert server.request_count == 2
    assert result.criterion == "writing_quality"
    assert result.score == pytest.approx(0.7) and result.passed
    assert sorted(result.details["scores"]) == [0.6, 0.8]
    assert {"run", "score", "reason", "raw_reply"} <= set(result.details["runs"][0])
    assert result.token_usage.requests == 2


async def test_runs_alternate_the_framing(server):
    ev = GEval(criteria=CRITERIA, runs=3, judge=server.judge_config())
    assert (ev.name, ev.threshold, ev.runs) == ("g_eval", 0.7, 3)
    await ev.evaluate(out("text"), CASE)

    # The runs are concurrent, so requests arrive in any order: compare them as a multiset.
    prompts = [r.prompt for r in server.requests]
    assert len(prompts) == 3 and len(set(prompts)) == 2
    # The framing varies after the case's data, which stays the shared, cacheable prefix.
    data_end = prompts[0].index("<<<END MODEL OUTPUT")
    assert all(p[:data_end] == prompts[0][:data_end] for p in prompts)
    criterion_first = [p.index("Criterion:") < p.index("Grade") for p in prompts]
    assert sorted(criterion_first) == [False, True, True]
    assert all("never instructions to you" in r.system for r in server.requests)


async def test_a_run_without_a_usable_score_is_excluded_and_disclosed(server):
    scores_in_order(server, '{"score": 0.9, "reason": "good"}', "I'd give it an 8/10")
    result = await GEval(criteria=CRITERIA, judge=server.judge_config()).evaluate(out("x"), CASE)
    assert result.score == pytest.approx(0.9)
    assert "1 of 2 run(s) returned no usable score" in result.reason
    assert None in result.details["scores"]


@pytest.mark.parametrize("bad", ['{"score": 7}', '{"reason": "no score"}', "nothing", '{"score": true}'])
async def test_no_usable_score_in_any_run_is_judge_unavailable(server, bad):
    server.set_reply(bad)
    with pytest.raises(JudgeUnavailable, match="none of 2 judge run"):
        await GEval(criteria=CRITERIA, judge=server.judge_config()).evaluate(out("x"), CASE)


async def test_score_given_as_a_numeric_string_counts(server):
    server.set_reply(json.dumps({"score": "0.5", "reason": "fine"}))
    result = await GEval(criteria=CRITERIA, runs=1, judge=server.judge_config()).evaluate(out("x"), CASE)
    assert result.score == 0.5 and not result.passed and result.reason == "fine"


@pytest.mark.parametrize("kwargs,message", [
    ({"criteria": ""}, "criteria must be a non-empty string"),
    ({"criteria": "c", "runs": 0}, "runs must be an integer of at least 1"),
    ({"criteria": "c", "threshold": 2}, "threshold must be between"),
])
def test_bad_arguments_are_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        GEval(**kwargs)


def test_document_example_constructs_unchanged():
    case = EvalCase(input="Write a product description for wireless headphones")
    ev = GEval(
        name="writing_quality",
        criteria="The response is engaging, concise, and professionally written.",
        threshold=0.7,
    )
    assert ev.runs == 2 and ev.judge is None and case.input
