"""McNemar's test of paired pass/fail verdicts: did B's verdicts move one way more than chance?

Only the discordant pairs carry information: ``b`` cases A passed and B failed, ``c`` cases A
failed and B passed. Under "no difference" each discordant pair is a fair coin, so for few of
them the exact two-sided binomial (sign) test is used; from ``EXACT_BELOW`` discordant pairs on,
the chi-square statistic with Edwards' continuity correction, which is then close to exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

# The usual rule (e.g. Rosner, Fundamentals of Biostatistics): the chi-square approximation is
# trusted once there are 25 discordant pairs or more.
EXACT_BELOW = 25

McNemarMethod = Literal["exact", "chi-square", "none"]


def exact_binomial_two_sided(successes: int, trials: int) -> float:
    """Two-sided exact binomial test of p = 1/2 (the sign test): twice the smaller tail, at
    most 1. 1.0 with no trials."""
    if successes < 0 or trials < 0 or successes > trials:
        raise ValueError(f"need 0 <= successes <= trials, got {successes} of {trials}")
    if trials == 0:
        return 1.0
    low = min(successes, trials - successes)
    tail = sum(math.comb(trials, k) for k in range(low + 1))
    return min(1.0, 2 * tail / 2 ** trials)


def chi_square_one_df_sf(statistic: float) -> float:
    """P(X >= statistic) for a chi-square variable with one degree of freedom."""
    return math.erfc(math.sqrt(max(statistic, 0.0) / 2))


@dataclass(frozen=True)
class McNemarResult:
    """``only_a`` pairs passed in A alone, ``only_b`` in B alone; ``p_value`` two-sided."""

    only_a: int
    only_b: int
    p_value: float
    method: McNemarMethod
    statistic: float | None = None

    @property
    def discordant(self) -> int:
        return self.only_a + self.only_b


def mcnemar(only_a: int, only_b: int, *, exact_below: int = EXACT_BELOW) -> McNemarResult:
    """McNemar's test from the two discordant counts (exact below ``exact_below`` pairs)."""
    if only_a < 0 or only_b < 0:
        raise ValueError(f"discordant counts must be >= 0, got {only_a} and {only_b}")
    discordant = only_a + only_b
    if discordant == 0:
        return McNemarResult(only_a, only_b, 1.0, "none")
    if discordant < exact_below:
        return McNemarResult(only_a, only_b, exact_binomial_two_sided(only_b, discordant), "exact")
    # Continuity-corrected; a difference of 0 or 1 is no evidence at all, hence the floor at 0.
    statistic = max(abs(only_a - only_b) - 1, 0) ** 2 / discordant
    return McNemarResult(only_a, only_b, chi_square_one_df_sf(statistic), "chi-square", statistic)
