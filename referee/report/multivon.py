"""multivon-eval's report methods, over referee's one report: its renderers and comparison under
multivon's names, and the per-tag, per-evaluator and distribution views multivon users read.

Every view follows referee's counting rule: only evaluated cases (passed or failed) count, and a
criterion's skipped or errored results are never a 0.0.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from referee.report.compare import Comparison
    from referee.report.model import CaseResult, EvalReport


def _write(path: str | Path, text: str) -> None:
    """Write a report file, creating its folder first."""
    from referee.report.writers import write_atomic

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, [text])


def _means(groups: dict[str, list[float]], digits: int | None = None) -> dict[str, float]:
    means = {key: sum(values) / len(values) for key, values in groups.items() if values}
    return {k: round(v, digits) for k, v in means.items()} if digits is not None else means


class MultivonReportMethods:
    """Mixed into ``EvalReport``; reads its ``cases``, counts, ``summary`` and ``to_json``
    (declared there, not here: annotations on a pydantic model's base would shadow them)."""

    # Renderers and comparison ------------------------------------------------------------
    def compare(self, other: "EvalReport") -> "Comparison":
        """This report (the baseline) against ``other``: ``referee.report.compare_reports``."""
        from referee.report.compare import compare_reports

        return compare_reports(self, other)  # type: ignore[arg-type]

    def save_json(self, path: str | Path) -> None:
        _write(path, self.to_json())

    def to_html(self) -> str:
        from referee.report.html import render_html

        return render_html(self)  # type: ignore[arg-type]

    def save_html(self, path: str | Path) -> None:
        _write(path, self.to_html())

    def to_junit_xml(self) -> str:
        from referee.report.junit import render_junit

        return render_junit(self)  # type: ignore[arg-type]

    def save_junit_xml(self, path: str | Path) -> None:
        _write(path, self.to_junit_xml())

    # Views -------------------------------------------------------------------------------
    def pass_rate_ci(self, confidence: float = 0.95) -> tuple[float, float]:
        """Wilson score interval of ``pass_rate`` (passed of evaluated); (0.0, 1.0) when
        nothing was evaluated."""
        from referee.report.compare import wilson_bounds

        return wilson_bounds(self.passed, self.evaluated, confidence)

    def _evaluated(self) -> list["CaseResult"]:
        return [c for c in self.cases if c.status.is_evaluated]

    def filter_by_evaluator(self, name: str) -> list["CaseResult"]:
        """The evaluated cases where the criterion ``name`` scored and failed."""
        return [c for c in self._evaluated()
                if any(r.criterion == name and r.is_scored and not r.passed
                       for r in c.criterion_results)]

    def sample(self, n: int, *, failed_only: bool = False,
               seed: int | None = None) -> list["CaseResult"]:
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
        out: dict[str, float] = {}
        for p in percentiles if percentiles is not None else [10, 50, 90]:
            if not 0 <= p <= 100:
                raise ValueError(f"percentiles must be between 0 and 100, got {p}")
            rank = p / 100 * (len(scores) - 1)
            low = int(rank)
            high = min(low + 1, len(scores) - 1)
            value = scores[low] + (scores[high] - scores[low]) * (rank - low)
            out[f"p{p}"] = round(value, 4)
        return out

    def _by_tag(self, value: Callable[["CaseResult"], float]) -> dict[str, list[float]]:
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
