"""Repeated runs of one case (``EvalSuite.run(runs=N)``) and what is measured from them.

A case run N times is one ``CaseResult`` whose ``run_results`` hold each run, each itself a
``CaseResult`` (without the case, which the outer one carries). ``combine_runs`` gives the outer
result its status, criteria and spend. The trial statistics (pass@k, pass^k, flakiness) count a
case's *evaluated* runs only: a run that errored or was skipped is no trial, just as an errored
case is no case in ``pass_rate``.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import fmean
from typing import TYPE_CHECKING

from referee.record._model import CaseResult, runs_status
from referee.record._trial_stats import (
    ESTIMATORS,
    PASS_AT_K,
    PASS_HAT_K,
    PassKResult,
    clear_after,
    min_detectable_effect,
    pass_at_k,
    pass_hat_k,
    report_pass_k,
    suite_pass_k,
    trial_counts,
)
from referee.result import CriterionResult
from referee.usage import TokenUsage

if TYPE_CHECKING:
    from referee.case import EvalCase
    from referee.execution import ExecutionResult

# What repeated runs measure lives in _trial_stats; this module's old names still import.
__all__ = ["ESTIMATORS", "PASS_AT_K", "PASS_HAT_K", "PassKResult", "clear_after", "combine_runs",
           "min_detectable_effect", "pass_at_k", "pass_hat_k", "report_pass_k", "suite_pass_k",
           "trial_counts"]


# One case, several runs ------------------------------------------------------------------------

def _combined_criterion(label: str, results: list[CriterionResult], runs: int) -> CriterionResult:
    """One criterion over the runs that reported it: scored if any run scored it (its mean
    score, passed only if it passed in every scored run); otherwise its first error, or skip.
    An error in some run stays on a criterion that passed everywhere else, so that the case's
    status and its criteria agree (a known failure still beats it)."""
    scored = [r for r in results if r.is_scored]
    errored = [r for r in results if r.is_error]
    first = results[0]
    usage = TokenUsage.total([r.token_usage for r in results])
    if not scored:
        base = errored[0] if errored else first
        return base.model_copy(update={"criterion": label, "token_usage": usage})
    passes = sum(r.passed for r in scored)
    details = {
        "reason": f"passed in {passes} of {len(scored)} scored run(s) of {runs}",
        "runs": runs, "scored_runs": len(scored), "passed_runs": passes,
        "run_scores": [r.score if r.is_scored else None for r in results],
    }
    update: dict[str, object] = {}
    if passes == len(scored) and errored:
        details["errored_runs"] = len(errored)
        update = {"error": errored[0].error or errored[0].explanation or "error",
                  "error_kind": errored[0].error_kind or "evaluator"}
    return CriterionResult(criterion=label, score=fmean(r.score for r in scored),
                           passed=passes == len(scored), threshold=first.threshold,
                           details=details, token_usage=usage, **update)


def _combined_execution(runs: Sequence[CaseResult]) -> ExecutionResult | None:
    """The last run's output, with the mean latency of the runs and what the model spent in
    all of them."""
    executions = [r.execution for r in runs if r.execution is not None]
    if not executions:
        return None
    latencies = [e.latency_s for e in executions if e.latency_s is not None]
    return executions[-1].model_copy(update={
        "latency_s": fmean(latencies) if latencies else None,
        "token_usage": TokenUsage.total([e.token_usage for e in executions])})


def combine_runs(runs: Sequence[CaseResult], *, case: EvalCase | None, index: int,
                 key: str) -> CaseResult:
    """One case's result from its runs (in run order), each kept in ``run_results``."""
    if not runs:
        raise ValueError("combine_runs needs at least one run")
    kept = [r.model_copy(update={"case": None, "index": index, "eval_id": key}) for r in runs]
    status = runs_status(r.status for r in kept)
    by_label: dict[str, list[CriterionResult]] = {}
    for run in kept:
        for result in run.criterion_results:
            by_label.setdefault(result.criterion, []).append(result)
    criteria = [_combined_criterion(label, results, len(kept))
                for label, results in by_label.items()]
    erred = next((i for i, r in enumerate(kept) if r.status == status and r.error), None)
    error = None if erred is None else f"run {erred + 1} of {len(kept)}: {kept[erred].error}"
    retries = [e for r in kept for e in r.retry_errors]
    scoring = [r.scoring_seconds for r in kept if r.scoring_seconds is not None]
    return CaseResult(
        index=index, eval_id=key, name=kept[0].name, status=status, case=case,
        execution=_combined_execution(kept), criterion_results=criteria, error=error,
        traceback=None if erred is None else kept[erred].traceback,
        duration_seconds=sum(r.duration_seconds for r in kept),
        # Per run, as the combined execution's latency_s is: the two columns side by side compare.
        scoring_seconds=fmean(scoring) if scoring else None,
        token_usage=TokenUsage.total([r.token_usage for r in kept]),
        metadata={"retry_errors": retries} if retries else {},
        converted=[c for r in kept for c in r.converted], run_results=kept)

