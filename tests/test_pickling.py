"""Criteria travel to other processes (the Ray backend's workers) by pickling."""

from __future__ import annotations

import asyncio
import pickle

from referee.config import EvalConfig
from referee.criteria.registry import build_criteria
from referee.evaluators import CheckEvaluator
from referee.evaluators.deterministic import Contains, RegexMatch


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
