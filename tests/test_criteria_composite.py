"""CompositeCriterion and WeightedCriterion (document 000, "Composing criteria")."""

import asyncio

import pytest

from referee import (
    BaseCriterion,
    CompositeCriterion,
    ContainsKeywordsCriterion,
    CriterionConfig,
    EvalCase,
    ExecutionResult,
    Invocation,
    JudgeUnavailable,
    ResponseMatchCriterion,
    SyncCriterion,
    ToolCall,
    ToolNameMatchCriterion,
    WeightedCriterion,
)


class Fixed(SyncCriterion):
    """Scores a fixed value; the name makes sub-results recognisable."""

    def __init__(self, score: float, name: str = "fixed", skip: bool = False):
        super().__init__()
        self.score, self.name, self.skip = score, name, skip

    def evaluate_sync(self, actual, expected):
        if self.skip:
            return self._skipped("needs something this case lacks")
        return self._result(self.score, {"reason": f"fixed {self.score}"})


class Raises(BaseCriterion):
    name = "raises"

    def __init__(self, exc: Exception):
        super().__init__()
        self.exc = exc

    async def evaluate(self, actual, expected):
        raise self.exc


CASE = EvalCase(input="q")
RUN = ExecutionResult(actual_response="r")


async def test_and_takes_minimum_and_serialises_sub_results():
    criterion = CompositeCriterion([Fixed(0.9, "a"), Fixed(0.4, "b"), Fixed(1.0, "c")])
    result = await criterion.evaluate(RUN, CASE)
    assert result.criterion == "composite_criterion"
    assert result.score == 0.4 and not result.passed  # default threshold 0.8
    assert result.details["require_all"] is True
    subs = result.details["sub_results"]
    assert [s["criterion"] for s in subs] == ["a", "b", "c"]
    assert subs[1]["score"] == 0.4 and subs[1]["details"]["reason"] == "fixed 0.4"
    assert isinstance(subs[0], dict)
    assert "b" in result.reason


async def test_or_takes_maximum():
    criterion = CompositeCriterion([Fixed(0.2), Fixed(0.85)], require_all=False)
    result = await criterion.evaluate(RUN, CASE)
    assert result.score == 0.85 and result.passed
    assert result.details["require_all"] is False


async def test_threshold_comes_from_config():
    criterion = CompositeCriterion([Fixed(0.9)], config=CriterionConfig(threshold=1.0))
    result = await criterion.evaluate(RUN, CASE)
    assert result.threshold == 1.0 and not result.passed


async def test_sub_criteria_run_concurrently():
    started = asyncio.Event()

    class Waiter(BaseCriterion):
        name = "waiter"

        async def evaluate(self, actual, expected):
            await started.wait()  # only set by the other sub-criterion
            return self._result(1.0)

    class Starter(BaseCriterion):
        name = "starter"

        async def evaluate(self, actual, expected):
            started.set()
            return self._result(1.0)

    # Sequential evaluation would wait forever on the first sub-criterion.
    result = await asyncio.wait_for(CompositeCriterion([Waiter(), Starter()]).evaluate(RUN, CASE), 5)
    assert result.score == 1.0


async def test_empty_composite_scores_zero():
    result = await CompositeCriterion([]).evaluate(RUN, CASE)
    assert result.score == 0.0 and result.details["sub_results"] == []


async def test_a_skipped_llm_sub_criterion_counts_with_its_documented_score():
    # Document 000: a skipped LLM criterion scores 1.0, and OR takes the maximum of the sub-scores.
    # No expected final response (ResponseMatchCriterion skips), three expected tools.
    case = EvalCase(conversation=[Invocation(user_content="q", expected_tool_trajectory=[
        ToolCall(name="search"), ToolCall(name="refund"), ToolCall(name="email")])])
    run = ExecutionResult(actual_response="r", tool_calls=[ToolCall(name="search")])
    response_match = ResponseMatchCriterion(CriterionConfig.response_match())
    tools = ToolNameMatchCriterion()
    either = await CompositeCriterion([response_match, tools], require_all=False).evaluate(run, case)
    subs = either.details["sub_results"]
    assert subs[0]["skipped"] is True and subs[0]["score"] == 1.0
    assert subs[1]["score"] == pytest.approx(1 / 3)
    assert either.score == 1.0 and either.passed and not either.skipped
    assert "Skipped (their documented skip score counts): response_match_score" in either.reason

    both = await CompositeCriterion([response_match, tools], require_all=True).evaluate(run, case)
    assert both.score == pytest.approx(1 / 3) and not both.passed


async def test_all_sub_criteria_skipped_keeps_the_combined_score_and_flags_it():
    reported_zero = await CompositeCriterion([Fixed(0.0, skip=True)]).evaluate(RUN, CASE)
    assert reported_zero.skipped and reported_zero.score == 0.0 and not reported_zero.passed
    llm_skips = await CompositeCriterion(
        [ResponseMatchCriterion(CriterionConfig.response_match())]).evaluate(RUN, CASE)
    assert llm_skips.skipped and llm_skips.score == 1.0 and llm_skips.details["skipped"] is True


async def test_judge_outage_in_a_sub_criterion_marks_the_composite():
    result = await CompositeCriterion(
        [Fixed(1.0), Raises(JudgeUnavailable("judge down"))]).evaluate(RUN, CASE)
    assert result.error_kind == "judge"
    assert result.details["judge_unavailable"] is True
    assert "judge down" in result.error
    assert result.details["sub_results"][1]["error"].startswith("JudgeUnavailable")


async def test_judge_fallback_flag_in_a_sub_result_propagates():
    class Fallback(SyncCriterion):
        name = "fallback"

        def evaluate_sync(self, actual, expected):
            return self._result(0.5, {"reason": "No LLM provider available",
                                      "judge_unavailable": True})

    result = await CompositeCriterion([Fixed(1.0), Fallback()], require_all=False).evaluate(RUN, CASE)
    assert result.details["judge_unavailable"] is True and result.error_kind == "judge"


async def test_broken_sub_criterion_is_an_evaluator_error():
    result = await CompositeCriterion([Raises(ZeroDivisionError("boom"))]).evaluate(RUN, CASE)
    assert result.details["sub_results"][0]["details"]["reason"] == "ZeroDivisionError: boom"
    assert result.error_kind == "evaluator" and "boom" in result.error


async def test_composite_validate_config_includes_sub_criteria():
    bad = Fixed(1.0, "bad")
    bad.config = CriterionConfig.model_construct(threshold=2.0, num_samples=1)
    errors = CompositeCriterion([bad]).validate_config()
    assert errors and errors[0].startswith("bad: threshold")


# WeightedCriterion --------------------------------------------------------------------------


async def test_weighted_average_with_weights_not_summing_to_one():
    criterion = WeightedCriterion([(Fixed(1.0, "a"), 3), (Fixed(0.0, "b"), 1)])
    result = await criterion.evaluate(RUN, CASE)
    assert result.criterion == "weighted_criterion"
    assert result.score == 0.75 and not result.passed
    assert [(s["criterion"], s["weight"]) for s in result.details["sub_results"]] == [("a", 3), ("b", 1)]
    assert result.details["total_weight"] == 4


async def test_weighted_empty_scores_zero():
    result = await WeightedCriterion([]).evaluate(RUN, CASE)
    assert result.score == 0.0 and not result.passed


async def test_weighted_zero_total_weight_scores_zero():
    result = await WeightedCriterion([(Fixed(1.0), 0.0), (Fixed(1.0), 0)]).evaluate(RUN, CASE)
    assert result.score == 0.0
    assert "weight" in result.reason.lower()


async def test_weighted_rejects_negative_weights():
    with pytest.raises(ValueError, match="must not be negative"):
        WeightedCriterion([(Fixed(1.0, "a"), -1.0)])


async def test_weighted_counts_a_skipped_sub_criterion_with_its_reported_score():
    criterion = WeightedCriterion([(Fixed(0.5), 1), (Fixed(1.0, "llm"), 3),
                                   (ResponseMatchCriterion(CriterionConfig.response_match()), 4)])
    result = await criterion.evaluate(RUN, CASE)  # response_match skips at 1.0: no reference
    assert result.details["total_weight"] == 8
    assert result.score == pytest.approx((0.5 * 1 + 1.0 * 3 + 1.0 * 4) / 8)
    assert not result.skipped


async def test_weighted_runs_concurrently():
    gate = asyncio.Event()

    class Waiter(BaseCriterion):
        name = "waiter"

        async def evaluate(self, actual, expected):
            await gate.wait()
            return self._result(1.0)

    class Opener(BaseCriterion):
        name = "opener"

        async def evaluate(self, actual, expected):
            gate.set()
            return self._result(0.0)

    result = await asyncio.wait_for(
        WeightedCriterion([(Waiter(), 1), (Opener(), 1)]).evaluate(RUN, CASE), 5)
    assert result.score == 0.5


async def test_document_composite_example_runs():
    criterion = CompositeCriterion(
        criteria=[
            ToolNameMatchCriterion(),
            ContainsKeywordsCriterion(keywords=["refund"]),
        ],
        require_all=True,
        config=CriterionConfig(threshold=1.0),
    )
    case = EvalCase.single_turn("refund?", expected_tool_trajectory=[ToolCall(name="lookup")])
    good = ExecutionResult(actual_response="Your refund is on its way",
                           tool_calls=[ToolCall(name="lookup")])
    assert (await criterion.evaluate(good, case)).passed
    no_keyword = ExecutionResult(actual_response="Done", tool_calls=[ToolCall(name="lookup")])
    assert (await criterion.evaluate(no_keyword, case)).score == 0.0


async def test_a_known_failure_beats_a_sub_criterion_outage():
    """AND: a known 0.2 fails the gate whatever the judge would have said. Where the missing
    score could change the verdict, or the verdict would be a pass, it stays a judge error."""
    down = Raises(JudgeUnavailable("judge down"))
    failed = await CompositeCriterion([Fixed(0.2), down]).evaluate(RUN, CASE)
    assert failed.error_kind is None and failed.error is None and not failed.passed
    assert failed.score == 0.2 and failed.details["decided_despite_errors"] == ["raises"]
    assert "Decided whatever raises would have scored" in failed.details["reason"]
    either = await CompositeCriterion([Fixed(0.9), down], require_all=False).evaluate(RUN, CASE)
    assert either.error_kind == "judge"
    open_and = await CompositeCriterion([Fixed(0.9), down]).evaluate(RUN, CASE)
    assert open_and.error_kind == "judge"
    # Weighted: 0.1 x 3 of 4 with the outage weighted 1 cannot reach 0.5 (at most 0.325).
    weighted = await WeightedCriterion([(Fixed(0.1), 3.0), (down, 1.0)],
                                       config=CriterionConfig(threshold=0.5)).evaluate(RUN, CASE)
    assert weighted.error_kind is None and not weighted.passed
    undecided = await WeightedCriterion([(Fixed(0.6), 1.0), (down, 1.0)],
                                        config=CriterionConfig(threshold=0.5)).evaluate(RUN, CASE)
    assert undecided.error_kind == "judge"
