"""Repeated runs of one case (``EvalSuite.run(runs=N)``) and what is measured from them.

A case run N times is one ``CaseResult`` whose ``run_results`` hold each run, each itself a
``CaseResult`` (without the case, which the outer one carries). ``combine_runs`` gives the outer
result its status, criteria and spend. The trial statistics (pass@k, pass^k, flakiness) count a
case's *evaluated* runs only: a run that errored or was skipped is no trial, just as an errored
case is no case in ``pass_rate``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import comb, sqrt
from statistics import NormalDist, fmean
from typing import TYPE_CHECKING

from referee.result import CriterionResult
from referee.usage import TokenUsage

if TYPE_CHECKING:
    from referee.case import EvalCase
    from referee.execution import ExecutionResult
    from referee.record._model import CaseResult, CaseStatus

PASS_AT_K = "pass@k"
PASS_HAT_K = "pass^k"
ESTIMATORS = {PASS_AT_K: "combinatorial-unbiased", PASS_HAT_K: "hypergeometric-exact"}


# Per-case estimators -------------------------------------------------------------------------

def _check_counts(n: int, c: int, k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not 0 <= c <= n:
        raise ValueError(f"c must be between 0 and n={n}, got {c}")
    if k > n:
        raise ValueError(f"k={k} exceeds the {n} recorded trials; nothing is extrapolated")


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that at least one of k runs passes, from n runs of which c passed: the
    unbiased estimator ``1 - C(n-c, k) / C(n, k)``."""
    _check_counts(n, c, k)
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """The chance that all of k runs pass, from n runs of which c passed: ``C(c, k) / C(n, k)``
    (drawing without replacement; the plug-in ``(c/n)**k`` overstates it for small n)."""
    _check_counts(n, c, k)
    return comb(c, k) / comb(n, k)


@dataclass(frozen=True)
class PassKResult:
    """pass@k or pass^k over a report's evaluated cases, with a confidence interval.

    ``value`` is None when it cannot be known (``unknown_reason`` says why): k exceeds the
    evaluated runs of some case, or no case was evaluated. ``runs`` is the fewest evaluated runs
    of any case: the largest k the data supports.
    """

    k: int
    metric: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    estimator: str
    n_cases: int
    runs: int
    unknown_reason: str = ""


def suite_pass_k(case_counts: Sequence[tuple[int, int]], k: int, *, metric: str = PASS_AT_K,
                 confidence: float = 0.95, n_boot: int | None = None,
                 seed: int | None = None) -> PassKResult:
    """The mean over cases of the per-case estimate, from ``[(runs, passed), ...]``; raises
    ValueError when k exceeds some case's runs (nothing is extrapolated).

    The interval resamples cases (``n_boot`` times, seeded), not runs, because the runs of one
    case are not independent; when every case has the same estimate, where a bootstrap would
    shrink to a point, it is the Wilson interval of that proportion over the cases.
    """
    from referee.report.compare import (
        BOOTSTRAP_RESAMPLES,
        BOOTSTRAP_SEED,
        bootstrap_mean_ci,
        wilson_bounds,
    )

    if metric not in ESTIMATORS:
        raise ValueError(f"metric must be {PASS_AT_K!r} or {PASS_HAT_K!r}, got {metric!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    if n_boot is not None and n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    estimator = ESTIMATORS[metric]
    if not case_counts:
        return PassKResult(k, metric, None, None, None, estimator, 0, 0,
                           "unknown: no evaluated cases to estimate from")
    per_case = [(pass_at_k if metric == PASS_AT_K else pass_hat_k)(n, c, k)
                for n, c in case_counts]
    value = fmean(per_case)
    if min(per_case) == max(per_case):
        # Wilson over the cases, with the (possibly fractional) count of "successes" it implies.
        successes = value * len(per_case)
        low, high = wilson_bounds(successes, len(per_case), confidence)  # type: ignore[arg-type]
    else:
        low, high = bootstrap_mean_ci(per_case, confidence=confidence,
                                      resamples=n_boot or BOOTSTRAP_RESAMPLES,
                                      seed=BOOTSTRAP_SEED if seed is None else seed)
    return PassKResult(k, metric, value, min(low, value), max(high, value), estimator,
                       len(case_counts), min(n for n, _ in case_counts))


def report_pass_k(case_counts: Sequence[tuple[int, int]], k: int, *, metric: str,
                  confidence: float) -> PassKResult:
    """``suite_pass_k`` for a report, which never raises over its data: a k beyond some case's
    evaluated runs gives an unknown result that says so."""
    fewest = min((n for n, _ in case_counts), default=k)
    if k > fewest:
        where = "each case" if all(n == fewest for n, _ in case_counts) else \
            "the shortest-run case (early_stop, or errored runs)"
        return PassKResult(k, metric, None, None, None, ESTIMATORS[metric], len(case_counts),
                           fewest, f"unknown: k={k} exceeds the {fewest} trials (evaluated runs) "
                           f"of {where}; run with runs >= {k} or pass k <= {fewest}; nothing "
                           "is extrapolated")
    return suite_pass_k(case_counts, k, metric=metric, confidence=confidence)


def min_detectable_effect(n: int, alpha: float = 0.05, power: float = 0.80,
                          baseline: float = 0.70) -> float:
    """The smallest change of a pass rate near ``baseline`` that a two-sided test at ``alpha``
    detects with ``power`` when both runs have ``n`` cases (normal approximation); 1.0 at n=0."""
    if n <= 0:
        return 1.0
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    return min(1.0, round(sqrt(z * z * 2 * baseline * (1 - baseline) / n), 4))


def clear_after(passes: int, fails: int, *, alpha: float = 0.05, beta: float = 0.20) -> bool:
    """Whether the runs so far settle a case (``early_stop``): Wald's sequential probability
    ratio test of a pass rate of 0.8 (clearly passing) or 0.2 (clearly failing) against 0.5,
    stopping once either likelihood ratio reaches (1 - beta) / alpha."""
    if passes + fails < 2:
        return False
    bound = (1 - beta) / alpha
    passing = 1.6 ** passes * 0.4 ** fails  # (0.8 / 0.5) ** passes * (0.2 / 0.5) ** fails
    failing = 0.4 ** passes * 1.6 ** fails
    return passing >= bound or failing >= bound


# One case, several runs ------------------------------------------------------------------------

def _combined_status(runs: Sequence[CaseResult]) -> CaseStatus:
    """A known failure beats an unknown (design #8), across runs as across criteria: any run
    that FAILED makes the case FAILED; else any errored run its error (a model error or timeout
    before a judge or evaluator error); else PASSED if some run passed; else SKIPPED."""
    from referee.record._model import CaseStatus

    statuses = {r.status for r in runs}
    for status in (CaseStatus.FAILED, CaseStatus.MODEL_ERROR, CaseStatus.TIMEOUT,
                   CaseStatus.JUDGE_ERROR, CaseStatus.EVALUATOR_ERROR, CaseStatus.PASSED):
        if status in statuses:
            return status
    return CaseStatus.SKIPPED


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
    from referee.record._model import CaseResult

    if not runs:
        raise ValueError("combine_runs needs at least one run")
    kept = [r.model_copy(update={"case": None, "index": index, "eval_id": key}) for r in runs]
    status = _combined_status(kept)
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


def trial_counts(result: CaseResult) -> tuple[int, int]:
    """(evaluated runs, passed runs) of a case: a single run counts as one trial."""
    from referee.record._model import CaseStatus

    if not result.run_results:
        return 1, int(result.status == CaseStatus.PASSED)
    evaluated = [r for r in result.run_results if r.status.is_evaluated]
    return len(evaluated), sum(r.status == CaseStatus.PASSED for r in evaluated)
