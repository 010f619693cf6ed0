"""The one criterion protocol: ``async evaluate(actual, expected) -> CriterionResult``."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from referee.case import EvalCase
from referee.config import CriterionConfig
from referee.execution import ExecutionResult
from referee.result import CriterionResult
from referee.usage import TokenUsage


@dataclass
class CaseScope:
    """The criteria scoring one case, visible to each of them while they run.

    The engine sets it around a case's criteria, so criteria can share work for that case
    (one judge request for several batched evaluators); ``shared`` holds that work.
    """

    criteria: tuple[Any, ...]
    shared: dict[Any, Any] = field(default_factory=dict)


CURRENT_CASE: ContextVar[CaseScope | None] = ContextVar("referee_current_case", default=None)


class BaseCriterion(ABC):
    """Scores one run between 0.0 and 1.0 and compares it to a threshold."""

    name: str = "base_criterion"
    description: str = ""

    def __init__(self, config: CriterionConfig | None = None) -> None:
        self.config = config if config is not None else CriterionConfig()

    @property
    def threshold(self) -> float:
        return self.config.threshold

    @property
    def is_enabled(self) -> bool:
        return self.config.enabled

    @abstractmethod
    async def evaluate(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        """Score one case."""

    def validate_config(self) -> list[str]:
        errors: list[str] = []
        if not 0.0 <= self.config.threshold <= 1.0:
            errors.append(f"threshold must be between 0.0 and 1.0, got {self.config.threshold}")
        if self.config.num_samples < 1:
            errors.append(f"num_samples must be at least 1, got {self.config.num_samples}")
        return errors

    def _result(self, score: float, details: dict[str, Any] | None = None,
                token_usage: TokenUsage | None = None) -> CriterionResult:
        score = float(score)
        if math.isnan(score):
            return self._failure("score is NaN")
        return CriterionResult(
            criterion=self.name,
            score=score,
            passed=score >= self.threshold,
            threshold=self.threshold,
            details=details or {},
            token_usage=token_usage,
        )

    def _failure(self, error: str) -> CriterionResult:
        # The error doubles as the reason, so ``details["reason"]`` is there on every result.
        return CriterionResult(
            criterion=self.name, score=0.0, passed=False, threshold=self.threshold, error=error,
            details={"reason": error},
        )

    def _skipped(self, reason: str) -> CriterionResult:
        """Not applicable to this case (e.g. a required field is missing): reported, not passed."""
        return CriterionResult(
            criterion=self.name, score=0.0, passed=False, threshold=self.threshold,
            details={"reason": reason, "skipped": True}, skipped=True,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, threshold={self.threshold})"


class SyncCriterion(BaseCriterion):
    """A criterion whose rule is pure computation: implement ``evaluate_sync``."""

    @abstractmethod
    def evaluate_sync(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        """Score one case synchronously."""

    async def evaluate(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        return self.evaluate_sync(actual, expected)
