"""The one criterion protocol (design decision 3): what the engine and the run session type
criteria with, and the optional parts they ask a criterion about instead of its class name."""

from __future__ import annotations

import pytest

from referee import EvalCase, EvalSuite
from referee.config import CriterionConfig
from referee.criteria import CRITERIA_REGISTRY
from referee.criteria.base import (
    Criterion,
    JudgedCriterion,
    PreparedCriterion,
    criterion_label,
    criterion_threshold,
)
from referee.criteria.judged import JudgedCriterionBase
from referee.evaluators import CheckEvaluator, Contains, Faithfulness, GEval
from referee.execution import ExecutionResult
from referee.judge import DEFAULT_JUDGES
from referee.result import CriterionResult
from referee.run.session import NO_PROVIDER, judges_by_criterion


@pytest.fixture(autouse=True)
def _no_judge_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "GOOGLE_API_KEY", "GEMINI_API_KEY",
                 "GOOGLE_GENAI_USE_VERTEXAI", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("cls", sorted({c for c in CRITERIA_REGISTRY.values()
                                         if c.__name__ != "WeightedCriterion"},
                                        key=lambda c: c.__name__))
def test_every_registered_criterion_meets_the_protocol(cls: type) -> None:
    criterion = cls(CriterionConfig())
    assert isinstance(criterion, Criterion)


def test_both_surfaces_evaluators_meet_it_and_say_how_their_judge_is_chosen() -> None:
    from referee.criteria import ResponseMatchCriterion

    contains, faithful = Contains("x"), Faithfulness()
    check = CheckEvaluator("politeness", questions=["Is it polite?"])
    agent_style = ResponseMatchCriterion(CriterionConfig())
    assert all(isinstance(c, Criterion) for c in (contains, faithful, check, agent_style))
    # One judged-criterion base; the surface's rules are its settings (issue 29 retired the
    # judge_surface string).
    judged = (agent_style, faithful, GEval(criteria="clear"))
    assert all(isinstance(c, JudgedCriterionBase) for c in judged)
    assert agent_style.judge_defaults == DEFAULT_JUDGES["AgentEvaluator"]
    assert faithful.judge_defaults == judged[2].judge_defaults == DEFAULT_JUDGES["EvalSuite"]
    assert not isinstance(contains, (JudgedCriterion, JudgedCriterionBase))
    assert isinstance(check, PreparedCriterion) and not isinstance(contains, PreparedCriterion)


class _OwnJudgedCheck:
    """A user's own judged check, named by model the 10xgraph way, with no referee base class."""

    name = "own_judged"
    threshold = 0.5
    judge_defaults = DEFAULT_JUDGES["AgentEvaluator"]
    config = CriterionConfig(judge_model="gemini-2.5-flash")

    def judge_config(self) -> None:
        return None  # no provider can serve it: the documented 0.5 placeholder

    async def evaluate(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        return CriterionResult(criterion=self.name, score=0.5, passed=True, threshold=0.5)


def test_the_judge_surface_is_asked_of_the_criterion_not_read_from_class_names() -> None:
    per = judges_by_criterion([_OwnJudgedCheck()])
    assert per == {"own_judged": {"model": "gemini-2.5-flash", "judge": NO_PROVIDER}}


def test_an_object_with_only_evaluate_is_read_as_documented() -> None:
    class Bare:
        async def evaluate(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
            return CriterionResult(criterion="bare", score=1.0, passed=True, threshold=0.0)

    class BrokenThreshold(Bare):
        @property
        def threshold(self) -> float:
            raise RuntimeError("broken")

    assert (criterion_label(Bare()), criterion_threshold(Bare())) == ("Bare", 0.0)
    assert criterion_threshold(BrokenThreshold()) == 0.0
    suite = EvalSuite("bare").add_evaluator(Bare())
    suite.add_case(EvalCase(input="q"))
    report = suite.run(lambda q: "ok", verbose=False, save=False)
    assert report.cases[0].status == "PASSED"


def test_an_evaluator_with_only_a_threshold_needs_no_criterion_config() -> None:
    from referee.criteria.base import BaseCriterion

    class Longer(BaseCriterion):
        name = "longer"

        async def evaluate(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
            return self._result(min(len(actual.actual_response or "") / 10, 1.0))

    check = Longer(threshold=0.3)
    assert check.threshold == 0.3 and Longer().threshold == CriterionConfig().threshold
    with pytest.raises(TypeError, match="not both"):
        Longer(CriterionConfig(), threshold=0.3)
    suite = EvalSuite("longer").add_evaluator(check)
    suite.add_case(EvalCase(input="q"))
    report = suite.run(lambda q: "four", verbose=False, save=False)
    assert (report.cases[0].criterion_results[0].score, report.cases[0].status) == (0.4, "PASSED")
