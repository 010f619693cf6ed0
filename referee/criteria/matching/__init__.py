"""Sequence matching shared by the trajectory and node-order criteria.

One module per match mode, each a pure function over two sequences and a ``matches(actual_item,
expected_item)`` predicate. The predicate need not be an equivalence (an expected tool call with
empty args matches any args), so the modes find an optimal pairing instead of comparing greedily.

The dispatch lives here, above the mode modules, so imports run one way: this package → the
modes → ``outcome``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from referee.config import MatchType
from referee.criteria.matching.any_order import match_any_order
from referee.criteria.matching.exact import match_exact
from referee.criteria.matching.in_order import match_in_order
from referee.criteria.matching.outcome import MatchOutcome, Predicate
from referee.criteria.matching.tool_calls import args_equal, tool_call_matches

_MODES: dict[MatchType, Callable[[Sequence[Any], Sequence[Any], Predicate], MatchOutcome]] = {
    MatchType.EXACT: match_exact,
    MatchType.IN_ORDER: match_in_order,
    MatchType.ANY_ORDER: match_any_order,
}


def match_sequences(match_type: MatchType, actual: Sequence[Any], expected: Sequence[Any],
                    matches: Predicate) -> MatchOutcome:
    """Match ``actual`` against ``expected`` in the mode ``match_type`` names."""
    return _MODES[MatchType(match_type)](actual, expected, matches)


__all__ = [
    "MatchOutcome",
    "args_equal",
    "match_any_order",
    "match_exact",
    "match_in_order",
    "match_sequences",
    "tool_call_matches",
]
