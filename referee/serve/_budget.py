"""The judge spend cap: past it, judged criteria are recorded as skipped for budget.

Spend is what the judge layer priced (``TokenUsage.cost_usd``) over the last hour and the last
day (sliding). The cap is checked when a case starts, so at most the cases already being scored
(``--concurrency``) can run past it. Judge replies of a model without a known price cost
nothing here and are counted apart (``unpriced_requests``), so the gap is visible.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

from referee.criteria.base import JudgedCriterion, criterion_label, criterion_threshold
from referee.execution import ExecutionResult
from referee.record import CaseResult
from referee.result import CriterionResult

HOUR_S = 3_600.0
DAY_S = 86_400.0
BUDGET_KEY = "skipped_for_budget"


class SpendCap:
    def __init__(self, *, per_hour: float | None = None, per_day: float | None = None,
                 history: Iterable[tuple[float, float]] = ()) -> None:
        self.per_hour = per_hour
        self.per_day = per_day
        self._spent: deque[tuple[float, float]] = deque(sorted(history))
        self.total_usd = 0.0
        self.unpriced_requests = 0

    def _window(self, now: float, span: float) -> float:
        return sum(usd for at, usd in self._spent if at > now - span)

    def spent(self, now: float | None = None) -> tuple[float, float]:
        """(last hour, last day) in USD."""
        now = time.time() if now is None else now
        while self._spent and self._spent[0][0] <= now - DAY_S:
            self._spent.popleft()
        return self._window(now, HOUR_S), self._window(now, DAY_S)

    def exhausted(self, now: float | None = None) -> str | None:
        """Why judged criteria must be skipped now, or None."""
        if self.per_hour is None and self.per_day is None:
            return None
        hour, day = self.spent(now)
        if self.per_hour is not None and hour >= self.per_hour:
            return f"judge spend ${hour:.4f} in the last hour reached the cap ${self.per_hour:g}"
        if self.per_day is not None and day >= self.per_day:
            return f"judge spend ${day:.4f} in the last day reached the cap ${self.per_day:g}"
        return None

    def add(self, result: CaseResult, now: float | None = None) -> float:
        """Charge a scored case's judge spend; returns it (USD)."""
        usd = 0.0
        for criterion in result.criterion_results:
            usage = criterion.token_usage
            if usage is None:
                continue
            if usage.cost_usd is not None:
                usd += usage.cost_usd
            elif usage.requests:
                self.unpriced_requests += usage.requests
        if usd:
            self._spent.append((time.time() if now is None else now, usd))
            self.total_usd += usd
        return usd


def is_judged(criterion: Any) -> bool:
    return isinstance(criterion, JudgedCriterion)


class SkippedForBudget:
    """A judged criterion's stand-in past the cap: same label and threshold, never judged."""

    def __init__(self, criterion: Any, reason: str) -> None:
        self.name = criterion_label(criterion)
        self.threshold = criterion_threshold(criterion)
        self.reason = reason

    async def evaluate(self, actual: ExecutionResult, expected: Any) -> CriterionResult:
        return CriterionResult(criterion=self.name, score=0.0, passed=False,
                               threshold=self.threshold, skipped=True,
                               details={"reason": f"skipped for budget: {self.reason}",
                                        "skipped": True, BUDGET_KEY: True})


def capped_criteria(criteria: Sequence[Any], reason: str) -> list[Any]:
    """The criteria with every judged one replaced by its budget stand-in."""
    return [SkippedForBudget(c, reason) if is_judged(c) else c for c in criteria]

