"""The record of a run: what each case did and how it scored (``CaseResult``), the report over
all cases (``EvalReport``, ``EvalSummary``, ``RunTally``), repeated runs (``combine_runs``,
pass@k, pass^k), judge agreement and pass rates corrected for judge error.

The record is data: it never renders itself and imports no view. The console, JSON, JUnit and
HTML views live in :mod:`referee.report`, the run store in :mod:`referee.store`; the peers'
rendering methods on a report (``format_summary()``, ``to_html()``...) reach the views through
``install_views``, called by the views module that the first rendering call loads by name.
"""

from referee.record._agreement import (
    JudgeAgreement,
    KappaTally,
    describe_member_usage,
    fleiss_kappa,
    panel_member_usage,
)
from referee.record._correction import (
    NO_RUN_CORRECTION,
    CorrectedRate,
    JudgeCalibration,
    correct,
    corrected_pass_rate,
    rogan_gladen,
)
from referee.record._model import (
    ERROR_STATUSES,
    EVALUATION_STATUSES,
    STATUS_PRECEDENCE,
    CaseResult,
    CaseStatus,
    CriterionStats,
    EvalCaseResult,
    EvalReport,
    EvalStatus,
    EvalSummary,
    RunTally,
    case_status,
    criterion_errors_line,
    criterion_status,
    format_rate,
    judged_labels,
    new_run_id,
    nothing_evaluated_reason,
    prevailing_status,
    runs_status,
)
from referee.record._reliability import CriterionReliability, JudgeReliabilityCheck
from referee.record._rendering import ReportViews, install_views
from referee.record._statistics import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    bootstrap_mean_ci,
    wilson_bounds,
)
from referee.record._trial_stats import (
    PASS_AT_K,
    PASS_HAT_K,
    PassKResult,
    case_flip_rate,
    clear_after,
    min_detectable_effect,
    pass_at_k,
    pass_hat_k,
    report_pass_k,
    suite_pass_k,
    trial_counts,
)
from referee.record._trials import combine_runs

__all__ = [
    "CriterionReliability",
    "JudgeReliabilityCheck",
    "describe_member_usage",
    "panel_member_usage",
    "STATUS_PRECEDENCE",
    "case_status",
    "criterion_status",
    "prevailing_status",
    "runs_status",
    "BOOTSTRAP_RESAMPLES",
    "BOOTSTRAP_SEED",
    "bootstrap_mean_ci",
    "case_flip_rate",
    "wilson_bounds",
    "ERROR_STATUSES",
    "EVALUATION_STATUSES",
    "NO_RUN_CORRECTION",
    "PASS_AT_K",
    "PASS_HAT_K",
    "CaseResult",
    "CaseStatus",
    "CorrectedRate",
    "CriterionStats",
    "EvalCaseResult",
    "EvalReport",
    "EvalStatus",
    "EvalSummary",
    "JudgeAgreement",
    "JudgeCalibration",
    "KappaTally",
    "PassKResult",
    "ReportViews",
    "RunTally",
    "clear_after",
    "combine_runs",
    "correct",
    "corrected_pass_rate",
    "criterion_errors_line",
    "fleiss_kappa",
    "format_rate",
    "install_views",
    "judged_labels",
    "min_detectable_effect",
    "new_run_id",
    "nothing_evaluated_reason",
    "pass_at_k",
    "pass_hat_k",
    "report_pass_k",
    "rogan_gladen",
    "suite_pass_k",
    "trial_counts",
]
