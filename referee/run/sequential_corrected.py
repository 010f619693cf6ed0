"""A sequential gate on pass rates corrected for judge error (``--sequential --gate-on
corrected``): each criterion is tested on its own, a judged one through its calibration.

``--gate-on corrected`` passes a run when every criterion's best-defended pass rate meets the
threshold (run/judge_gate.py). The sequential version settles:

- "above" once every criterion is settled above the threshold;
- "below" once any criterion is settled below it.

A criterion without a judge is tested on its raw verdicts (``referee.stats.decide``). A judged
criterion is tested through its calibration's TPR and TNR (``decide_corrected``), whose
uncertainty is carried by Wilson bounds from the calibration's counts. The error is split so
that the whole gate keeps 1 - confidence: half for the sequential tests and half for the
calibration bounds, each divided among the criteria (Bonferroni: "below" is wrong when any one
criterion is wrongly settled below). A judged criterion without a usable calibration can never
be settled above, so the run then stops early only to fail.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from referee.record import CaseResult, JudgeCalibration
from referee.stats import Decision, decide, decide_corrected, judge_error_bounds


@dataclass
class _Counts:
    passes: int = 0
    fails: int = 0


@dataclass
class CorrectedCriteria:
    """The per-criterion tests of a sequential ``--gate-on corrected`` run."""

    threshold: float
    confidence: float
    labels: tuple[str, ...]
    calibration: Mapping[str, JudgeCalibration]  # the judged criteria's, by label
    counts: dict[str, _Counts] = field(default_factory=dict)
    settled: dict[str, Decision] = field(default_factory=dict)

    @property
    def _share(self) -> float:
        """Each criterion's share of the error, for its sequential test and for its bounds."""
        return (1.0 - self.confidence) / (2 * max(len(self.labels), 1))

    def _bounds(self, record: JudgeCalibration) -> tuple[tuple[float, float],
                                                        tuple[float, float]] | None:
        if not record.can_correct:
            return None
        positives, negatives = int(record.positives or 0), int(record.negatives or 0)
        kept = round(float(record.tpr or 0.0) * positives)
        caught = round(float(record.tnr or 0.0) * negatives)
        # Two bounds are used per direction, each one-sided at share / 2.
        return judge_error_bounds(kept, positives, caught, negatives, 1.0 - self._share)

    def observe(self, result: CaseResult) -> None:
        for criterion in result.criterion_results:
            if criterion.criterion in self.labels and criterion.is_scored:
                counts = self.counts.setdefault(criterion.criterion, _Counts())
                counts.passes += criterion.passed
                counts.fails += not criterion.passed
                self._test(criterion.criterion, counts)

    def _test(self, label: str, counts: _Counts) -> None:
        level = 1.0 - self._share
        record = self.calibration.get(label)
        if record is None:
            decision = decide(counts.passes, counts.fails, self.threshold, level)
        else:
            bounds = self._bounds(record)
            decision = None if bounds is None else decide_corrected(
                counts.passes, counts.fails, self.threshold, tpr=bounds[0], tnr=bounds[1],
                confidence=level)
        if decision is not None:
            self.settled.setdefault(label, decision)

    def decision(self) -> Decision | None:
        if "below" in self.settled.values():
            return "below"
        if self.labels and all(self.settled.get(label) == "above" for label in self.labels):
            return "above"
        return None

    def what(self, decision: Decision) -> str:
        """What was settled, for the report's sentence."""
        if decision == "above":
            return "every criterion's pass rate, corrected for judge error,"
        below = [label for label, side in self.settled.items() if side == "below"]
        return f"{', '.join(below)}'s pass rate, corrected for judge error,"

    def to_metadata(self) -> dict[str, Any]:
        return {label: {"passes": self.counts.get(label, _Counts()).passes,
                        "fails": self.counts.get(label, _Counts()).fails,
                        "decision": self.settled.get(label),
                        "corrected": label in self.calibration}
                for label in self.labels}
