"""IN_ORDER: the expected items appear in their order; extra items in between are allowed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from referee.criteria.matching.outcome import MatchOutcome, Predicate


def match_in_order(actual: Sequence[Any], expected: Sequence[Any],
                   matches: Predicate) -> MatchOutcome:
    """Longest order-preserving pairing (an LCS under ``matches``).

    A greedy scan would stop crediting after the first missing item: expected ``[a, b, c]``
    against actual ``[a, c]`` would score 1/3 although ``a`` and ``c`` do appear in order.
    """
    n, m = len(expected), len(actual)
    # best[i][j]: most pairs between expected[i:] and actual[j:].
    best = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            if matches(actual[j], expected[i]):
                best[i][j] = 1 + best[i + 1][j + 1]
            else:
                best[i][j] = max(best[i + 1][j], best[i][j + 1])
    pairs: list[tuple[int, int]] = []
    i = j = 0
    while i < n and j < m:
        if matches(actual[j], expected[i]) and best[i][j] == 1 + best[i + 1][j + 1]:
            pairs.append((i, j))
            i += 1
            j += 1
        elif best[i + 1][j] >= best[i][j + 1]:
            i += 1
        else:
            j += 1
    return MatchOutcome(pairs=tuple(pairs), expected_len=n, actual_len=m, denominator=n)
