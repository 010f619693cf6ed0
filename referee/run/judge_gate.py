"""Gates that trust only measured judges (``referee run --require-calibrated --min-kappa K
--gate-on corrected``; ``judge_gate=JudgeGate(...)`` in Python).

``require_calibrated`` refuses a run whose judged criteria have no matching calibration entry
(evaluator, judge provider/model, question set, and the threshold the run judged at), or whose
calibrated kappa is below ``min_kappa``. ``gate_on="corrected"`` gates ``fail_threshold`` on
each criterion's best-defended pass rate instead of the run's raw one: a judged criterion's
corrected pass rate's lower bound, a criterion without a judge's raw pass rate (it has no judge
error to correct). For a run of one judged criterion that is the run's corrected pass rate.
"""

from __future__ import annotations

from dataclasses import dataclass

from referee.record import EvalReport

GATE_ON = ("raw", "corrected")


@dataclass(frozen=True)
class JudgeGate:
    require_calibrated: bool = False
    min_kappa: float | None = None  # implies require_calibrated
    gate_on: str = "raw"

    def validate(self, fail_threshold: float | None) -> None:
        """Reject bad settings before the run spends anything."""
        if self.gate_on not in GATE_ON:
            raise ValueError(f"gate_on must be one of {', '.join(GATE_ON)}, got {self.gate_on!r}")
        if self.min_kappa is not None and not -1.0 <= self.min_kappa <= 1.0:
            raise ValueError(f"min_kappa must be between -1.0 and 1.0, got {self.min_kappa}")
        if self.gate_on == "corrected" and fail_threshold is None:
            raise ValueError("gate_on='corrected' gates fail_threshold; give one "
                             "(--fail-threshold RATE)")

    @property
    def requires_calibration(self) -> bool:
        return self.require_calibrated or self.min_kappa is not None

    def uncalibrated(self, report: EvalReport) -> list[str]:
        """One line per judged criterion the calibration requirement rejects."""
        if not self.requires_calibration:
            return []
        lines = []
        for label, record in report.judge_calibration.items():
            if not record.matched:
                lines.append(f"{label} ({record.judge}): {record.reason}")
            elif self.min_kappa is not None and record.kappa is None:
                lines.append(f"{label} ({record.judge}): its calibration records no kappa; "
                             "calibrate again")
            elif self.min_kappa is not None and record.kappa is not None \
                    and record.kappa < self.min_kappa:
                lines.append(f"{label} ({record.judge}): calibrated kappa {record.kappa:.2f} < "
                             f"{self.min_kappa:.2f} (n={record.n}, {record.date})")
        return lines

    def short_of_threshold(self, report: EvalReport, fail_threshold: float) -> list[str]:
        """With gate_on="corrected": one line per criterion whose best-defended pass rate is
        below ``fail_threshold`` or cannot be told."""
        corrected = report.corrected_pass_rates()
        lines = []
        for label, stats in report.summary.criterion_stats.items():
            record = report.judge_calibration.get(label)
            if record is None:  # no judge: its raw rate has no judge error to correct
                if stats.scored and stats.pass_rate < fail_threshold:
                    lines.append(f"{label}: pass rate {stats.pass_rate:.1%} < "
                                 f"{fail_threshold:.1%} (no judge; raw)")
                continue
            rate = corrected.get(label)
            if rate is None:
                why = record.reason or "nothing was scored"
                lines.append(f"{label} ({record.judge}): no corrected pass rate: {why}")
            elif not rate.supported:
                lines.append(f"{label} ({record.judge}): {rate.reason}")
            elif rate.low is not None and rate.low < fail_threshold:
                lines.append(f"{label} ({record.judge}): corrected pass rate lower bound "
                             f"{rate.low:.1%} < {fail_threshold:.1%} ({rate.describe()})")
        return lines


def _listed(head: str, lines: list[str]) -> str:
    """The gate's verdict, then one line per criterion at fault."""
    return "\n".join([head, *(f"  {line}" for line in lines)])


def calibration_message(lines: list[str], gate: JudgeGate) -> str:
    bound = f" with kappa >= {gate.min_kappa:.2f}" if gate.min_kappa is not None else ""
    return _listed(f"Eval gate FAILED: judged criteria without a calibration{bound} "
                   f"(--require-calibrated):", lines)


def corrected_message(lines: list[str], fail_threshold: float) -> str:
    return _listed(f"Eval gate FAILED: pass rates corrected for judge error fall short of "
                   f"threshold {fail_threshold:.1%} (--gate-on corrected):", lines)
