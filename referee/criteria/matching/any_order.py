"""ANY_ORDER: each expected item appears somewhere; order and extra items are ignored."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from referee.criteria.matching.outcome import MatchOutcome, Predicate


def match_any_order(actual: Sequence[Any], expected: Sequence[Any],
                    matches: Predicate) -> MatchOutcome:
    """Maximum one-to-one pairing (bipartite matching by augmenting paths).

    Greedy first-fit is not enough once wildcards exist: an expected call with empty args could
    take the only actual call that a later, more specific expectation needed.
    """
    candidates = [[j for j, a in enumerate(actual) if matches(a, e)] for e in expected]
    partner_of_actual: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for j in candidates[i]:
            if j in seen:
                continue
            seen.add(j)
            if j not in partner_of_actual or augment(partner_of_actual[j], seen):
                partner_of_actual[j] = i
                return True
        return False

    for i in range(len(expected)):
        augment(i, set())
    pairs = tuple(sorted((i, j) for j, i in partner_of_actual.items()))
    return MatchOutcome(pairs=pairs, expected_len=len(expected), actual_len=len(actual),
                        denominator=len(expected))
