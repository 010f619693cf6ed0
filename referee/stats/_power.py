"""Minimum detectable effects of paired comparisons: how large a change this many cases can show.

Both are normal approximations for a two-sided test at ``alpha`` with the given ``power``; they
say what a comparison could have seen, so that "no real difference" is read together with "a
difference smaller than this would have gone unseen".
"""

from __future__ import annotations

import math
from statistics import NormalDist

ALPHA = 0.05
POWER = 0.80

_NORMAL = NormalDist()


def _z(alpha: float, power: float) -> tuple[float, float]:
    if not 0.0 < alpha < 1.0 or not 0.0 < power < 1.0:
        raise ValueError(f"alpha and power must be between 0 and 1, got {alpha} and {power}")
    return _NORMAL.inv_cdf(1 - alpha / 2), _NORMAL.inv_cdf(power)


def fewest_one_sided_pairs(alpha: float = ALPHA) -> int:
    """The fewest discordant pairs, all one way, that the exact test calls significant."""
    k = 1
    while 2 * 0.5 ** k > alpha:
        k += 1
    return k


def mcnemar_power(n: int, change: float, discordant_rate: float, alpha: float = ALPHA) -> float:
    """Approximate power of McNemar's test (Connor, 1987) for a change of ``change`` in the pass
    rate over ``n`` paired cases whose verdicts disagree at ``discordant_rate`` (at least
    ``change``, since every changed verdict is a discordant pair)."""
    z_alpha = _NORMAL.inv_cdf(1 - alpha / 2)
    change = abs(change)
    rate = max(discordant_rate, change)
    if n <= 0 or rate <= 0:
        return 0.0
    spread = math.sqrt(max(rate - change * change, 1e-12))
    return _NORMAL.cdf((math.sqrt(n) * change - z_alpha * math.sqrt(rate)) / spread)


def paired_proportion_mde(n: int, discordant_rate: float, *, alpha: float = ALPHA,
                          power: float = POWER) -> float:
    """The smallest change of a pass rate that McNemar's test detects with ``power`` over ``n``
    paired cases at the observed ``discordant_rate``; never below the exact test's floor (a few
    pairs all one way), and 1.0 when no change is detectable."""
    _z(alpha, power)
    if n <= 0:
        return 1.0
    floor = fewest_one_sided_pairs(alpha) / n
    if floor >= 1.0 or mcnemar_power(n, 1.0, discordant_rate, alpha) < power:
        return 1.0
    low, high = 0.0, 1.0  # the power rises with the change: bisect for where it reaches power
    for _ in range(60):
        middle = (low + high) / 2
        if mcnemar_power(n, middle, discordant_rate, alpha) >= power:
            high = middle
        else:
            low = middle
    return max(high, floor)


def paired_mean_mde(n: int, sd_of_differences: float, *, alpha: float = ALPHA,
                    power: float = POWER) -> float | None:
    """The smallest mean change of a score that a paired test detects with ``power`` over ``n``
    cases whose differences spread by ``sd_of_differences``; None below two cases."""
    z_alpha, z_power = _z(alpha, power)
    if n < 2:
        return None
    return (z_alpha + z_power) * sd_of_differences / math.sqrt(n)
