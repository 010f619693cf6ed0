"""A finished run stored from a report built in a test, for the commands that read run dirs."""

from __future__ import annotations

from pathlib import Path

from referee.record import CaseResult, CaseStatus, EvalReport
from referee.result import CriterionResult
from referee.store import RunStore


def store_report(runs_dir: Path, report: EvalReport) -> Path:
    """Store ``report`` as a finished run under ``runs_dir``; its run directory."""
    store = RunStore.create(runs_dir, report, case_ids=[c.eval_id for c in report.cases])
    for case in report.cases:
        store.append_case(case)
    report.finished_at = report.started_at + 1
    store.write_report(report)
    return store.run_dir


def store_scored_run(runs_dir: Path, scores: list[float], *, name: str = "scored",
                     criterion: str = "g_eval", threshold: float = 0.5) -> Path:
    """A stored run of one judged criterion with these scores, case ``c<i>`` scoring
    ``scores[i]`` (passing at ``threshold``); its run directory."""
    cases = [CaseResult(index=i, eval_id=f"c{i}",
                        status=CaseStatus.PASSED if score >= threshold else CaseStatus.FAILED,
                        criterion_results=[CriterionResult(criterion=criterion, score=score,
                                                           passed=score >= threshold,
                                                           threshold=threshold)])
             for i, score in enumerate(scores)]
    return store_report(runs_dir, EvalReport(name=name, cases=cases))
