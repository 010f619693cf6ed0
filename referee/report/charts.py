"""Chart geometry for the HTML report: numbers in, rectangles out.

The SVG markup itself is written by the ``charts.html.j2`` macros, so every label still goes
through Jinja's autoescaping like the rest of the page. Each chart and each mark carries its
numbers as ``data-*`` attributes: a test (or a curious reader) can check what a bar stands for
without measuring pixels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

BAR_CHART_WIDTH = 520
LABEL_WIDTH = 170
ROW_HEIGHT = 18
ROW_GAP = 6
HISTOGRAM_WIDTH = 260
HISTOGRAM_HEIGHT = 90
OUTCOMES = ("passed", "failed", "errors", "skipped")


@dataclass(frozen=True)
class Mark:
    """One rectangle (or a whisker line when ``kind == "ci"``)."""

    x: float
    y: float
    width: float
    height: float
    kind: str
    value: float
    title: str


@dataclass
class Chart:
    kind: str
    title: str
    width: int
    height: int
    marks: list[Mark] = field(default_factory=list)
    labels: list[tuple[float, float, str, str]] = field(default_factory=list)  # x, y, text, anchor
    data: dict[str, str] = field(default_factory=dict)
    legend: list[tuple[str, str]] = field(default_factory=list)  # (mark kind, words)


@dataclass(frozen=True)
class OutcomeCounts:
    label: str
    passed: int
    failed: int
    errors: int
    skipped: int


PLOT_WIDTH = BAR_CHART_WIDTH - LABEL_WIDTH - 60


def _row_chart(kind: str, title: str, rows: int, legend: list[tuple[str, str]]) -> Chart:
    """A chart of one labelled bar row per criterion."""
    height = max(1, rows) * (ROW_HEIGHT + ROW_GAP) + ROW_GAP
    return Chart(kind, title, BAR_CHART_WIDTH, height, legend=legend)


def outcome_bars(rows: Sequence[OutcomeCounts]) -> Chart:
    """One stacked bar per criterion: passed, failed, errors, skipped, to the same scale."""
    plot = PLOT_WIDTH
    chart = _row_chart("outcomes", "Outcomes per criterion", len(rows),
                       [(o, o) for o in OUTCOMES])
    widest = max((r.passed + r.failed + r.errors + r.skipped for r in rows), default=0)
    for i, row in enumerate(rows):
        y = ROW_GAP + i * (ROW_HEIGHT + ROW_GAP)
        chart.labels.append((LABEL_WIDTH - 6, y + ROW_HEIGHT - 5, _short(row.label), "end"))
        x = float(LABEL_WIDTH)
        total = row.passed + row.failed + row.errors + row.skipped
        for outcome in OUTCOMES:
            count = getattr(row, outcome)
            if not count:
                continue
            width = plot * count / widest
            chart.marks.append(Mark(x, y, width, ROW_HEIGHT, outcome, count,
                                    f"{row.label}: {count} {outcome} of {total}"))
            x += width
        chart.labels.append((x + 4, y + ROW_HEIGHT - 5, f"{total}", "start"))
    return chart


def histogram(values: Sequence[float], *, kind: str, title: str, low: float | None = None,
              high: float | None = None, bins: int = 10) -> Chart:
    """Counts of ``values`` in ``bins`` equal bins over [low, high] (the data's range by default).

    The last bin is closed, so a score of exactly 1.0 lands in the top bin, not past it.
    """
    chart = Chart(kind, title, HISTOGRAM_WIDTH, HISTOGRAM_HEIGHT + 22)
    finite = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    lo = min(finite, default=0.0) if low is None else low
    hi = max(finite, default=1.0) if high is None else high
    if hi <= lo:
        hi = lo + 1.0
    counts = [0] * bins
    for v in finite:
        position = int((v - lo) / (hi - lo) * bins)
        counts[min(max(position, 0), bins - 1)] += 1
    tallest = max(counts, default=0) or 1
    slot = HISTOGRAM_WIDTH / bins
    for i, count in enumerate(counts):
        left = lo + (hi - lo) * i / bins
        right = lo + (hi - lo) * (i + 1) / bins
        bar = HISTOGRAM_HEIGHT * count / tallest
        chart.marks.append(Mark(i * slot + 1, HISTOGRAM_HEIGHT - bar, slot - 2, bar, "bin", count,
                                f"{_num(left)}–{_num(right)}: {count}"))
    chart.labels.append((0, HISTOGRAM_HEIGHT + 16, _num(lo), "start"))
    chart.labels.append((HISTOGRAM_WIDTH, HISTOGRAM_HEIGHT + 16, _num(hi), "end"))
    chart.data = {"n": str(len(finite)), "low": _num(lo), "high": _num(hi),
                  "counts": " ".join(str(c) for c in counts)}
    return chart


@dataclass(frozen=True)
class Delta:
    label: str
    mean_delta: float
    ci_low: float
    ci_high: float
    n: int


def delta_bars(rows: Sequence[Delta]) -> Chart:
    """Mean score change per criterion (B - A) around a zero line, with its 95% interval."""
    plot = PLOT_WIDTH
    chart = _row_chart("deltas", "Mean score change per criterion (B − A)", len(rows),
                       [("up", "better"), ("down", "worse"), ("ci", "95% interval")])
    reach = max((max(abs(r.ci_low), abs(r.ci_high), abs(r.mean_delta)) for r in rows), default=0.0)
    reach = reach or 1.0
    zero = LABEL_WIDTH + plot / 2

    def at(value: float) -> float:
        return zero + value / reach * (plot / 2)

    for i, row in enumerate(rows):
        y = ROW_GAP + i * (ROW_HEIGHT + ROW_GAP)
        chart.labels.append((LABEL_WIDTH - 6, y + ROW_HEIGHT - 5, _short(row.label), "end"))
        left, right = sorted((zero, at(row.mean_delta)))
        kind = "up" if row.mean_delta > 0 else "down" if row.mean_delta < 0 else "flat"
        chart.marks.append(Mark(left, y + 3, max(right - left, 1.0), ROW_HEIGHT - 6, kind,
                                row.mean_delta, f"{row.label}: {row.mean_delta:+.3f} (95% CI "
                                f"{row.ci_low:+.3f} to {row.ci_high:+.3f}, n={row.n})"))
        low, high = at(row.ci_low), at(row.ci_high)
        chart.marks.append(Mark(low, y + ROW_HEIGHT / 2, max(high - low, 0.0), 0, "ci",
                                row.mean_delta, ""))
        chart.labels.append((BAR_CHART_WIDTH - 4, y + ROW_HEIGHT - 5, f"{row.mean_delta:+.3f}", "end"))
    chart.data = {"zero": f"{zero:.1f}"}
    return chart


def _num(value: float) -> str:
    if abs(value) >= 100 or float(value).is_integer():
        return f"{value:.0f}"
    return f"{value:.2f}"


def _short(label: str, limit: int = 26) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"
