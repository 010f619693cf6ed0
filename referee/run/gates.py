"""CI gates on a finished report (the multivon-style API, "Error budget: max_error_rate").

``pass_rate`` leaves errored cases out on purpose, so a run that mostly errored can still show
a perfect pass rate. ``max_error_rate`` is the budget that catches it; without one, a
``fail_threshold`` gate still warns on stderr once errors reach WARN_ERROR_RATE.
"""

from __future__ import annotations

import sys
from typing import IO, TYPE_CHECKING

from referee.errors import EvalGateFailure
from referee.record import EvalReport, case_flip_rate, format_rate
from referee.run.judge_gate import JudgeGate, calibration_message, corrected_message

if TYPE_CHECKING:  # options.py checks its gates with validate_gates
    from referee.run.options import RunOptions

# The same line the run viewer flags a run at.
WARN_ERROR_RATE = 0.10


def _check_fraction(name: str, value: float | None) -> None:
    if value is not None and not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be between 0.0 and 1.0, got {value}")


def _pass_rate(report: EvalReport) -> str:
    return format_rate(report.pass_rate, report.evaluated)


def _kinds(report: EvalReport) -> str:
    return ", ".join(f"{kind}={n}" for kind, n in report.errors_by_kind.items())


def indeterminate_message(report: EvalReport, max_error_rate: float) -> str:
    return (
        f"Eval gate INDETERMINATE: error rate {report.error_rate:.1%} exceeds error budget "
        f"{max_error_rate:.1%} — {report.errors} of {report.total} case(s) errored before quality "
        f"could be scored ({_kinds(report)}). pass_rate {_pass_rate(report)} covers only the "
        f"{report.evaluated} evaluated case(s); fix the errors before trusting this gate."
    )


def flaky_message(report: EvalReport) -> str:
    shown = ", ".join(f"{c.label} (flip rate {case_flip_rate(c) or 0.0:.2f})"
                      for c in report.flaky_cases[:5])
    more = f" and {report.flaky_count - 5} more" if report.flaky_count > 5 else ""
    return (f"Eval gate FAILED: {report.flaky_count} flaky case(s), whose verdict flipped "
            f"between runs (--flaky fail): {shown}{more}.")


def quarantined_message(report: EvalReport, fail_threshold: float) -> str:
    """fail_threshold's message when flaky cases are quarantined (left out of the pass rate)."""
    flaky, kept = report.flaky_count, report.evaluated - report.flaky_count
    if kept == 0:
        return (f"Eval gate FAILED: pass rate n/a, threshold {fail_threshold:.1%} — every one "
                f"of the {report.evaluated} evaluated case(s) is flaky and quarantined.")
    return (f"Eval gate FAILED: pass rate {report.passed / kept:.1%} < threshold "
            f"{fail_threshold:.1%} ({report.passed} of {kept} evaluated case(s) passed; "
            f"{flaky} flaky case(s) quarantined).")


def gated_pass_rate(report: EvalReport, flaky: str | None) -> float:
    """The pass rate fail_threshold gates: with ``flaky="quarantine"``, over the evaluated cases
    whose verdict never flipped (a flaky case is never PASSED, so only the denominator moves)."""
    if flaky != "quarantine" or not report.flaky_count:
        return report.pass_rate
    kept = report.evaluated - report.flaky_count
    return report.passed / kept if kept else 0.0


def threshold_message(report: EvalReport, fail_threshold: float) -> str:
    if report.evaluated == 0:
        return (
            f"Eval gate FAILED: pass rate n/a, threshold {fail_threshold:.1%} — "
            f"none of the {report.total} case(s) could be evaluated "
            f"({report.errors} errored, {report.skipped} skipped)."
        )
    return (
        f"Eval gate FAILED: pass rate {report.pass_rate:.1%} < threshold {fail_threshold:.1%} "
        f"({report.passed} of {report.evaluated} evaluated case(s) passed)."
    )


def sequential_message(report: EvalReport) -> str:
    """A sequential gate that settled below its threshold (run/sequential.py)."""
    return (f"Eval gate FAILED: {report.passed} of {report.evaluated} evaluated case(s) "
            f"passed. Sequential gate: {report.metadata['sequential']['summary']}.")


def error_rate_warning(report: EvalReport) -> str:
    return (
        f"WARNING: {report.errors}/{report.total} case(s) errored (error rate "
        f"{report.error_rate:.1%}: {_kinds(report)}). pass_rate {_pass_rate(report)} covers only "
        f"the {report.evaluated} evaluated case(s), and no error budget is set — pass "
        f"max_error_rate=0.10 to fail the gate on errors."
    )


def validate_gates(fail_threshold: float | None, max_error_rate: float | None,
                   judge_gate: JudgeGate | None = None) -> None:
    """Reject bad gate values before the run spends anything."""
    _check_fraction("fail_threshold", fail_threshold)
    _check_fraction("max_error_rate", max_error_rate)
    if judge_gate is not None:
        judge_gate.validate(fail_threshold)


def apply_gates(report: EvalReport, fail_threshold: float | None = None,
                max_error_rate: float | None = None, *, judge_gate: JudgeGate | None = None,
                stderr: IO[str] | None = None, flaky: str | None = None) -> None:
    """Raise EvalGateFailure when a gate rejects the run; warn when errors hide behind pass_rate.

    ``judge_gate`` (run/judge_gate.py) refuses judged criteria without a calibration, and with
    ``gate_on="corrected"`` gates ``fail_threshold`` on pass rates corrected for judge error.
    ``flaky`` ("quarantine" or "fail", for cases run several times) leaves flaky cases out of
    ``fail_threshold``'s pass rate, or fails the gate on any.
    """
    validate_gates(fail_threshold, max_error_rate, judge_gate)
    if flaky not in (None, "quarantine", "fail"):
        raise ValueError(f"flaky must be 'quarantine', 'fail' or None, got {flaky!r}")
    _judge(report, fail_threshold, max_error_rate, judge_gate, stderr, flaky)


def gate(report: EvalReport, options: RunOptions, stderr: IO[str] | None = None) -> None:
    """``apply_gates`` with the gates of ``options``, which were checked when it was built."""
    _judge(report, options.fail_threshold, options.max_error_rate, options.judge_gate, stderr,
           options.flaky)


def _judge(report: EvalReport, fail_threshold: float | None, max_error_rate: float | None,
           judge_gate: JudgeGate | None, stderr: IO[str] | None,
           flaky: str | None = None) -> None:
    if max_error_rate is not None and report.error_rate > max_error_rate:
        raise EvalGateFailure(indeterminate_message(report, max_error_rate), report=report)
    if flaky == "fail" and report.flaky_count:
        raise EvalGateFailure(flaky_message(report), report=report)
    if judge_gate is not None:
        uncalibrated = judge_gate.uncalibrated(report)
        if uncalibrated:
            raise EvalGateFailure(calibration_message(uncalibrated, judge_gate), report=report)
    if (fail_threshold is not None and max_error_rate is None
            and report.total and report.error_rate >= WARN_ERROR_RATE):
        stream = stderr if stderr is not None else sys.stderr
        bar = "!" * 72
        print(f"{bar}\n{error_rate_warning(report)}\n{bar}", file=stream, flush=True)
    settled = _sequential_decision(report)
    if settled is not None:  # a sequential gate stopped judging once this was settled
        if settled == "below":
            raise EvalGateFailure(sequential_message(report), report=report,
                                  threshold=fail_threshold)
        return
    if fail_threshold is not None and judge_gate is not None and judge_gate.gate_on == "corrected":
        if report.evaluated == 0:
            raise EvalGateFailure(threshold_message(report, fail_threshold), report=report)
        short = judge_gate.short_of_threshold(report, fail_threshold)
        if short:
            raise EvalGateFailure(corrected_message(short, fail_threshold), report=report)
        return
    if fail_threshold is not None and gated_pass_rate(report, flaky) < fail_threshold:
        quarantined = flaky == "quarantine" and report.flaky_count
        message = (quarantined_message if quarantined else threshold_message)(report,
                                                                              fail_threshold)
        raise EvalGateFailure(message, report=report, threshold=fail_threshold)


def _sequential_decision(report: EvalReport) -> str | None:
    """"above" or "below" when a sequential gate settled the run (run/sequential.py)."""
    sequential = report.metadata.get("sequential")
    return sequential.get("decision") if isinstance(sequential, dict) else None
