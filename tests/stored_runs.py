"""A finished run stored from a report built in a test, for the commands that read run dirs."""

from __future__ import annotations

from pathlib import Path

from referee.record import EvalReport
from referee.store import RunStore


def store_report(runs_dir: Path, report: EvalReport) -> Path:
    """Store ``report`` as a finished run under ``runs_dir``; its run directory."""
    store = RunStore.create(runs_dir, report, case_ids=[c.eval_id for c in report.cases])
    for case in report.cases:
        store.append_case(case)
    report.finished_at = report.started_at + 1
    store.write_report(report)
    return store.run_dir
