"""Report model and renderers. Every format renders one stored run."""

from referee.report.compare import Comparison, compare_reports
from referee.report.model import (
    ERROR_STATUSES,
    CaseResult,
    CaseStatus,
    CriterionStats,
    EvalReport,
    EvalSummary,
)

__all__ = ["CaseResult", "CaseStatus", "Comparison", "CriterionStats", "ERROR_STATUSES", "EvalReport",
           "EvalSummary", "compare_reports"]
