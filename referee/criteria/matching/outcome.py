"""The result of matching an actual sequence against an expected one."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from referee.config import MatchType

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


def match_sequences(match_type: MatchType, actual: Sequence[A], expected: Sequence[E],
                    matches: Predicate) -> MatchOutcome:
    """Dispatch to the module of ``match_type``."""
    # Imported here: the mode modules import MatchOutcome from this one.
    from referee.criteria.matching.any_order import match_any_order
    from referee.criteria.matching.exact import match_exact
    from referee.criteria.matching.in_order import match_in_order

    modes = {
        MatchType.EXACT: match_exact,
        MatchType.IN_ORDER: match_in_order,
        MatchType.ANY_ORDER: match_any_order,
    }
    return modes[MatchType(match_type)](actual, expected, matches)
