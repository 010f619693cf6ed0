"""Document 000's code examples for the deterministic criteria, run as written (import line changed).

``execution`` and ``case`` stand for the ExecutionResult and EvalCase the evaluator builds.
"""

import asyncio

import pytest

from referee import EvalCase, EvalConfig, ExecutionResult, ToolCall


@pytest.fixture
def case():
    return EvalCase.single_turn(
        "Can I get a refund?",
        "You can get a refund within 7 days.",
        expected_tool_trajectory=[ToolCall(name="lookup_order"), ToolCall(name="refund_policy")],
        expected_node_order=["router", "support"],
    )


@pytest.fixture
def execution():
    return ExecutionResult(
        actual_response="You can get a refund within 7 days.",
        tool_calls=[ToolCall(name="lookup_order", args={"id": 1}), ToolCall(name="refund_policy")],
        node_visits=["router", "support"],
    )


async def test_common_interface(execution, case):
    from referee import BaseCriterion, CriterionConfig  # noqa: F401
    from referee import ToolNameMatchCriterion as SomeCriterion

    execution_result, eval_case = execution, case
    criterion = SomeCriterion(config=CriterionConfig(threshold=0.9))
    result = await criterion.evaluate(execution_result, eval_case)  # CriterionResult
    assert result.threshold == 0.9 and result.passed


async def test_exact_match_example(execution, case, capsys):
    from referee import ExactMatchCriterion

    criterion = ExactMatchCriterion()
    result = await criterion.evaluate(execution, case)
    print(result.score, result.details["match"])
    assert capsys.readouterr().out == "1.0 True\n"


async def test_contains_keywords_example(execution, case):
    from referee import ContainsKeywordsCriterion, CriterionConfig

    criterion = ContainsKeywordsCriterion(
        config=CriterionConfig.contains_keywords(
            keywords=["refund", "7 days"],
            threshold=1.0,
        ),
    )
    result = await criterion.evaluate(execution, case)
    assert result.score == 1.0 and result.passed


async def test_trajectory_example(execution, case):
    from referee import CriterionConfig, MatchType, TrajectoryMatchCriterion

    criterion = TrajectoryMatchCriterion(
        config=CriterionConfig.trajectory(
            threshold=1.0,
            match_type=MatchType.IN_ORDER,
            check_args=True,
        ),
    )
    result = await criterion.evaluate(execution, case)
    assert result.passed  # expected calls have empty args, so any args are accepted


async def test_node_order_example(execution, case):
    from referee import CriterionConfig, MatchType, NodeOrderMatchCriterion

    criterion = NodeOrderMatchCriterion(
        config=CriterionConfig.node_order(threshold=1.0, match_type=MatchType.IN_ORDER),
    )
    assert (await criterion.evaluate(execution, case)).passed


async def test_composite_example(execution, case):
    from referee import (
        CompositeCriterion,
        ContainsKeywordsCriterion,
        CriterionConfig,
        ToolNameMatchCriterion,
    )

    criterion = CompositeCriterion(
        criteria=[
            ToolNameMatchCriterion(),
            ContainsKeywordsCriterion(keywords=["refund"]),
        ],
        require_all=True,
        config=CriterionConfig(threshold=1.0),
    )
    result = await criterion.evaluate(execution, case)
    assert result.passed and len(result.details["sub_results"]) == 2


def test_weighted_example_constructs():
    from referee import (
        CriterionConfig,
        ResponseMatchCriterion,
        ToolNameMatchCriterion,
        WeightedCriterion,
    )

    criterion = WeightedCriterion(
        criteria_weights=[
            (ToolNameMatchCriterion(), 0.3),
            (ResponseMatchCriterion(), 0.7),
        ],
        config=CriterionConfig(threshold=0.8),
    )
    assert [w for _, w in criterion.criteria_weights] == [0.3, 0.7]
    assert criterion.name == "weighted_criterion" and criterion.threshold == 0.8


async def test_sync_criterion_example(execution, case):
    from referee import SyncCriterion

    class MaxLengthCriterion(SyncCriterion):
        name = "max_length"
        description = "Response must stay under 500 characters"

        def evaluate_sync(self, actual, expected):
            length = len(actual.actual_response)
            return self._result(
                1.0 if length <= 500 else 0.0,
                {"length": length},
            )

    result = await MaxLengthCriterion().evaluate(execution, case)
    assert result.criterion == "max_length" and result.passed
    assert result.details == {"length": len(execution.actual_response)}

    from referee.criteria import CRITERIA_REGISTRY

    CRITERIA_REGISTRY["max_length"] = MaxLengthCriterion
    try:
        assert CRITERIA_REGISTRY["max_length"] is MaxLengthCriterion
    finally:
        del CRITERIA_REGISTRY["max_length"]


async def test_base_criterion_example(execution, case):
    from referee import BaseCriterion

    class PoliteCriterion(BaseCriterion):
        name = "polite"
        description = "Response must contain a courtesy word"

        async def evaluate(self, actual, expected):
            await asyncio.sleep(0)  # replace with a real async call
            ok = "please" in actual.actual_response.lower()
            return self._result(1.0 if ok else 0.0, {"polite": ok})

    result = await PoliteCriterion().evaluate(execution, case)
    assert result.score == 0.0 and result.details == {"polite": False}


def test_abstract_criteria_cannot_be_instantiated():
    from referee import BaseCriterion, SyncCriterion

    class NoEvaluate(BaseCriterion):
        name = "x"

    class NoEvaluateSync(SyncCriterion):
        name = "y"

    for cls in (NoEvaluate, NoEvaluateSync):
        with pytest.raises(TypeError, match="abstract"):
            cls()


def test_enable_exact_match_field_is_an_error():
    with pytest.raises(ValueError) as info:
        EvalConfig().enable_criterion("exact_match")
    assert str(info.value) == "Unknown criterion field: 'exact_match'"


async def test_unawaited_evaluate_is_a_coroutine(execution, case):
    from referee import ExactMatchCriterion

    pending = ExactMatchCriterion().evaluate(execution, case)
    assert asyncio.iscoroutine(pending)
    assert (await pending).score == 1.0


async def test_base_criterion_members_and_helpers(execution, case):
    from referee import BaseCriterion, CriterionConfig, CriterionResult

    class Flaky(BaseCriterion):
        name = "flaky"
        description = "Fails with an error when the response is empty"

        async def evaluate(self, actual, expected):
            if not actual.actual_response:
                return self._failure("no response to check")
            return self._result(0.75, {"reason": "three quarters"})

    default = Flaky()
    assert default.config == CriterionConfig()  # config=None builds a default CriterionConfig
    assert (default.threshold, default.is_enabled, default.validate_config()) == (0.8, True, [])

    criterion = Flaky(config=CriterionConfig(threshold=0.7, enabled=False))
    assert (criterion.threshold, criterion.is_enabled) == (0.7, False)

    ok = await criterion.evaluate(execution, case)
    assert isinstance(ok, CriterionResult)
    assert (ok.criterion, ok.score, ok.passed, ok.threshold) == ("flaky", 0.75, True, 0.7)
    assert ok.reason == "three quarters" and ok.error is None

    failed = await criterion.evaluate(ExecutionResult(), case)
    assert (failed.score, failed.passed, failed.error) == (0.0, False, "no response to check")
    assert failed.reason == "no response to check"

    # validate_config reports a config that was made invalid after construction.
    criterion.config.threshold = 1.5
    criterion.config.num_samples = 0
    assert criterion.validate_config() == ["threshold must be between 0.0 and 1.0, got 1.5",
                                           "num_samples must be at least 1, got 0"]
