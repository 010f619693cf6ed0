"""A stored run's judge numbers corrected by the labels people gave it, for every report.

When the run's directory holds labels (labels.jsonl, from `referee view` or `referee labels
import`), each judged criterion that people labelled shows its mean score (from the labels'
``human_score``) and its pass rate (from their verdicts) corrected by prediction-powered
inference, beside the pass rates corrected for judge error by calibration. The numbers are
``referee labels estimate``'s (referee/labels/_estimate.py); a run without labels shows none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from referee.errors import InputError
from referee.record import EvalReport
from referee.store import LABELS_FILE

if TYPE_CHECKING:
    from referee.labels._estimate import CriterionEstimates, Estimate

HEADING = ("Judge numbers corrected by people's labels (prediction-powered inference, 95% "
           "interval; the labelled cases must be a random sample):")


@dataclass(frozen=True)
class LabelEstimates:
    """Each labelled criterion's estimates, or why the labels could not be read."""

    criteria: list[CriterionEstimates] = field(default_factory=list)
    problem: str = ""

    def __bool__(self) -> bool:
        return bool(self.criteria or self.problem)


def label_estimates(report: EvalReport) -> LabelEstimates:
    """The estimates of ``report``'s stored labels; empty for a run not stored or unlabelled."""
    if report.run_dir is None or not (report.run_dir / LABELS_FILE).is_file():
        return LabelEstimates()
    from referee.labels._estimate import estimate_report
    from referee.labels._store import LabelStore

    try:
        labels = list(LabelStore(report.run_dir).latest().values())
    except InputError as exc:  # a report never fails on its labels; it says why they are left out
        return LabelEstimates(problem=f"labels not read: {exc}")
    return LabelEstimates(estimate_report(report, labels))


def label_estimate_lines(report: EvalReport) -> list[str]:
    """The console's lines: each labelled criterion's corrected mean score, then pass rate."""
    found = label_estimates(report)
    if not found:
        return []
    lines = [HEADING]
    if found.problem:
        lines.append(f"  {found.problem}")
    for estimates in found.criteria:
        for estimate in (estimates.mean_score, estimates.pass_rate):
            lines.append(f"  {estimates.criterion}: {estimate.describe()}")
    return lines


def label_estimates_dict(report: EvalReport) -> dict[str, Any] | None:
    """The JSON report's ``corrected_by_labels``: by criterion, its mean score and pass rate
    estimates (``referee labels estimate --json``'s fields); None without labels."""
    found = label_estimates(report)
    if not found:
        return None
    return {"problem": found.problem or None,
            "criteria": {e.criterion: {"mean_score": e.mean_score.to_dict(),
                                       "pass_rate": e.pass_rate.to_dict()}
                         for e in found.criteria}}


def _cells(estimate: Estimate, fraction: bool) -> dict[str, Any]:
    c = estimate.corrected
    shown = (lambda v: f"{v:.1%}") if fraction else (lambda v: f"{v:.3f}")
    return {"judge": shown(c.judge_mean) if c else "",
            "corrected": shown(c.value) if c else "n/a",
            "interval": f"{shown(c.low)} – {shown(c.high)}" if c else "",
            "value": c.value if c else "", "low": c.low if c else "",
            "high": c.high if c else "",
            "labelled": f"{estimate.labelled} of {estimate.scored}",
            "note": estimate.reason}


def label_estimates_view(report: EvalReport) -> dict[str, Any] | None:
    """The HTML report's rows: a criterion's mean score row, then its pass rate row."""
    found = label_estimates(report)
    if not found:
        return None
    rows = []
    for e in found.criteria:
        rows.append({"name": e.criterion, "quantity": "mean score",
                     **_cells(e.mean_score, fraction=False)})
        rows.append({"name": e.criterion, "quantity": "pass rate",
                     **_cells(e.pass_rate, fraction=True)})
    return {"rows": rows, "problem": found.problem}
