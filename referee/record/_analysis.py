"""What a finished report tells beyond its counts, as multivon users read it: per tag and per
evaluator, the spread of scores and its intervals, what repeated runs measure (pass@k, pass^k,
flakiness), budget gates and CSV rows; and multivon's and 10xgraph's rendering methods
(``to_html()``, ``save_json()``, ``compare()``...), which hand the report to the views.

Every view follows referee's counting rule: only evaluated cases (passed or failed) count, and a
criterion's skipped or errored results are never a 0.0.
"""

from __future__ import annotations

import csv
import io
import math
import random
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from referee.errors import EvalGateFailure
from referee.record._rendering import report_views
from referee.record._statistics import bootstrap_mean_ci, wilson_bounds
from referee.record._trial_stats import (
    PASS_AT_K,
    PASS_HAT_K,
    PassKResult,
    case_flip_rate,
    flaky_entry,
    min_detectable_effect,
    pass_at_k,
    pass_hat_k,
    report_pass_k,
    trial_counts,
)

if TYPE_CHECKING:
    from referee.record._model import CaseResult, EvalReport, EvalSummary


def _write(path: str | Path, text: str) -> None:
    report_views().save_text(path, text)


def _percentile(ordered: list[float], p: float) -> float:
    """The ``p``-th percentile of sorted values, interpolating linearly between ranks."""
    if not 0 <= p <= 100:
        raise ValueError(f"percentiles must be between 0 and 100, got {p}")
    rank = p / 100 * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _check_budget(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value < 0:
        raise ValueError(f"assert_budget: {name} must be a finite number >= 0, got {value!r}")


def _means(groups: dict[str, list[float]], digits: int | None = None) -> dict[str, float]:
    means = {key: sum(values) / len(values) for key, values in groups.items() if values}
    return {k: round(v, digits) for k, v in means.items()} if digits is not None else means


class ReportAnalysis:
    """Mixed into ``EvalReport``; reads its ``cases``, counts, ``summary`` and ``to_json``
    (declared there, not here: annotations on a pydantic model's base would shadow them)."""

    if TYPE_CHECKING:  # what EvalReport provides, for the type checker only
        cases: list[CaseResult]

        @property
        def total(self) -> int: ...
        @property
        def passed(self) -> int: ...
        @property
        def evaluated(self) -> int: ...
        @property
        def pass_rate(self) -> float: ...
        @property
        def summary(self) -> EvalSummary: ...

        def to_json(self, indent: int | None = 2) -> str: ...

    # Renderers and comparison ------------------------------------------------------------
    def compare(self, other: EvalReport) -> Any:
        """This report (the baseline) against ``other``: ``referee.report.compare_reports``,
        a ``referee.report.Comparison``."""
        return report_views().compare(self, other)  # type: ignore[arg-type]

    def save_json(self, path: str | Path) -> None:
        _write(path, self.to_json())

    def to_html(self) -> str:
        return report_views().html(self)  # type: ignore[arg-type]

    def save_html(self, path: str | Path) -> None:
        _write(path, self.to_html())

    def to_junit_xml(self) -> str:
        return report_views().junit_xml(self)  # type: ignore[arg-type]

    def save_junit_xml(self, path: str | Path) -> None:
        _write(path, self.to_junit_xml())

    @property
    def suite_name(self) -> str:
        """multivon's name for the report's ``name``."""
        return self.name  # type: ignore[attr-defined,no-any-return]

    # Views -------------------------------------------------------------------------------
    def pass_rate_ci(self, confidence: float = 0.95) -> tuple[float, float]:
        """Wilson score interval of ``pass_rate`` (passed of evaluated); (0.0, 1.0) when
        nothing was evaluated."""
        return wilson_bounds(self.passed, self.evaluated, confidence)

    def _evaluated(self) -> list[CaseResult]:
        return [c for c in self.cases if c.status.is_evaluated]

    def filter_by_evaluator(self, name: str) -> list[CaseResult]:
        """The evaluated cases where the criterion ``name`` scored and failed."""
        return [c for c in self._evaluated()
                if any(r.criterion == name and r.is_scored and not r.passed
                       for r in c.criterion_results)]

    def sample(self, n: int, *, failed_only: bool = False,
               seed: int | None = None) -> list[CaseResult]:
        """``n`` cases drawn at random (``seed`` makes the draw repeatable), from the failed
        cases only with ``failed_only=True``."""
        pool = [c for c in self.cases if c.status.is_evaluated and not c.passed] if failed_only \
            else list(self.cases)
        return random.Random(seed).sample(pool, min(max(n, 0), len(pool)))

    def score_percentiles(self, percentiles: list[int] | None = None) -> dict[str, float]:
        """``{"p10": ..., "p50": ..., "p90": ...}`` of the evaluated cases' scores (linear
        interpolation between ranks); empty when nothing was evaluated."""
        scores = sorted(c.score for c in self._evaluated())
        if not scores:
            return {}
        return {f"p{p}": round(_percentile(scores, p), 4)
                for p in (percentiles if percentiles is not None else [10, 50, 90])}

    def _by_tag(self, value: Callable[[CaseResult], float]) -> dict[str, list[float]]:
        groups: dict[str, list[float]] = {}
        for case in self._evaluated():
            for tag in case.tags:
                groups.setdefault(tag, []).append(value(case))
        return groups

    def scores_by_tag(self) -> dict[str, float]:
        """Mean case score per tag, over evaluated cases."""
        return _means(self._by_tag(lambda c: c.score), 4)

    def passed_by_tag(self) -> dict[str, float]:
        """Pass rate per tag, over evaluated cases."""
        return _means(self._by_tag(lambda c: float(c.passed)), 4)

    def count_by_tag(self) -> dict[str, int]:
        """How many cases carry each tag (all cases, whatever their status)."""
        counts: dict[str, int] = {}
        for case in self.cases:
            for tag in case.tags:
                counts[tag] = counts.get(tag, 0) + 1
        return counts

    def scores_by_evaluator(self) -> dict[str, float]:
        """Mean score per criterion over its scored results: ``summary.criterion_stats``."""
        return {name: stats.avg_score for name, stats in self.summary.criterion_stats.items()
                if stats.scored}

    def passed_by_evaluator(self) -> dict[str, float]:
        """Pass rate per criterion over its scored results: ``summary.criterion_stats``."""
        return {name: stats.pass_rate for name, stats in self.summary.criterion_stats.items()
                if stats.scored}

    # Repeated runs (EvalSuite.run(runs=N)) and what they measure -------------------------
    @property
    def runs_per_case(self) -> int:
        """How many times each case ran: the run's ``runs``, or the most runs of any case of
        a report built from case results."""
        cases = self.cases
        counted = max((c.runs for c in cases), default=1) if isinstance(cases, list) else 1
        return max(self.runs, counted)  # type: ignore[attr-defined]

    @property
    def zero_pass_cases(self) -> list[CaseResult]:
        """Evaluated cases that passed none of their runs, suspects of a broken task or grader.
        With one run per case there is no per-case signal: every evaluated case when none
        passed, else none."""
        evaluated = self._evaluated()
        if any(c.runs > 1 for c in evaluated):
            return [c for c in evaluated if c.runs > 1 and c.pass_count == 0]
        return evaluated if not any(c.passed for c in evaluated) else []

    @property
    def flaky_count(self) -> int:
        """Cases that passed in some evaluated run and failed in another."""
        return sum(c.is_flaky for c in self.cases)

    @property
    def flaky_cases(self) -> list[CaseResult]:
        """The flaky cases (their verdict flipped between runs), highest flip rate first."""
        flaky = [c for c in self.cases if c.is_flaky]
        return sorted(flaky, key=lambda c: -(case_flip_rate(c) or 0.0))

    @property
    def stability_score(self) -> float:
        """The share of cases that are not flaky (1.0 with no cases)."""
        return 1.0 - self.flaky_count / self.total if self.total else 1.0

    @property
    def saturated(self) -> bool:
        """Every evaluated case passed (and some case was evaluated): the suite can no longer
        show an improvement."""
        return self.evaluated > 0 and self.passed == self.evaluated

    @property
    def min_detectable_regression(self) -> float:
        """The smallest drop of ``pass_rate`` that a rerun of this many evaluated cases would
        detect (two-sided 5% test, 80% power), taking the variance at the pass rate held between
        0.5 and 0.95 (at a ceiling of 1.0 it would promise a sensitivity the suite lacks); 1.0
        when nothing was evaluated."""
        return min_detectable_effect(self.evaluated,
                                     baseline=min(max(self.pass_rate, 0.5), 0.95))

    def avg_score_ci(self, confidence: float = 0.95) -> tuple[float, float]:
        """Bootstrap interval of the mean case score over evaluated cases (seeded);
        (0.0, 1.0) when nothing was evaluated."""
        scores = [c.score for c in self._evaluated()]
        if not scores:
            return 0.0, 1.0
        return bootstrap_mean_ci(scores, confidence=confidence)

    def _trial_counts(self) -> list[tuple[int, int]]:
        return [trial_counts(c) for c in self._evaluated()]

    def pass_at_k(self, k: int, confidence: float = 0.95) -> PassKResult:
        """The chance that a case passes at least once in ``k`` runs, averaged over evaluated
        cases (unbiased estimator per case, from its evaluated runs); ``value`` None, with
        ``unknown_reason``, when k exceeds some case's evaluated runs."""
        return report_pass_k(self._trial_counts(), k, metric=PASS_AT_K, confidence=confidence)

    def pass_hat_k(self, k: int, confidence: float = 0.95) -> PassKResult:
        """The chance that a case passes all of ``k`` runs, averaged over evaluated cases;
        unknown as for ``pass_at_k``."""
        return report_pass_k(self._trial_counts(), k, metric=PASS_HAT_K, confidence=confidence)

    def lottery_cases(self, k: int | None = None) -> list[CaseResult]:
        """Evaluated cases that pass some of ``k`` runs but not all (pass@k above pass^k),
        widest gap first; ``k`` defaults to ``runs_per_case``. Cases with fewer evaluated runs
        than k are left out."""
        k = self.runs_per_case if k is None else k
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        gaps = []
        for case in self._evaluated():
            n, c = trial_counts(case)
            if k <= n and (gap := pass_at_k(n, c, k) - pass_hat_k(n, c, k)) > 0:
                gaps.append((gap, case))
        gaps.sort(key=lambda pair: pair[0], reverse=True)
        return [case for _, case in gaps]

    def assert_pass_hat_k(self, k: int, min_ci_low: float) -> None:
        """Raise ``EvalGateFailure`` unless pass^k's lower bound is at least ``min_ci_low``; an
        unknown pass^k fails too (a gate that cannot be checked does not pass)."""
        result = self.pass_hat_k(k)
        if result.value is None:
            raise EvalGateFailure(f"pass^{k} gate failed: {result.unknown_reason}", report=self,
                                  threshold=min_ci_low)
        if result.ci_low is not None and result.ci_low < min_ci_low:
            raise EvalGateFailure(
                f"pass^{k} gate failed: lower bound {result.ci_low:.3f} < {min_ci_low:.3f} "
                f"(pass^{k} {result.value:.3f}, interval {result.ci_low:.3f}-"
                f"{result.ci_high:.3f})", result.value, min_ci_low, report=self)

    def trial_summary(self) -> dict[str, Any]:
        """What repeated runs measure, as stored in the JSON report (``trials``)."""
        k = self.runs_per_case
        summary: dict[str, Any] = {"runs_per_case": k, "flaky_count": self.flaky_count,
                                   "stability_score": self.stability_score,
                                   "flaky_cases": [flaky_entry(c) for c in self.flaky_cases]}
        counts = self._trial_counts()  # one pass over the cases for both estimates
        for key, metric in (("pass_at_k", PASS_AT_K), ("pass_hat_k", PASS_HAT_K)):
            result = report_pass_k(counts, k, metric=metric, confidence=0.95)
            summary[key] = {"k": result.k, "value": result.value, "ci_low": result.ci_low,
                            "ci_high": result.ci_high, "estimator": result.estimator,
                            "runs": result.runs, "unknown_reason": result.unknown_reason}
        return summary

    # Budgets and CSV ---------------------------------------------------------------------
    def assert_budget(self, *, max_total_cost_usd: float | None = None,
                      max_avg_cost_per_case_usd: float | None = None,
                      max_total_tokens: int | None = None,
                      max_p95_latency_ms: float | None = None,
                      max_avg_latency_ms: float | None = None) -> None:
        """Raise ``EvalGateFailure`` naming every budget the run exceeded. Spend is the
        judge's plus what the model under test reported; latency is each case's model latency
        (a repeated case's mean). A cost budget that cannot be checked (a model without a
        price: ``referee.judge.set_price``) fails, as does an average over no cases."""
        limits = {"max_total_cost_usd": max_total_cost_usd,
                  "max_avg_cost_per_case_usd": max_avg_cost_per_case_usd,
                  "max_total_tokens": max_total_tokens, "max_p95_latency_ms": max_p95_latency_ms,
                  "max_avg_latency_ms": max_avg_latency_ms}
        for name, value in limits.items():
            if value is not None:
                _check_budget(name, value)
        spend = self.token_usage + self.model_token_usage  # type: ignore[attr-defined]
        over: list[str] = []
        if max_total_cost_usd is not None or max_avg_cost_per_case_usd is not None:
            billed = spend.requests - spend.cached_requests > 0 or spend.total_tokens > 0
            cost = spend.cost_usd if spend.cost_usd is not None else (None if billed else 0.0)
            if cost is None:
                over.append("cost budget cannot be checked: no price is known for the model(s) "
                            "used (set one with referee.judge.set_price)")
            else:
                if max_total_cost_usd is not None and cost > max_total_cost_usd:
                    over.append(f"total cost ${cost:.4f} exceeds ${max_total_cost_usd:.4f}")
                if max_avg_cost_per_case_usd is not None:
                    if not self.total:
                        over.append("average cost per case cannot be checked: no cases")
                    elif cost / self.total > max_avg_cost_per_case_usd:
                        over.append(f"average cost per case ${cost / self.total:.4f} exceeds "
                                    f"${max_avg_cost_per_case_usd:.4f}")
        if max_total_tokens is not None and spend.total_tokens > max_total_tokens:
            over.append(f"total tokens {spend.total_tokens:,} exceed {max_total_tokens:,}")
        latencies = sorted(c.latency_ms for c in self.cases
                           if c.execution is not None and c.execution.latency_s is not None)
        if latencies and max_avg_latency_ms is not None:
            mean = sum(latencies) / len(latencies)
            if mean > max_avg_latency_ms:
                over.append(f"average latency {mean:.0f} ms exceeds {max_avg_latency_ms:.0f} ms")
        if latencies and max_p95_latency_ms is not None:
            p95 = _percentile(latencies, 95)
            if p95 > max_p95_latency_ms:
                over.append(f"p95 latency {p95:.0f} ms exceeds {max_p95_latency_ms:.0f} ms")
        if over:
            raise EvalGateFailure("budget gate failed:\n  - " + "\n  - ".join(over), report=self)

    def to_csv(self) -> str:
        """One row per criterion result of each case (one row for a case without any), with
        the case's repeated-run figures."""
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(["input", "output", "evaluator", "score", "score_std", "run_pass_rate",
                         "is_flaky", "passed", "reason", "latency_ms", "tags", "status", "runs"])
        for case in self.cases:
            shared = [round(case.score_std, 4), round(case.run_pass_rate, 4), case.is_flaky]
            tail = [round(case.latency_ms, 1), ",".join(case.tags), case.status.value,
                    case.runs]
            rows = [[r.criterion, round(r.score, 4), *shared, r.passed, r.explanation]
                    for r in case.criterion_results] or [["", "", *shared, "", case.error or ""]]
            for row in rows:
                writer.writerow([case.case_input, case.actual_output, *row, *tail])
        return buffer.getvalue()

    def save_csv(self, path: str | Path) -> None:
        _write(path, self.to_csv())
