"""Pairwise judging through the real SDK against the scripted judge server."""

from __future__ import annotations

import json
import random
import re

import pytest

from referee import EvalCase, EvalSuite, ExecutionResult, JudgeUnavailable
from referee.config import CriterionConfig, Rubric
from referee.pairwise import (
    PairwiseJudge,
    PairwisePreferenceCriterion,
    WinRate,
    compare_runs,
    sign_test_p,
)
from referee.report.model import CaseStatus
from referee.testing import FakeJudge, ScriptedJudgeServer

pytestmark = pytest.mark.usefixtures("isolated_judge")

CRITERION = "The answer is correct and directly answers the question."
CASE = EvalCase(input="What is the capital of France?", eval_id="capital")
GOOD, BAD = "Paris is the capital of France.", "I think it is Lyon."


def winner(which: str, reason: str = "judged") -> str:
    return json.dumps({"reason": reason, "winner": which})


def shown(prompt: str, block: str) -> str:
    """The content of data block ``block`` (e.g. RESPONSE 1) in a judge prompt."""
    found = re.search(rf"<<<BEGIN {block} (\w+)>>>\n(.*?)\n<<<END {block} \1>>>", prompt, re.DOTALL)
    assert found, f"no {block} block in the prompt"
    return found.group(2)


def prefers(text_of_better: str):
    """A judge that prefers, in whichever position it is shown, the response containing
    ``text_of_better`` (a judge without position bias)."""
    def reply(request) -> str:
        first = shown(request.prompt, "RESPONSE 1")
        return winner("1" if text_of_better in first else "2", "the better answer")
    return reply


@pytest.fixture
def server():
    with ScriptedJudgeServer(reply=winner("1")) as srv:
        yield srv


async def test_a_judge_that_always_prefers_the_first_position_gives_ties_not_wins(server):
    server.set_reply(winner("1", "the first one is better"))
    verdict = await PairwiseJudge(CRITERION, judge=server.judge_config()).compare(CASE, BAD, GOOD)

    assert server.request_count == 2  # both orders asked
    firsts = sorted(shown(r.prompt, "RESPONSE 1") for r in server.requests)
    assert firsts == sorted([BAD, GOOD])
    assert verdict.preferred == "tie"
    assert verdict.position_consistent is False
    assert "position-inconsistent" in verdict.reason
    assert [o.preferred for o in verdict.orders] == ["a", "b"]
    assert verdict.token_usage.requests == 2


async def test_a_judge_that_prefers_the_better_answer_in_both_orders_gives_a_win(server):
    server.set_reply(prefers(GOOD))
    judge = PairwiseJudge(CRITERION, judge=server.judge_config())

    as_b = await judge.compare(CASE, BAD, GOOD)
    as_a = await judge.compare(CASE, GOOD, BAD)

    assert (as_b.preferred, as_b.position_consistent) == ("b", True)
    assert (as_a.preferred, as_a.position_consistent) == ("a", True)
    assert as_b.reason == "the better answer"
    assert server.request_count == 4
    prompt = server.requests[0].prompt
    assert CRITERION in prompt and shown(prompt, "USER INPUT") == CASE.input


async def test_one_order_only_asks_once_and_claims_no_consistency(server):
    server.set_reply(winner("2"))
    verdict = await PairwiseJudge(CRITERION, both_orders=False,
                                  judge=server.judge_config()).compare(CASE, BAD, GOOD)
    assert server.request_count == 1
    assert (verdict.preferred, verdict.position_consistent) == ("b", None)


async def test_identical_outputs_are_a_tie_without_a_request(server):
    verdict = await PairwiseJudge(CRITERION, judge=server.judge_config()).compare(CASE, GOOD, GOOD)
    assert verdict.preferred == "tie" and server.request_count == 0


@pytest.mark.parametrize("unreadable", ["Response 1 is clearly better.", '{"winner": "A"}',
                                        '{"reason": "both fine"}', '{"winner": 3}'])
async def test_an_unreadable_reply_is_a_judge_error_never_a_preference(server, unreadable):
    server.set_reply(unreadable)
    with pytest.raises(JudgeUnavailable, match="named no winner"):
        await PairwiseJudge(CRITERION, judge=server.judge_config()).compare(CASE, BAD, GOOD)


async def test_one_unreadable_order_leaves_the_pair_without_a_verdict(server):
    server.set_reply(lambda r: winner("1") if shown(r.prompt, "RESPONSE 1") == GOOD else "maybe")
    with pytest.raises(JudgeUnavailable, match="1 of 2 judge repl") as caught:
        await PairwiseJudge(CRITERION, judge=server.judge_config()).compare(CASE, BAD, GOOD)
    assert caught.value.token_usage.requests == 2  # both were paid for


async def test_the_cache_keeps_one_entry_per_ordered_pair(server, tmp_path):
    server.set_reply(prefers(GOOD))
    cfg = server.judge_config(cache=True, cache_path=str(tmp_path / "judge.sqlite3"))
    judge = PairwiseJudge(CRITERION, judge=cfg)

    first = await judge.compare(CASE, BAD, GOOD)
    again = await judge.compare(CASE, BAD, GOOD)
    swapped = await judge.compare(CASE, GOOD, BAD)  # the same two ordered pairs, both cached

    assert server.request_count == 2
    assert [o.cached for o in again.orders] == [True, True]
    assert (first.preferred, again.preferred, swapped.preferred) == ("b", "b", "a")


async def test_a_rubric_is_shown_to_the_judge(server):
    server.set_reply(prefers(GOOD))
    judge = PairwiseJudge(rubric=["Names the right city", Rubric(rubric_id="r2",
                                                                 content="One sentence")],
                          judge=server.judge_config())
    await judge.compare(CASE, BAD, GOOD)
    assert "- Names the right city\n- One sentence" in server.requests[0].prompt


QUESTIONS = ["Does the response name the right city?", "Is the response one sentence?",
             "Is the response polite?"]


async def test_a_question_set_is_asked_question_by_question_in_both_orders(server):
    def reply(request) -> str:
        if "polite" in request.prompt:  # a question this judge answers by position only
            return winner("1")
        return prefers(GOOD)(request)

    server.set_reply(reply)
    verdict = await PairwiseJudge(questions=QUESTIONS, judge=server.judge_config()).compare(
        CASE, BAD, GOOD)

    assert server.request_count == 6  # 3 questions x 2 orders
    assert verdict.preferred == "b" and verdict.position_consistent is False
    assert verdict.reason == ("B better on 2, A on 0, tie on 1 of 3 question(s); 1 flipped "
                              "with the order (counted as ties)")
    assert {o.question for o in verdict.orders} == set(QUESTIONS)
    assert all(f"Question: {q}" in "".join(r.prompt for r in server.requests) for q in QUESTIONS)


async def test_a_question_set_judged_by_position_alone_is_a_tie(server):
    server.set_reply(winner("1"))
    verdict = await PairwiseJudge(questions=QUESTIONS, judge=server.judge_config()).compare(
        CASE, BAD, GOOD)
    assert (verdict.preferred, verdict.position_consistent) == ("tie", False)


def test_a_criterion_or_rubric_is_required():
    with pytest.raises(ValueError, match="not both"):
        PairwiseJudge(CRITERION, questions=QUESTIONS)
    with pytest.raises(ValueError, match="give a criterion"):
        PairwiseJudge()
    with pytest.raises(ValueError, match=r"rubric\[0\]"):
        PairwiseJudge(rubric=[""])


def test_in_a_suite_the_output_is_judged_against_the_reference(server, tmp_path):
    server.set_reply(prefers(GOOD))
    suite = EvalSuite("pairwise-vs-reference")
    suite.add_case(EvalCase(input=CASE.input, expected_output=BAD, eval_id="beats"))
    suite.add_case(EvalCase(input=CASE.input, expected_output=GOOD, eval_id="loses"))
    suite.add_case(EvalCase(input=CASE.input, eval_id="no-reference"))
    suite.add_evaluator(PairwiseJudge(CRITERION, judge=server.judge_config()))

    report = suite.run(lambda q: GOOD, verbose=False,
                       runs_dir=tmp_path / "runs")
    by_id = {c.eval_id: c for c in report.cases}
    beats = by_id["beats"].criterion_results[0]
    assert beats.score == 1.0 and beats.passed
    assert "model output" in beats.reason
    assert by_id["loses"].criterion_results[0].score == 0.5  # identical to the reference: tie
    assert by_id["no-reference"].criterion_results[0].skipped
    assert server.request_count == 2


def test_an_unreadable_judge_makes_the_case_a_judge_error_in_a_run(server, tmp_path):
    server.set_reply("no idea")
    suite = EvalSuite("pairwise-judge-error")
    suite.add_case(EvalCase(input=CASE.input, expected_output=BAD))
    suite.add_evaluator(PairwiseJudge(CRITERION, judge=server.judge_config()))
    report = suite.run(lambda q: GOOD, verbose=False, runs_dir=tmp_path / "runs")
    assert report.cases[0].status == CaseStatus.JUDGE_ERROR


async def test_the_agent_evaluator_spelling_uses_the_same_core(server):
    server.set_reply(winner("1", "first wins"))
    config = CriterionConfig(threshold=0.5, rubrics=[Rubric(rubric_id="c", content="Correct")])
    criterion = PairwisePreferenceCriterion(config, judge=server.judge_config())
    case = EvalCase(input=CASE.input, expected_output=BAD)
    result = await criterion.evaluate(ExecutionResult(actual_response=GOOD), case)

    assert server.request_count == 2
    assert result.criterion == "pairwise_preference"
    assert result.score == 0.5 and result.details["position_consistent"] is False
    assert "- Correct" in server.requests[0].prompt


async def test_the_agent_evaluator_runs_it_as_an_extra_criterion(server):
    from referee import AgentEvaluator
    from referee.config import CriteriaConfig, EvalConfig

    server.set_reply(prefers(GOOD))
    only_keywords = EvalConfig(criteria=CriteriaConfig(
        contains_keywords=CriterionConfig.contains_keywords(keywords=["Paris"])))
    criterion = PairwisePreferenceCriterion(criterion=CRITERION, judge=server.judge_config())
    evaluator = AgentEvaluator(lambda message: GOOD, config=only_keywords,
                               criteria=[criterion], save=False)
    report = await evaluator.evaluate([EvalCase(input=CASE.input, expected_output=BAD)])

    result = report.cases[0].get_criterion_result("pairwise_preference")
    assert result.score == 1.0 and result.passed and result.threshold == 0.5
    assert report.cases[0].status == CaseStatus.PASSED and server.request_count == 2


def test_sign_test_matches_the_binomial():
    assert sign_test_p(9, 1) == pytest.approx(2 * 11 / 1024)
    assert sign_test_p(5, 5) == 1.0 and sign_test_p(0, 0) == 1.0
    assert sign_test_p(0, 6) == pytest.approx(2 / 64)


def test_win_rate_intervals_cover_a_simulated_judges_true_rate():
    """A simulated judge prefers B with a known probability (the same way in both orders);
    over many seeded comparisons the 95% Wilson interval covers that probability in the large
    majority of them, and a judge with no preference rarely yields p < 0.05."""
    from referee.report.model import CaseResult, EvalReport

    true_rate, seeds, cases = 0.7, 30, 40
    fake = FakeJudge()
    cfg = fake.judge_config()

    def report(name: str, side: str) -> EvalReport:
        return EvalReport(name=name, cases=[
            CaseResult(index=i, eval_id=f"case-{i}", status=CaseStatus.PASSED,
                       case=EvalCase(input=f"question {i}"),
                       execution=ExecutionResult(actual_response=f"{side} answer {i}"))
            for i in range(cases)])

    def run(rate: float, seed: int) -> WinRate:
        rng = random.Random(seed)
        b_wins = {f"question {i}": rng.random() < rate for i in range(cases)}

        def reply(request) -> str:
            question = shown(request.prompt, "USER INPUT")
            first_is_b = shown(request.prompt, "RESPONSE 1").startswith("B")
            return winner("1" if b_wins[question] == first_is_b else "2")

        fake.script.set_default(reply)
        return compare_runs(report("a", "A"), report("b", "B"), CRITERION, judge=cfg).win_rate

    covered = 0
    for seed in range(seeds):
        rate = run(true_rate, seed)
        assert rate.ties == 0 and rate.wins + rate.losses == cases
        low, high = rate.interval
        covered += low <= true_rate <= high
    assert covered >= 0.85 * seeds
    assert len(fake.requests) == seeds * cases * 2

    false_alarms = sum(run(0.5, 1000 + seed).p_value < 0.05 for seed in range(seeds))
    assert false_alarms <= 0.15 * seeds
