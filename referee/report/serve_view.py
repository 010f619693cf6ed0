"""The viewer's page for one `referee serve`: its rolling windows over time.

`referee serve` writes one ordinary run per window (referee.serve._windows): meta.json names
the serve (``name``) and marks the run as online (``metadata.online``, with ``window_s``).
The runs of one name are one serve's windows; windows that start together (several serve
processes on one store write ``-2``, ``-3``... beside each other) are one window here, one
point on the chart. The page shows the pass rate per window, overall and per criterion, as
inline SVG (no asset is fetched: the viewer's Content-Security-Policy forbids it), and the
latest failures, each linked to its case in its window's run.

Reading is by meta.json (cheap) to find the windows, then one streamed pass over each
window's cases.jsonl: a large window is never held whole, and a finished window is read once
per viewer (the page reloads itself while a window is open).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

from referee.record import CaseResult, CaseStatus, format_rate
from referee.store import META_FILE, REPORT_FILE, RunInfo, RunStore

LATEST_FAILURES = 20
CHART_WIDTH = 520
CHART_HEIGHT = 120
CHART_LEFT = 34  # room for the 0% / 100% labels
CHART_BOTTOM = 18  # room for the first and last window's time
# While a window is open the page reloads itself this often: failures show as they come.
LIVE_RELOAD_S = 15
# The page's own script: it marks the page as scripted, and reloads it while a window is open.
SCRIPT = ("document.body.setAttribute('data-js','on');"
          "var live=document.getElementById('serve-live').getAttribute('data-live');"
          "if(live){setTimeout(function(){location.reload();},Number(live)*1000);}")


@dataclass(frozen=True)
class WindowRun:
    """One window's run as meta.json describes it."""

    key: str  # its URL name in the viewer
    path: Path
    serve: str
    started_at: float
    window_s: float
    running: bool
    pass_rate: str  # as the run list prints it


def online_windows(runs: Sequence[RunInfo], keys: Sequence[str]) -> dict[str, list[WindowRun]]:
    """The runs written by `referee serve`, by serve name, oldest window first."""
    serves: dict[str, list[WindowRun]] = {}
    for run, key in zip(runs, keys):
        meta = _meta(run.path)
        metadata = meta.get("metadata")
        if not isinstance(metadata, dict):
            continue
        if not metadata.get("online"):
            continue
        name = str(meta.get("name") or run.name)
        serves.setdefault(name, []).append(WindowRun(
            key=key, path=run.path, serve=name,
            started_at=float(meta.get("started_at") or run.started_at),
            window_s=float(metadata.get("window_s") or 0.0), running=run.running,
            pass_rate=format_rate(run.pass_rate, run.passed + run.failed)))
    for windows in serves.values():
        windows.sort(key=lambda w: (w.started_at, w.key))
    return serves


def _meta(path: Path) -> dict[str, Any]:
    if not path.is_dir():
        return {}
    try:
        data = json.loads((path / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # the run list already shows what is wrong with it
    return data if isinstance(data, dict) else {}


@dataclass
class PassCount:
    passed: int = 0
    decided: int = 0  # passed + failed: errors and skips are not verdicts

    def add(self, passed: bool) -> None:
        self.passed += passed
        self.decided += 1

    def merge(self, other: PassCount) -> None:
        self.passed += other.passed
        self.decided += other.decided

    @property
    def value(self) -> float | None:
        return self.passed / self.decided if self.decided else None


@dataclass
class WindowPoint:
    """One window (every run that started it): its cases' outcomes."""

    started_at: float
    keys: list[str]
    running: bool = False
    cases: int = 0
    errors: int = 0
    overall: PassCount = field(default_factory=PassCount)
    criteria: dict[str, PassCount] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)  # one window's, newest first


@dataclass(frozen=True)
class Failure:
    run_key: str
    index: int
    eval_id: str
    status: str
    window_start: float
    failed: tuple[str, ...]  # the criteria that failed or could not be scored

    @property
    def href(self) -> str:
        return f"/run/{quote(self.run_key)}#case-{self.index}"


@dataclass
class ServeView:
    name: str
    window_s: float
    points: list[WindowPoint]
    failures: list[Failure]  # newest first

    @property
    def criteria(self) -> list[str]:
        names: dict[str, None] = {}
        for point in self.points:
            names.update(dict.fromkeys(point.criteria))
        return list(names)

    @property
    def running(self) -> bool:
        return any(point.running for point in self.points)


def serve_view(name: str, windows: Sequence[WindowRun], *,
               latest_failures: int = LATEST_FAILURES) -> ServeView:
    """Each window's pass rates and the newest failures, from the windows' stored cases."""
    points: dict[float, WindowPoint] = {}
    failures: list[Failure] = []
    for window in windows:
        point = points.setdefault(window.started_at, WindowPoint(window.started_at, []))
        point.keys.append(window.key)
        point.running = point.running or window.running
        read = _read_window(window, latest_failures)
        point.cases += read.cases
        point.errors += read.errors
        point.overall.merge(read.overall)
        for criterion, count in read.criteria.items():
            point.criteria.setdefault(criterion, PassCount()).merge(count)
        failures.extend(read.failures)
    failures.sort(key=_newest_first, reverse=True)
    window_s = max((w.window_s for w in windows), default=0.0)
    return ServeView(name, window_s, [points[s] for s in sorted(points)],
                     failures[:latest_failures])


def _newest_first(failure: Failure) -> tuple[float, int, str]:
    return failure.window_start, failure.index, failure.run_key


def _read_window(window: WindowRun, latest_failures: int) -> WindowPoint:
    """A window's counts and its newest failures; a finished window is read once (its
    report.json's time names the reading), so a page that reloads reads only the open ones."""
    try:
        finished = (window.path / REPORT_FILE).stat().st_mtime_ns
    except OSError:
        finished = None
    if window.running or finished is None:
        return _count_cases(window.path, window.key, window.started_at, latest_failures)
    return _finished_window(window.path, window.key, window.started_at, finished,
                            latest_failures)


@lru_cache(maxsize=2048)
def _finished_window(path: Path, key: str, started_at: float, finished: int,
                     latest_failures: int) -> WindowPoint:
    return _count_cases(path, key, started_at, latest_failures)


def _count_cases(path: Path, key: str, started_at: float, latest_failures: int) -> WindowPoint:
    point = WindowPoint(started_at, [key])
    for case in RunStore(path).stream_cases():
        _count(point, case)
        failure = _failure(key, started_at, case)
        if failure is not None:
            point.failures.append(failure)
            if len(point.failures) > 2 * latest_failures:  # bounded: keep the newest
                point.failures = sorted(point.failures, key=_newest_first,
                                        reverse=True)[:latest_failures]
    point.failures = sorted(point.failures, key=_newest_first, reverse=True)[:latest_failures]
    return point


def _count(point: WindowPoint, case: CaseResult) -> None:
    point.cases += 1
    if case.status in (CaseStatus.PASSED, CaseStatus.FAILED):
        point.overall.add(case.status == CaseStatus.PASSED)
    elif case.status != CaseStatus.SKIPPED:
        point.errors += 1
    for result in case.criterion_results:
        rate = point.criteria.setdefault(result.criterion, PassCount())
        if not result.skipped and result.error is None:
            rate.add(result.passed)


def _failure(key: str, started_at: float, case: CaseResult) -> Failure | None:
    if case.status in (CaseStatus.PASSED, CaseStatus.SKIPPED):
        return None
    failed = tuple(r.criterion for r in case.criterion_results
                   if not r.skipped and (r.error is not None or not r.passed))
    return Failure(key, case.index, case.eval_id, case.status.value, started_at, failed)


# The chart -------------------------------------------------------------------------------

@dataclass(frozen=True)
class ChartPoint:
    x: float
    y: float
    value: float
    window: str  # the window's start, as shown
    title: str


@dataclass
class RateChart:
    """A pass rate (0 to 1) per window, left to right; windows without a verdict have no point."""

    title: str
    kind: str
    width: int
    height: int
    points: list[ChartPoint]
    windows: int
    labels: list[tuple[float, float, str, str]]  # x, y, text, anchor
    left: float  # the plot's edges: the 100% and 0% lines run across them
    right: float
    top: float
    bottom: float

    @property
    def path(self) -> str:
        return " ".join(f"{p.x:.1f},{p.y:.1f}" for p in self.points)


def rate_chart(title: str, kind: str, points: Sequence[WindowPoint],
               rate_of: Callable[[WindowPoint], PassCount | None]) -> RateChart:
    """``rate_of(point)`` gives the window's verdicts (None: it has none of that kind)."""
    plot_w = CHART_WIDTH - CHART_LEFT - 8
    plot_h = CHART_HEIGHT - CHART_BOTTOM - 6
    step = plot_w / max(len(points) - 1, 1)
    marks = []
    for i, point in enumerate(points):
        rate = rate_of(point)
        value = rate.value if rate is not None else None
        if rate is None or value is None:
            continue
        x = CHART_LEFT + (i * step if len(points) > 1 else plot_w / 2)
        y = 6 + plot_h * (1 - value)
        when = _when(point.started_at)
        marks.append(ChartPoint(x, y, value, when, f"{when}: {format_rate(value, rate.decided)} "
                                f"({rate.passed} of {rate.decided})"))
    labels: list[tuple[float, float, str, str]] = [
        (CHART_LEFT - 4, 10.0, "100%", "end"), (CHART_LEFT - 4, 6 + plot_h, "0%", "end")]
    if points:
        labels.append((CHART_LEFT, CHART_HEIGHT - 2, _when(points[0].started_at), "start"))
        if len(points) > 1:
            labels.append((CHART_WIDTH - 8, CHART_HEIGHT - 2, _when(points[-1].started_at), "end"))
    return RateChart(title, kind, CHART_WIDTH, CHART_HEIGHT, marks, len(points), labels,
                     left=CHART_LEFT, right=CHART_LEFT + plot_w, top=6, bottom=6 + plot_h)


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))


# The page --------------------------------------------------------------------------------

def render_serve_html(view: ServeView, *, index_href: str = "/") -> str:
    from referee.report.html import _page  # the viewer's page frame, CSP and style

    overall = rate_chart("Pass rate per window", "overall", view.points, lambda p: p.overall)
    per_criterion = [rate_chart(name, "criterion", view.points, _criterion_rate(name))
                     for name in view.criteria]
    windows = [{
        "runs": p.keys, "date": _when(p.started_at), "cases": p.cases, "errors": p.errors,
        "pass_rate": format_rate(p.overall.value or 0.0, p.overall.decided),
        "state": "open" if p.running else "closed",
    } for p in reversed(view.points)]
    failures = [{"href": f.href, "eval_id": f.eval_id, "status": f.status, "run": f.run_key,
                 "date": _when(f.window_start), "failed": ", ".join(f.failed) or "—"}
                for f in view.failures]
    return _page("serve.html.j2", script=SCRIPT, name=view.name, window_s=view.window_s,
                 overall=overall, per_criterion=per_criterion, windows=windows,
                 failures=failures, live=LIVE_RELOAD_S if view.running else 0,
                 index_href=index_href)


def _criterion_rate(name: str) -> Callable[[WindowPoint], PassCount | None]:
    return lambda point: point.criteria.get(name)


def serve_summaries(serves: dict[str, list[WindowRun]]) -> list[dict[str, Any]]:
    """What the run index says of each serve: its windows, newest first, and their links."""
    return [{"name": name, "href": "/serve/" + quote(name, safe=""),
             "windows": [w.key for w in reversed(windows)], "latest": windows[-1].pass_rate,
             "live": any(w.running for w in windows)}
            for name, windows in sorted(serves.items())]
