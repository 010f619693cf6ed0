"""An anytime-valid test of a pass rate against a threshold, for gates that stop judging early.

Cases arrive one by one in a random order, each a pass or a fail. After every case the gate asks
whether the pass rate p is settled on one side of the threshold t. Repeating a fixed-n interval
after every case would inflate the error far beyond its nominal level; instead each side is a
test martingale, so that Ville's inequality bounds the chance of *ever* crossing, at any of the
looks:

- evidence that p > t is the Bernoulli likelihood ratio against t, mixed over p uniform on
  [t, 1]: under any p <= t it is a nonnegative supermartingale starting at 1, so it reaches 1/alpha
  with probability at most alpha;
- evidence that p < t is the same mixture over [0, t].

The mixture over a one-sided alternative is the beta-binomial mixture (Robbins' method of
mixtures, the exact Bernoulli counterpart of the normal-mixture boundary) and has a closed form
in the regularized incomplete beta function, computed here by its continued fraction. Whichever
side the truth is on, the gate decides the wrong way with probability at most alpha; a truth
exactly at t makes "below" the wrong answer, also at most alpha. The set of t that neither test
rejects is a confidence sequence for p (``confidence_sequence``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from referee.stats._intervals import wilson_bounds

Decision = Literal["above", "below"]

_CF_EPSILON = 1e-15
_CF_TINY = 1e-300
_CF_MAX_TERMS = 100_000


def log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def _beta_continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz), which converges
    quickly for x < (a + 1) / (a + b + 2)."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > _CF_TINY else _CF_TINY)
    fraction = d
    for m in range(1, _CF_MAX_TERMS):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _CF_TINY else _CF_TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _CF_TINY else _CF_TINY
            fraction *= c * d
        if abs(c * d - 1.0) < _CF_EPSILON:
            return fraction
    raise ArithmeticError(f"incomplete beta did not converge for a={a}, b={b}, x={x}")


def log_incomplete_beta(a: float, b: float, x: float) -> tuple[float, float]:
    """(log I_x(a, b), log(1 - I_x(a, b))): both tails of the regularized incomplete beta
    function, each accurate even where it is tiny."""
    if not (a > 0 and b > 0 and 0.0 < x < 1.0):
        raise ValueError(f"need a, b > 0 and 0 < x < 1, got a={a}, b={b}, x={x}")
    front = a * math.log(x) + b * math.log1p(-x) - log_beta(a, b)
    if x < (a + 1) / (a + b + 2):
        lower = front + math.log(_beta_continued_fraction(a, b, x)) - math.log(a)
        return lower, math.log1p(-math.exp(lower))
    upper = front + math.log(_beta_continued_fraction(b, a, 1.0 - x)) - math.log(b)
    return math.log1p(-math.exp(upper)), upper


def log_evidence(passes: int, fails: int, threshold: float) -> tuple[float, float]:
    """(log evidence that the pass rate is above ``threshold``, log evidence that it is below):
    each side's mixture likelihood ratio after ``passes`` and ``fails``, 0 before any case."""
    if passes < 0 or fails < 0:
        raise ValueError(f"counts must be >= 0, got {passes} passes and {fails} fails")
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold must be strictly between 0 and 1, got {threshold}")
    null = passes * math.log(threshold) + fails * math.log1p(-threshold)
    marginal = log_beta(passes + 1, fails + 1)
    below, above = log_incomplete_beta(passes + 1, fails + 1, threshold)
    return (marginal + above - math.log1p(-threshold) - null,
            marginal + below - math.log(threshold) - null)


def decide(passes: int, fails: int, threshold: float, confidence: float) -> Decision | None:
    """"above" once the pass rate is settled above ``threshold`` at ``confidence``, "below" once
    settled below it, None while it is not settled. Valid however often it is asked."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    if threshold <= 0.0:
        return "above"  # any pass rate meets a gate of 0
    if threshold >= 1.0:
        return "below" if fails else None  # one fail settles a gate of 1; passes never do
    bar = -math.log1p(-confidence)  # log(1 / alpha)
    above, below = log_evidence(passes, fails, threshold)
    if above >= bar:
        return "above"
    if below >= bar:
        return "below"
    return None


@dataclass(frozen=True)
class ConfidenceSequence:
    """The pass rates that neither one-sided test rejects after these cases."""

    low: float
    high: float


def confidence_sequence(passes: int, fails: int, confidence: float,
                        resolution: float = 1e-4) -> ConfidenceSequence:
    """The anytime-valid interval for the pass rate: the thresholds t for which ``decide``
    says neither "above" nor "below" (to ``resolution``). The evidence each side has against t
    grows as t moves away from the observed rate, so both ends are found by bisection."""
    if passes + fails == 0:
        return ConfidenceSequence(0.0, 1.0)
    rate = passes / (passes + fails)

    def bisect(inside: float, outside: float, side: Decision) -> float:
        while abs(outside - inside) > resolution:
            middle = (inside + outside) / 2
            if decide(passes, fails, middle, confidence) == side:
                outside = middle
            else:
                inside = middle
        return inside

    centre = min(max(rate, resolution), 1 - resolution)
    low = bisect(centre, resolution, "above") if decide(
        passes, fails, resolution, confidence) == "above" else 0.0
    high = bisect(centre, 1 - resolution, "below") if decide(
        passes, fails, 1 - resolution, confidence) == "below" else 1.0
    return ConfidenceSequence(low, high)


def observed_threshold(threshold: float, tpr: float, tnr: float) -> float:
    """The observed pass rate a judge of this TPR and TNR shows when the true rate is
    ``threshold``: TPR x t + (1 - TNR) x (1 - t)."""
    return tpr * threshold + (1.0 - tnr) * (1.0 - threshold)


def decide_corrected(passes: int, fails: int, threshold: float, *, tpr: tuple[float, float],
                     tnr: tuple[float, float], confidence: float) -> Decision | None:
    """``decide`` for the true pass rate behind a judge's verdicts, given bounds (low, high) on
    the judge's TPR and TNR that hold with the calibration's own confidence.

    The judge shows q = TPR x p + (1 - TNR) x (1 - p), which rises with p when TPR + TNR > 1.
    p is above ``threshold`` once q is settled above the highest q the threshold could show
    (TPR at its high bound, TNR at its low one), and below it once q is settled below the lowest
    (TPR low, TNR high). None while unsettled, and always when the bounds allow a judge no
    better than a coin (TPR + TNR <= 1), which cannot support a pass rate."""
    if tpr[0] + tnr[0] <= 1.0:
        return None
    highest = observed_threshold(threshold, tpr[1], tnr[0])
    lowest = observed_threshold(threshold, tpr[0], tnr[1])
    if highest < 1.0 and decide(passes, fails, highest, confidence) == "above":
        return "above"
    if lowest > 0.0 and decide(passes, fails, lowest, confidence) == "below":
        return "below"
    return None


def judge_error_bounds(kept: int, positives: int, caught: int, negatives: int,
                       confidence: float) -> tuple[tuple[float, float], tuple[float, float]]:
    """Wilson intervals (low, high) of a judge's TPR (``kept`` of ``positives`` labelled
    passes) and TNR (``caught`` of ``negatives`` labelled fails), each two-sided at
    ``confidence``."""
    return (wilson_bounds(kept, positives, confidence),
            wilson_bounds(caught, negatives, confidence))
