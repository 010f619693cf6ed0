"""The review queue: a run's judged criterion results, those most worth a person's look first.

First the results the judge could not settle (a judge or evaluator error, UNKNOWN verdicts,
a case that errored), most doubtful first; then scores near their threshold, nearest first;
then the rest in case order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from referee.record import CaseResult, CaseStatus, EvalReport

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


def review_queue(report: EvalReport, cases: Iterable[CaseResult] | None = None
                 ) -> list[QueueItem]:
    """Every criterion result that a person could label (skips have no verdict), in review
    order; ``cases``: only these of the report's cases (a large report's page shows a sample)."""
    items: list[tuple[tuple[int, float, int, int], QueueItem]] = []
    for case in report.cases if cases is None else cases:
        for position, result in enumerate(case.criterion_results):
            if result.skipped:
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
