"""What repeated runs measure: pass@k and pass^k (per case and over a report, with their
intervals), the smallest change a rerun would detect, and ``early_stop``'s sequential test.

Arithmetic over ``(evaluated runs, passed runs)`` counts (``trial_counts`` reads them off a
case result), so the report model and the analysis mixed into it import this without a loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import comb, sqrt
from statistics import NormalDist, fmean
from typing import TYPE_CHECKING

from referee.record._statistics import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    bootstrap_mean_ci,
    wilson_bounds,
)
from referee.stats import flip_rate

if TYPE_CHECKING:
    from referee.record._model import CaseResult

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


def trial_counts(result: CaseResult) -> tuple[int, int]:
    """(evaluated runs, passed runs) of a case: a single run counts as one trial."""
    if not result.run_results:
        return 1, int(result.passed)
    evaluated = [r for r in result.run_results if r.status.is_evaluated]
    return len(evaluated), sum(r.passed for r in evaluated)


def case_flip_rate(result: CaseResult) -> float | None:
    """The chance that two of the case's evaluated runs disagree (``referee.stats.flip_rate``);
    None for a case with fewer than two evaluated runs."""
    evaluated, passed = trial_counts(result)
    return flip_rate(passed, evaluated - passed)


def flaky_entry(result: CaseResult) -> dict[str, object]:
    """A flaky case as the report lists it: which case, its runs, and its flip rate."""
    evaluated, passed = trial_counts(result)
    return {"eval_id": result.eval_id, "name": result.label, "runs": evaluated,
            "passed_runs": passed, "flip_rate": case_flip_rate(result)}
