"""One signature scores a case, ``async evaluate(actual, expected)``; the peers' ways of calling
(multivon's by-hand ``evaluate(case, output)``) are adapters over it, and a rule that both API
surfaces document is implemented once (issue 29)."""

from __future__ import annotations

import inspect

import pytest

from referee import EvalCase, ExecutionResult
from referee.compat.multivon import MultivonSurface
from referee.criteria import ContainsKeywordsCriterion, ExactMatchCriterion
from referee.criteria.base import SyncCriterion
from referee.evaluators import JudgeEvaluator
from referee.evaluators import deterministic as deterministic_module
from referee.evaluators.deterministic import Contains, ExactMatch

TWINS = [(ExactMatch, ExactMatchCriterion), (Contains, ContainsKeywordsCriterion)]


@pytest.mark.parametrize(("multivon", "tenxgraph"), TWINS)
def test_a_rule_both_surfaces_document_is_implemented_once(multivon: type, tenxgraph: type) -> None:
    assert issubclass(multivon, tenxgraph)
    assert multivon.evaluate_sync is tenxgraph.evaluate_sync
    assert multivon.name == tenxgraph.name or multivon is Contains  # multivon names it "contains"


def test_the_twins_keep_each_surfaces_settings() -> None:
    case = EvalCase(input="q", expected_output=" Paris ")
    said = ExecutionResult(actual_response="paris")
    assert ExactMatch().evaluate_sync(said, case).passed  # multivon: folded case, both stripped
    assert not ExactMatchCriterion().evaluate_sync(said, case).passed  # 10xgraph: as written
    own = ContainsKeywordsCriterion(["PARIS", "rome"])
    assert own.evaluate_sync(said, case).score == 0.5
    assert Contains(["PARIS", "rome"], match_any=True).evaluate_sync(said, case).score == 1.0
    assert Contains(["PARIS"], case_sensitive=True).evaluate_sync(said, case).score == 0.0
    with pytest.raises(ValueError, match="at least one substring"):
        Contains([])
    assert Contains("a b").substrings == ["a b"]


def test_no_deterministic_evaluator_has_a_second_signature() -> None:
    evaluators = [value for value in vars(deterministic_module).values()
                  if inspect.isclass(value) and issubclass(value, MultivonSurface)
                  and issubclass(value, SyncCriterion)]
    assert len(evaluators) >= 12
    for cls in evaluators:
        assert not hasattr(cls, "check"), cls.__name__  # check(output, case, actual) is gone
        # The by-hand call comes from the MRO, not from rewriting evaluate when the class is made.
        assert "evaluate" not in cls.__dict__, cls.__name__
        if issubclass(cls, MultivonSurface) and not inspect.isabstract(cls):
            assert cls.evaluate is MultivonSurface.evaluate, cls.__name__


async def test_both_calls_reach_the_one_rule() -> None:
    case = EvalCase(input="q", expected_output="ok")
    check = ExactMatch()
    by_hand = check.evaluate(case, " OK ")
    by_protocol = await check.evaluate(ExecutionResult(actual_response=" OK "), case)
    assert by_hand == by_protocol and by_hand.passed
    assert check.evaluate(case=case, output="no").score == 0.0


def test_an_evaluator_base_without_a_protocol_stays_abstract() -> None:
    assert inspect.isabstract(JudgeEvaluator)


def test_the_folded_twins_describe_their_settings_as_before() -> None:
    # meta.json records public attributes and resume compares them: a run stored before the
    # fold must resume with the same evaluators.
    from referee.run.describe import describe_criteria

    contains, exact = describe_criteria([Contains(["answer"]), ExactMatch()])
    assert {k: v for k, v in contains["settings"].items() if k != "config"} == {
        "case_sensitive": False, "match_any": False, "substrings": ["answer"], "threshold": 1.0}
    assert {k: v for k, v in exact["settings"].items() if k != "config"} == {
        "case_sensitive": False, "threshold": 1.0}
    (keywords,) = describe_criteria([ContainsKeywordsCriterion(["a"])])
    assert set(keywords["settings"]) == {"config", "threshold"}
