"""Pass rates corrected for the judge's measured errors (Rogan-Gladen), with honest intervals.

A judge that passes a good output with probability TPR and fails a bad one with probability TNR
shows an observed pass rate p_obs = TPR * p + (1 - TNR) * (1 - p) when the true rate is p, so

    p = (p_obs + TNR - 1) / (TPR + TNR - 1),

defined only when TPR + TNR > 1 (a judge better than a coin). The estimate is clipped to [0, 1].

The interval carries both uncertainties, by Monte Carlo: each draw takes p_obs, TPR and TNR from
their Jeffreys Beta posteriors (the run's passes of its scored results; the calibration's passes
kept of its labelled passes, fails caught of its labelled fails) and corrects them; the interval
is the 2.5th and 97.5th percentiles of the corrected draws. A draw where TPR + TNR <= 1 could be
any rate, so it counts as 0 for the lower end and 1 for the upper end; when more than 2.5% of
the draws are such, the interval spans [0, 1] and the judge cannot support a pass rate. The draws
are seeded, so a report is reproducible. Only the standard library is used.

This module holds plain numbers and the record of what calibration a run found; the run layer
looks the calibration file up, and every view reads the result from here.
"""

from __future__ import annotations

import random
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, Field

NO_RUN_CORRECTION = ("no corrected pass rate for the run: a case passes only if every "
                     "criterion does, and the judges' joint errors are not measured; read each "
                     "criterion's")
DRAWS = 4000
LEVEL = 0.95
SEED = 20261204


class JudgeCalibration(BaseModel):
    """What the run found in the calibration file for one judged criterion.

    ``matched`` entries carry the measured TPR/TNR and their counts; otherwise ``reason`` says
    why the criterion's pass rate cannot be corrected (no entry, another threshold, an entry
    without counts, an unreadable file).
    """

    evaluator: str
    judge: str  # provider/model, as the run resolved it
    question_set: str
    threshold: float | None = None  # the threshold the run judged at
    file: str
    matched: bool = False
    reason: str = ""
    calibrated_threshold: float | None = None
    kappa: float | None = None
    tpr: float | None = None
    tnr: float | None = None
    positives: int | None = None
    negatives: int | None = None
    n: int | None = None
    date: str | None = None
    data_fingerprint: str | None = None
    agreement_source: str | None = None
    # The model versions this run's replies for the judge named (most frequent first), the one
    # the entry was calibrated against, and, when the provider now serves another, what to say.
    served_models: list[str] = Field(default_factory=list)
    calibrated_served_model: str | None = None
    drift: str | None = None

    @property
    def can_correct(self) -> bool:
        return self.matched and None not in (self.tpr, self.tnr, self.positives, self.negatives)


class CorrectedRate(BaseModel):
    """A criterion's raw pass rate beside its corrected estimate and interval.

    ``supported`` is False when the judge's measured errors cannot support a pass rate
    (TPR + TNR <= 1, or too much of the interval's mass where it is not better than a coin);
    ``reason`` says so, and ``value``/``low``/``high`` are None.
    """

    observed: float
    passed: int
    scored: int
    value: float | None = None
    low: float | None = None
    high: float | None = None
    supported: bool = True
    reason: str = ""
    tpr: float
    tnr: float
    method: str = (f"Rogan-Gladen; {LEVEL:.0%} interval from {DRAWS} Monte Carlo draws of "
                   "Jeffreys Beta posteriors of p_obs, TPR and TNR")

    def describe(self) -> str:
        """One line for a console or a gate message."""
        raw = f"raw {self.observed:.1%} ({self.passed}/{self.scored})"
        if not self.supported:
            return f"{raw}; corrected: n/a ({self.reason})"
        return (f"{raw}; corrected {self.value:.1%} [{self.low:.1%}, {self.high:.1%}] "
                f"(TPR {self.tpr:.2f}, TNR {self.tnr:.2f})")


def rogan_gladen(observed: float, tpr: float, tnr: float) -> float | None:
    """The true pass rate implied by ``observed`` for a judge of this TPR and TNR, clipped to
    [0, 1]; None when TPR + TNR <= 1."""
    youden = tpr + tnr - 1.0
    if youden <= 0.0:
        return None
    return min(1.0, max(0.0, (observed + tnr - 1.0) / youden))


def _percentile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default)."""
    at = q * (len(sorted_values) - 1)
    low = int(at)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (at - low)


@lru_cache(maxsize=256)  # every view of a report asks again; the draws are the slow part
def corrected_pass_rate(passed: int, scored: int, kept: int, positives: int, caught: int,
                        negatives: int, *, draws: int = DRAWS, seed: int = SEED,
                        level: float = LEVEL) -> CorrectedRate:
    """Correct ``passed``/``scored`` for a judge that kept ``kept`` of ``positives`` labelled
    passes and caught ``caught`` of ``negatives`` labelled fails."""
    if scored <= 0:
        raise ValueError("no scored results to correct")
    if positives <= 0 or negatives <= 0:
        raise ValueError("the calibration needs both labelled passes and labelled fails")
    observed = passed / scored
    tpr, tnr = kept / positives, caught / negatives
    common: dict[str, Any] = {"observed": observed, "passed": passed, "scored": scored,
                              "tpr": tpr, "tnr": tnr}
    value = rogan_gladen(observed, tpr, tnr)
    if value is None:
        return CorrectedRate(**common, supported=False, reason=(
            f"TPR {tpr:.2f} + TNR {tnr:.2f} <= 1: the judge is no better than a coin on the "
            "calibration data and cannot support a pass rate"))
    rng = random.Random(seed)
    tail = (1.0 - level) / 2.0
    lows: list[float] = []
    highs: list[float] = []
    undefined = 0
    for _ in range(draws):
        rate = rogan_gladen(rng.betavariate(passed + 0.5, scored - passed + 0.5),
                            rng.betavariate(kept + 0.5, positives - kept + 0.5),
                            rng.betavariate(caught + 0.5, negatives - caught + 0.5))
        if rate is None:
            undefined += 1
            lows.append(0.0)
            highs.append(1.0)
        else:
            lows.append(rate)
            highs.append(rate)
    if undefined > tail * draws:
        return CorrectedRate(**common, supported=False, reason=(
            f"{undefined / draws:.0%} of the plausible TPR/TNR (from {positives} labelled "
            f"passes and {negatives} labelled fails) are no better than a coin: the judge "
            "cannot support a pass rate; calibrate on more labelled rows"))
    lows.sort()
    highs.sort()
    return CorrectedRate(**common, value=value, low=min(value, _percentile(lows, tail)),
                         high=max(value, _percentile(highs, 1.0 - tail)))


def correct(calibration: JudgeCalibration, passed: int, scored: int) -> CorrectedRate | None:
    """The corrected pass rate of a criterion with this calibration record; None when the
    record cannot correct (no matched entry with counts) or nothing was scored."""
    if not calibration.can_correct or scored <= 0:
        return None
    positives, negatives = int(calibration.positives or 0), int(calibration.negatives or 0)
    kept = round(float(calibration.tpr or 0.0) * positives)
    caught = round(float(calibration.tnr or 0.0) * negatives)
    if positives == 0 or negatives == 0:
        return None
    return corrected_pass_rate(passed, scored, kept, positives, caught, negatives)
