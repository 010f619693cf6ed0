"""The result of matching an actual sequence against an expected one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

A = TypeVar("A")
E = TypeVar("E")
Predicate = Callable[[A, E], bool]


@dataclass(frozen=True)
class MatchOutcome:
    """Which expected items found a partner, and the score the match mode gives that.

    ``pairs`` holds ``(expected_index, actual_index)``. ``denominator`` is what the matched count
    is divided by: the expected length, except for EXACT, which also counts extra actual items.
    """

    pairs: tuple[tuple[int, int], ...]
    expected_len: int
    actual_len: int
    denominator: int

    @property
    def matched(self) -> int:
        return len(self.pairs)

    @property
    def score(self) -> float:
        if self.denominator == 0:
            return 1.0
        return self.matched / self.denominator

    @property
    def missing(self) -> list[int]:
        """Indices of expected items without a partner."""
        hit = {e for e, _ in self.pairs}
        return [i for i in range(self.expected_len) if i not in hit]

    @property
    def unmatched_actual(self) -> list[int]:
        """Indices of actual items that no expected item claimed."""
        hit = {a for _, a in self.pairs}
        return [i for i in range(self.actual_len) if i not in hit]

