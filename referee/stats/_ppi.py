"""Prediction-powered inference of a mean: the judge's mean over many cases, corrected by the
few cases a person scored too.

A judge scores every case; a person scores a random subset. The judge's mean is cheap and
precise but biased by whatever the judge gets wrong; the person's mean is unbiased but
imprecise. Prediction-powered inference (Angelopoulos et al., Science 2023) combines them:

    estimate = lambda * mean(judge on unlabelled) + mean(person - lambda * judge on labelled)

which is unbiased for any lambda, because the labelled rows measure the judge's bias exactly
where both are known. lambda = 1 is classic PPI; the power-tuned lambda (PPI++, Angelopoulos,
Duchi and Zrnic 2023) minimises the variance and is clipped to [0, 1], so the estimate is never
wider than the person's mean alone (lambda = 0). The interval is the normal one from the two
independent parts' variances. The labelled rows must be a random sample of the cases.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist


@dataclass(frozen=True)
class CorrectedMean:
    """The judge's mean, the correction the labelled rows make, and the corrected interval."""

    value: float
    low: float
    high: float
    judge_mean: float  # over every case the judge scored
    correction: float  # value - judge_mean: how far the labelled rows move the judge's mean
    weight: float  # lambda
    labelled: int
    unlabelled: int
    confidence: float

    def describe(self) -> str:
        return (f"judge {self.judge_mean:.3f}; corrected {self.value:.3f} ({self.correction:+.3f}) "
                f"[{self.low:.3f}, {self.high:.3f}] ({self.confidence:.0%}, prediction-powered, "
                f"{self.labelled} labelled of {self.labelled + self.unlabelled})")


def _variance(values: Sequence[float]) -> float:
    return statistics.variance(values) if len(values) > 1 else 0.0


def _covariance(x: Sequence[float], y: Sequence[float]) -> float:
    if len(x) < 2:
        return 0.0
    mean_x, mean_y = statistics.fmean(x), statistics.fmean(y)
    return sum((a - mean_x) * (b - mean_y) for a, b in zip(x, y)) / (len(x) - 1)


def prediction_powered_mean(unlabelled_judge: Sequence[float], labelled_judge: Sequence[float],
                            labelled_truth: Sequence[float], *, confidence: float = 0.95,
                            tuned: bool = True) -> CorrectedMean:
    """The corrected mean of what ``labelled_truth`` measures, from the judge's scores on the
    cases nobody labelled and the judge's and the person's scores on those somebody did
    (paired, in the same order). ``tuned=False`` is classic PPI (lambda = 1)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    if len(labelled_judge) != len(labelled_truth):
        raise ValueError(f"{len(labelled_judge)} judge scores but {len(labelled_truth)} "
                         "labels: they must be paired")
    n, big_n = len(labelled_truth), len(unlabelled_judge)
    if n < 2:
        raise ValueError(f"need at least 2 labelled rows, got {n}")
    if big_n < 1:
        raise ValueError("need at least 1 unlabelled row (otherwise the labels' own mean is "
                         "the estimate)")
    judge_variance = _variance(list(unlabelled_judge) + list(labelled_judge))
    weight = 1.0
    if tuned:
        weight = (_covariance(labelled_judge, labelled_truth)
                  / ((1 + n / big_n) * judge_variance)) if judge_variance > 0 else 0.0
        weight = min(1.0, max(0.0, weight))
    unlabelled_mean = statistics.fmean(unlabelled_judge)
    residuals = [y - weight * f for f, y in zip(labelled_judge, labelled_truth)]
    value = weight * unlabelled_mean + statistics.fmean(residuals)
    spread = math.sqrt(weight ** 2 * _variance(unlabelled_judge) / big_n
                       + _variance(residuals) / n)
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    judge_mean = statistics.fmean(list(unlabelled_judge) + list(labelled_judge))
    return CorrectedMean(value=value, low=value - z * spread, high=value + z * spread,
                         judge_mean=judge_mean, correction=value - judge_mean,
                         weight=weight, labelled=n, unlabelled=big_n, confidence=confidence)
