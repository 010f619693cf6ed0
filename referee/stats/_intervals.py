"""Interval estimates of a mean (seeded percentile bootstrap) and of a proportion (Wilson).

The record's intervals, the comparison of two runs (a paired bootstrap is this bootstrap over
the per-case differences), repeated-run trials, calibration and pairwise judging all use them.
Plain Python, seeded, so that a report reproduces.
"""

from __future__ import annotations

import math
import random
from statistics import NormalDist

BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 20261201


def bootstrap_mean_ci(values: list[float], *, confidence: float = 0.95,
                      resamples: int = BOOTSTRAP_RESAMPLES,
                      seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """Percentile interval of the mean of ``values`` (paired differences, case scores),
    seeded so that reports reproduce; (0.0, 0.0) for no values, the value itself for one."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    n = len(values)
    if n == 0:
        return 0.0, 0.0
    if n == 1:
        return values[0], values[0]
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(values, k=n)) / n for _ in range(resamples))
    tail = (1.0 - confidence) / 2
    return means[int(tail * (resamples - 1))], means[int((1.0 - tail) * (resamples - 1))]


def wilson_bounds(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a proportion (sound at small n and near 0 or 1);
    (0.0, 1.0) when there were no trials."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    if trials == 0:
        return 0.0, 1.0
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    rate = successes / trials
    denominator = 1 + z * z / trials
    centre = (rate + z * z / (2 * trials)) / denominator
    spread = z * math.sqrt(rate * (1 - rate) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - spread), min(1.0, centre + spread)
