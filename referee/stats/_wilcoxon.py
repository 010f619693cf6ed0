"""The Wilcoxon signed-rank test of paired score differences, and its rank-biserial effect size.

Zero differences are dropped (Wilcoxon's own treatment). With at most ``EXACT_MAX_N`` non-zero
differences and no tied magnitudes the p-value is exact, from the full distribution of the
positive rank sum; otherwise the normal approximation, its variance reduced for ties. Scores are
often ratios (2/3, 0.1 + 0.2), so differences are rounded to ``DECIMALS`` places before ranking:
two differences that are equal on paper tie, instead of ranking apart by a rounding error.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

EXACT_MAX_N = 50
DECIMALS = 12

WilcoxonMethod = Literal["exact", "normal", "none"]


@dataclass(frozen=True)
class WilcoxonResult:
    """``n`` non-zero differences (``zeros`` dropped); ``rank_sum_positive`` is T+."""

    n: int
    zeros: int
    rank_sum_positive: float
    rank_sum_negative: float
    p_value: float
    method: WilcoxonMethod
    z: float | None = None

    @property
    def rank_biserial(self) -> float | None:
        """Matched-pairs rank-biserial correlation (T+ - T-) / (T+ + T-): +1 when every
        difference is positive, -1 when every one is negative; None with no differences."""
        total = self.rank_sum_positive + self.rank_sum_negative
        return (self.rank_sum_positive - self.rank_sum_negative) / total if total else None


def average_ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, tied values sharing the mean of the ranks they span."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def _rank_sum_counts(n: int) -> list[int]:
    """How many of the 2**n sign patterns give each positive rank sum 0 .. n(n+1)/2."""
    counts = [1] + [0] * (n * (n + 1) // 2)
    for rank in range(1, n + 1):
        for total in range(len(counts) - 1, rank - 1, -1):
            counts[total] += counts[total - rank]
    return counts


def wilcoxon_signed_rank(differences: Sequence[float], *,
                         exact_max_n: int = EXACT_MAX_N) -> WilcoxonResult:
    """Two-sided Wilcoxon signed-rank test that the differences are centred on 0."""
    rounded = [round(d, DECIMALS) for d in differences]
    nonzero = [d for d in rounded if d != 0]
    n, zeros = len(nonzero), len(rounded) - len(nonzero)
    if n == 0:
        return WilcoxonResult(0, zeros, 0.0, 0.0, 1.0, "none")
    magnitudes = [abs(d) for d in nonzero]
    ranks = average_ranks(magnitudes)
    positive = sum(r for r, d in zip(ranks, nonzero) if d > 0)
    negative = n * (n + 1) / 2 - positive
    ties = [size for size in Counter(magnitudes).values() if size > 1]
    if n <= exact_max_n and not ties:
        counts = _rank_sum_counts(n)
        observed = round(positive)
        below, above = sum(counts[: observed + 1]), sum(counts[observed:])
        p = min(1.0, 2 * min(below, above) / 2 ** n)
        return WilcoxonResult(n, zeros, positive, negative, p, "exact")
    mean = n * (n + 1) / 4
    variance = n * (n + 1) * (2 * n + 1) / 24 - sum(t ** 3 - t for t in ties) / 48
    if variance <= 0:
        return WilcoxonResult(n, zeros, positive, negative, 1.0, "normal")
    z = (positive - mean) / math.sqrt(variance)
    return WilcoxonResult(n, zeros, positive, negative, math.erfc(abs(z) / math.sqrt(2)),
                          "normal", z)
