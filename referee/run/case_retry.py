"""``JudgeRetry``: run a case again, end to end, when it ends in a transient status.

The judge layer already retries each request (``JudgeConfig.max_retries``, Retry-After); this
policy is the coarser, opt-in net of the multivon-style ``EvalSuite`` API
(``suite.run(..., judge_retry=JudgeRetry(...))``): a case whose status is in ``retry_on``
(``JUDGE_ERROR`` by default) runs again, model call included, up to ``max_attempts`` times in
all. Quality failures are never retried. The errors of the attempts that prompted a retry are
kept on the case (``CaseResult.retry_errors``, ``retry_attempts``).
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from dataclasses import dataclass
from typing import Any

from referee.record import CaseStatus

__all__ = ["JudgeRetry", "async_sleep_for_attempt", "should_retry", "sleep_for_attempt"]


def _status_value(status: Any) -> str:
    """multivon's lower-case spelling of a status, from a CaseStatus or any accepted string."""
    return CaseStatus(status).peer_value


def _check(name: str, value: float, minimum: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"JudgeRetry.{name} must be a finite number, got {value!r}")
    if value < minimum:
        raise ValueError(f"JudgeRetry.{name} must be >= {minimum:g}, got {value}")


@dataclass(frozen=True)
class JudgeRetry:
    """How often, and after what pause, a case that ended in a transient status runs again.

    ``max_attempts`` counts the first run. Before attempt N (N >= 2) the pause is
    ``base_backoff * factor ** (N - 2)`` seconds, moved by up to ``± jitter`` of itself, then
    clamped to ``[0, max_backoff]``. ``retry_on`` holds statuses (``EvalStatus`` members or
    their strings, either spelling); ``()`` turns retrying off. Frozen, so suites sharing a
    policy cannot change it under each other.
    """

    max_attempts: int = 3
    base_backoff: float = 1.0
    factor: float = 2.0
    jitter: float = 0.1
    max_backoff: float = 60.0
    retry_on: tuple[Any, ...] = ("judge_error",)

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int) \
                or self.max_attempts < 1:
            raise ValueError(f"JudgeRetry.max_attempts must be an integer >= 1, "
                             f"got {self.max_attempts!r}")
        _check("base_backoff", self.base_backoff, 0.0)
        _check("factor", self.factor, 1.0)
        _check("jitter", self.jitter, 0.0)
        _check("max_backoff", self.max_backoff, 0.0)
        if isinstance(self.retry_on, str):
            raise ValueError("JudgeRetry.retry_on must be a tuple of statuses, "
                             f"got the string {self.retry_on!r}")
        try:
            statuses = tuple(self.retry_on)
            for status in statuses:
                _status_value(status)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"JudgeRetry.retry_on: {exc}") from None
        object.__setattr__(self, "retry_on", statuses)

    def normalized_retry_on(self) -> frozenset[str]:
        """``retry_on`` as multivon's lower-case status strings."""
        return frozenset(_status_value(status) for status in self.retry_on)

    def backoff_for(self, attempt: int) -> float:
        """Seconds to wait before attempt ``attempt`` (1-based; none before the first)."""
        if attempt <= 1:
            return 0.0
        pause = self.base_backoff * self.factor ** (attempt - 2)
        if self.jitter > 0 and pause > 0:
            spread = pause * self.jitter
            pause += random.uniform(-spread, spread)
        # Jitter first, then the clamp: the cap holds whatever the draw.
        return max(0.0, min(pause, self.max_backoff))


def should_retry(status: Any, policy: JudgeRetry) -> bool:
    """Whether a case that ended in ``status`` runs again under ``policy``."""
    return _status_value(status) in policy.normalized_retry_on()


def sleep_for_attempt(policy: JudgeRetry, attempt: int) -> float:
    """Wait before ``attempt`` (blocking); returns the seconds waited."""
    pause = policy.backoff_for(attempt)
    if pause > 0:
        time.sleep(pause)
    return pause


async def async_sleep_for_attempt(policy: JudgeRetry, attempt: int) -> float:
    """Wait before ``attempt`` without blocking the event loop; returns the seconds waited."""
    pause = policy.backoff_for(attempt)
    if pause > 0:
        await asyncio.sleep(pause)
    return pause
