"""EXACT: the same items in the same positions, nothing more."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from referee.criteria.matching.outcome import MatchOutcome, Predicate


def match_exact(actual: Sequence[Any], expected: Sequence[Any], matches: Predicate) -> MatchOutcome:
    """Position-by-position comparison over the longer of the two sequences.

    Dividing by the longer length is what makes EXACT reject extra items: each extra actual item
    is a position where nothing was expected, so it costs as much as a wrong item. With nothing
    expected this gives 1.0 only when nothing happened.
    """
    pairs = tuple(
        (i, i) for i, (a, e) in enumerate(zip(actual, expected)) if matches(a, e)
    )
    return MatchOutcome(
        pairs=pairs,
        expected_len=len(expected),
        actual_len=len(actual),
        denominator=max(len(expected), len(actual)),
    )
