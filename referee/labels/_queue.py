"""The review queue: a run's judged criterion results, those most worth a person's look first.

Only the results of criteria a judge scored are queued: labels measure a judge's errors, and
a deterministic check (ExactMatch, ContainsKeywords, a trajectory match) has none to measure.
The report says which criteria those are (``EvalReport.judged_criteria``, from the run's
record); a report that does not say (built in code, or stored before referee recorded it)
queues every scored result, as before.

First the results the judge could not settle (a judge or evaluator error, UNKNOWN verdicts,
a case that errored), most doubtful first; then scores near their threshold, nearest first;
then the rest in case order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from referee.labels._export import run_root
from referee.record import CaseResult, CaseStatus, EvalReport
from referee.store import load_run

NEAR_THRESHOLD = 0.15  # how far from its threshold a score still counts as a close call
_JUDGE_TROUBLE = (CaseStatus.JUDGE_ERROR, CaseStatus.EVALUATOR_ERROR)
TIERS = ("judge trouble", "near threshold", "rest")


@dataclass(frozen=True)
class QueueItem:
    case_id: str
    case_index: int
    case_name: str
    criterion: str
    score: float
    threshold: float
    passed: bool
    error: str | None
    unknown: int
    tier: int
    reason: str

    @property
    def why(self) -> str:
        return TIERS[self.tier]


def _unknown_count(details: dict) -> int:
    value = details.get("unknown")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def nothing_to_label(report: EvalReport) -> str | None:
    """Why ``report`` has nothing to label, in words that follow "nothing to label: ", when its
    run records that no judge scored any of its criteria; None otherwise."""
    if report.judged_criteria is None or report.judged_criteria:
        return None
    return ("no judge scored this run, and labels measure a judge's errors "
            "(its criteria are all deterministic checks)")


def nothing_to_label_in(run_dir: str | Path) -> str | None:
    """``nothing_to_label`` of the stored run in ``run_dir``."""
    return nothing_to_label(load_run(run_root(run_dir)))


def is_labelled_criterion(report: EvalReport, criterion: str) -> bool:
    """Whether people label ``criterion``'s results in ``report``: a judge scored it, or the
    report does not say which criteria a judge scored."""
    return report.judged_criteria is None or criterion in report.judged_criteria


def review_queue(report: EvalReport, cases: Iterable[CaseResult] | None = None
                 ) -> list[QueueItem]:
    """Every judged criterion result that a person could label (skips have no verdict), in
    review order; ``cases``: only these of the report's cases (a large report's page shows a
    sample)."""
    items: list[tuple[tuple[int, float, int, int], QueueItem]] = []
    for case in report.cases if cases is None else cases:
        for position, result in enumerate(case.criterion_results):
            if result.skipped or not is_labelled_criterion(report, result.criterion):
                continue
            unknown = _unknown_count(result.details)
            distance = abs(result.score - result.threshold)
            if result.error_kind is not None or unknown or case.status in _JUDGE_TROUBLE:
                tier, doubt = 0, -float(unknown) - (10.0 if result.error_kind else 0.0)
            elif distance <= NEAR_THRESHOLD:
                tier, doubt = 1, distance
            else:
                tier, doubt = 2, 0.0
            reason = result.details.get("reason") if isinstance(result.details, dict) else None
            item = QueueItem(
                case_id=case.eval_id, case_index=case.index, case_name=case.name or case.eval_id,
                criterion=result.criterion, score=result.score, threshold=result.threshold,
                passed=result.passed, error=str(result.error) if result.error else None,
                unknown=unknown, tier=tier, reason=str(reason) if reason else "")
            items.append(((tier, doubt, case.index, position), item))
    return [item for _, item in sorted(items, key=lambda pair: pair[0])]
