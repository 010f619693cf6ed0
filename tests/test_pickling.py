"""Criteria travel to other processes (the Ray backend's workers) by pickling."""

from __future__ import annotations

import asyncio
import copyreg
import inspect
import pickle
from collections.abc import Callable

from referee import EvalCase, ExecutionResult, evaluators
from referee.config import EvalConfig
from referee.criteria.base import BaseCriterion
from referee.criteria.composite import CompositeCriterion, WeightedCriterion
from referee.criteria.registry import CRITERIA_REGISTRY, build_criteria
from referee.evaluators import CheckEvaluator, CustomRubric, GEval
from referee.evaluators.deterministic import (
    Contains,
    JSONSchema,
    JSONSchemaEval,
    Latency,
    MaxLatency,
    NotEmpty,
    RegexMatch,
    StartsWith,
)
from referee.judge.config import JudgeConfig
from referee.testing import ScriptedJudgeServer

CASE = EvalCase(input="How long does a refund take?", expected_output="5 days",
                context=["Refunds take 5 days."])
USED_ON = ExecutionResult(actual_response="The refund takes 5 days.")


def test_check_evaluator_pickles_with_its_prepared_questions() -> None:
    check = CheckEvaluator("The reply is polite", questions=["Is it polite?", "Is it kind?"])
    asyncio.run(check.prepare())  # takes its lock on this loop
    copy = pickle.loads(pickle.dumps(check))
    assert copy.resolved_questions == ["Is it polite?", "Is it kind?"]
    assert copy.name == check.name and copy.threshold == check.threshold
    asyncio.run(copy.prepare())  # a fresh lock, on another loop


def test_every_configured_criterion_and_deterministic_evaluator_pickles() -> None:
    criteria = build_criteria(EvalConfig.default()) + [Contains(["a"]), RegexMatch(r"\d+")]
    for criterion in criteria:
        copy = pickle.loads(pickle.dumps(criterion))
        assert type(copy) is type(criterion) and copy.name == criterion.name


# Built-in classes that need arguments, built from the scripted judge's config.
NEEDS_ARGUMENTS: dict[str, Callable[[JudgeConfig], BaseCriterion]] = {
    "CheckEvaluator": lambda judge: CheckEvaluator("The reply states the refund time",
                                                   judge=judge),
    "CustomRubric": lambda judge: CustomRubric([("Is the refund time stated?", True)],
                                               judge=judge),
    "GEval": lambda judge: GEval("The reply answers the question", runs=1, judge=judge),
    "Contains": lambda judge: Contains(["refund"]),
    "JSONSchema": lambda judge: JSONSchema({"type": "object"}),
    "JSONSchemaEval": lambda judge: JSONSchemaEval({"type": "object"}),
    "Latency": lambda judge: Latency(max_ms=500),
    "MaxLatency": lambda judge: MaxLatency(max_s=1),
    "RegexMatch": lambda judge: RegexMatch(r"\d+ days"),
    "StartsWith": lambda judge: StartsWith("The"),
    "CompositeCriterion": lambda judge: CompositeCriterion([Contains(["refund"]), NotEmpty()]),
    "WeightedCriterion": lambda judge: WeightedCriterion([(Contains(["refund"]), 2.0),
                                                         (NotEmpty(), 1.0)]),
}
# Classes that cannot be pickled, each with the reason (none today; keep the reason one line).
CANNOT_PICKLE: dict[str, str] = {}


def _built_in_criterion_classes() -> list[type[BaseCriterion]]:
    """Every criterion registered by name and every built-in evaluator, abstract bases left out."""
    classes = set(CRITERIA_REGISTRY.values())
    for name in evaluators.__all__:
        value = getattr(evaluators, name)
        if isinstance(value, type) and issubclass(value, BaseCriterion):
            classes.add(value)
    return sorted((c for c in classes if not inspect.isabstract(c)), key=lambda c: c.__name__)


def _plain(value: object, depth: int = 0) -> object:
    """An object's state as plain data, compared by value: not the pickle's bytes, whose memo
    numbering follows object sharing and set order, which a round trip need not keep."""
    if depth > 40 or isinstance(value, (str, bytes, int, float, bool, type(None))):
        return value
    if isinstance(value, dict):
        return {repr(_plain(k, depth + 1)): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item, depth + 1) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted(repr(_plain(item, depth + 1)) for item in value)
    if isinstance(value, type) or inspect.isroutine(value):
        return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', value)}"
    reducer = copyreg.dispatch_table.get(type(value))  # how pickle reduces re.Pattern, ...
    reduced = reducer(value) if reducer else value.__reduce_ex__(4)
    if isinstance(reduced, str):  # a global, pickled by name
        return reduced
    parts = [list(part) if part is not None and not isinstance(part, (tuple, dict, list))
             and hasattr(part, "__next__") else part for part in reduced[1:]]
    return type(value).__qualname__, _plain(parts, depth + 1)


async def test_every_registered_criterion_and_built_in_evaluator_pickles_after_use() -> None:
    """Each is built, prepared and used once on a case (lazy state included), then pickled:
    the copy holds the same state, so it lost nothing on the way."""
    classes = _built_in_criterion_classes()
    assert len(classes) >= 35  # the discovery found them all (a guard against an empty loop)
    with ScriptedJudgeServer("Yes") as server:
        server.add_rule("yes/no question(s) for this criterion",
                        '{"questions": ["Does it give the refund time?"]}')
        server.add_rule("The reply answers the question", '{"score": 0.9, "reason": "ok"}')
        judge = server.judge_config()
        unpicklable = []
        for cls in classes:
            if cls.__name__ in CANNOT_PICKLE:
                continue
            if cls.__name__ in NEEDS_ARGUMENTS:
                criterion = NEEDS_ARGUMENTS[cls.__name__](judge)
            elif "judge" in inspect.signature(cls).parameters:
                criterion = cls(judge=judge)
            else:
                criterion = cls()
            if not cls.__module__.startswith("referee.criteria.llm"):
                # (The 10xgraph-style LLM criteria take their judge from the run's config: built
                # and pickled here, used in their own tests.)
                if hasattr(criterion, "prepare"):
                    await criterion.prepare()
                await criterion.evaluate(USED_ON, CASE)
            try:
                copy = pickle.loads(pickle.dumps(criterion))
            except Exception as exc:  # collected, so one run names every class that fails
                unpicklable.append(f"{cls.__name__}: {type(exc).__name__}: {exc}")
                continue
            assert type(copy) is cls and copy.name == criterion.name
            assert _plain(copy) == _plain(criterion), cls.__name__
            if not cls.__module__.startswith("referee.criteria.llm"):
                again = await copy.evaluate(USED_ON, CASE)  # the copy works where it lands
                assert again.score == (await criterion.evaluate(USED_ON, CASE)).score
    assert unpicklable == []
