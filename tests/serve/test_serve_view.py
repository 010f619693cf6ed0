"""`referee view` shows a serve's windows over time: runs written by the real serve path (OTLP
exporter -> receiver -> rolling windows), read back through the viewer's HTTP server and
rendered in headless Chromium."""

from __future__ import annotations

import asyncio
import re
import time
import urllib.request
from collections import defaultdict
from html import unescape
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.sdk.trace.export import SpanExportResult  # noqa: E402
from otlp_receiver import receiver  # noqa: E402
from traffic import make_traces  # noqa: E402

from referee.evaluators.deterministic import Contains  # noqa: E402
from referee.record import CaseResult, CaseStatus, EvalReport, format_rate  # noqa: E402
from referee.report.serve_view import online_windows, rate_chart, serve_view  # noqa: E402
from referee.report.viewer import start_viewer  # noqa: E402
from referee.result import CriterionResult  # noqa: E402
from referee.store import RunStore, list_runs, load_run  # noqa: E402

WINDOW_S = 2.0
SERVE = "shop-live"


def export(url: str, traces: list[list[Any]]) -> SpanExportResult:
    exporter = OTLPSpanExporter(endpoint=f"{url}/v1/traces", timeout=60)
    try:
        return exporter.export([span for trace in traces for span in trace])
    finally:
        exporter.shutdown()


async def at_next_window() -> None:
    """Sleep to just past the next window boundary: what follows lands in a window of its own."""
    now = time.time()
    await asyncio.sleep(WINDOW_S - now % WINDOW_S + 0.05)


def get(base_url: str, path: str) -> str:
    with urllib.request.urlopen(base_url + path, timeout=30) as resp:
        return resp.read().decode("utf-8")


def chart_values(page: str, kind: str, title: str) -> list[float]:
    """The data-value of each point of one chart on the serve page."""
    figure = re.search(r'<figure class="chart" data-chart="pass-rate" data-kind="' + kind
                       + r'" data-title="' + re.escape(title) + r'".*?</figure>', page, re.S)
    assert figure is not None, f"no {kind} chart {title!r}"
    return [float(v) for v in re.findall(r'class="m-rate" [^>]*data-value="([0-9.]+)"',
                                         figure.group(0))]


def window_report(run_id: str, started_at: float) -> EvalReport:
    return EvalReport(run_id=run_id, name="replicas", eval_set_id="replicas",
                      model_id="recorded", started_at=started_at,
                      metadata={"online": True, "window_s": 60.0})


def window_run(runs_dir: Path, run_id: str, started_at: float,
               statuses: list[CaseStatus], finished: bool = False) -> RunStore:
    """A window's run as `referee serve` stores it (meta.json marks it online)."""
    report = window_report(run_id, started_at)
    store = RunStore.create(runs_dir, report, case_ids=[])
    for i, status in enumerate(statuses):
        report.cases.append(CaseResult(index=i, eval_id=f"{run_id}-{i}", status=status))
        store.append_case(report.cases[-1])
    if finished:
        store.write_report(report)
    store.release()
    return store


def test_a_finished_window_is_read_again_only_when_it_is_scored_again(tmp_path):
    runs_dir = tmp_path / "runs"
    store = window_run(runs_dir, "replicas-a", 600.0, [CaseStatus.PASSED], finished=True)

    def counts() -> tuple[int, int]:
        runs = list_runs(runs_dir)
        (point,) = serve_view("replicas", online_windows(runs, ["replicas-a"])["replicas"]).points
        return point.overall.passed, point.overall.decided

    assert counts() == (1, 1)
    # A rescore rewrites cases.jsonl and report.json: the page shows the new scoring.
    store = RunStore.reopen(store.run_dir)
    report = window_report("replicas-a", 600.0)
    report.cases = [*store.read_cases(), CaseResult(index=1, eval_id="late",
                                                    status=CaseStatus.FAILED)]
    store.append_case(report.cases[-1])
    store.write_report(report)
    store.release()
    assert counts() == (1, 2)


def test_windows_that_replicas_started_together_are_one_point_and_failures_are_capped(tmp_path):
    runs_dir = tmp_path / "runs"
    passed, failed = CaseStatus.PASSED, CaseStatus.FAILED
    window_run(runs_dir, "replicas-a", 600.0, [passed, failed, failed])
    window_run(runs_dir, "replicas-a-2", 600.0, [passed, passed, failed])  # another process
    window_run(runs_dir, "replicas-b", 660.0, [CaseStatus.JUDGE_ERROR])  # no verdict at all
    runs = list_runs(runs_dir)
    serves = online_windows(runs, [r.path.name for r in runs])
    view = serve_view("replicas", serves["replicas"], latest_failures=2)
    assert [(p.started_at, sorted(p.keys)) for p in view.points] == [
        (600.0, ["replicas-a", "replicas-a-2"]), (660.0, ["replicas-b"])]
    assert (view.points[0].overall.passed, view.points[0].overall.decided) == (3, 6)
    assert view.points[1].errors == 1 and view.points[1].overall.value is None
    chart = rate_chart("overall", "overall", view.points, lambda p: p.overall)
    assert chart.windows == 2 and [p.value for p in chart.points] == [0.5]  # no rate, no point
    # The newest first, and no more than asked: the errored case, then the latest failure.
    assert [(f.run_key, f.index) for f in view.failures] == [("replicas-b", 0),
                                                             ("replicas-a-2", 2)]


def plain_run(runs_dir: Path) -> None:
    """A finished offline run of the same name: not one of the serve's windows."""
    report = EvalReport(run_id="offline-run", name=SERVE, eval_set_id=SERVE, model_id="m",
                        started_at=time.time() - 86_400, finished_at=time.time(), cases=[
                            CaseResult(eval_id="x", status=CaseStatus.FAILED, criterion_results=[
                                CriterionResult(criterion="contains", score=0.0, passed=False)])])
    store = RunStore.create(runs_dir, report, case_ids=["x"])
    store.append_case(report.cases[0])
    store.write_report(report)
    store.release()


async def test_the_viewer_charts_a_serves_pass_rate_per_window_and_links_its_failures(tmp_path):
    # "answer 1" passes trace 1 of the first batch, all of the second (answers 10-14) and none
    # of the third (20-24): each window has a pass rate of its own.
    criteria = [Contains("answer"), Contains("answer 1")]
    batches = [make_traces(5, start=0), make_traces(5, start=10), make_traces(5, start=20)]
    runs_dir = tmp_path / "runs"
    plain_run(runs_dir)
    viewer = start_viewer(None, runs_dir)
    try:
        async with receiver(criteria, tmp_path, window_s=WINDOW_S, name=SERVE) as (scorer, url):
            for batch in batches:
                await at_next_window()
                assert await asyncio.to_thread(export, url, batch) == SpanExportResult.SUCCESS
                await scorer.drain()
            # While a window is open the page says so and reloads itself: failures as they come.
            live = await asyncio.to_thread(get, viewer.base_url, "/serve/" + SERVE)
            assert 'data-live="15"' in live
            assert "<td>open</td>" in live
        index = await asyncio.to_thread(get, viewer.base_url, "/")
        page = await asyncio.to_thread(get, viewer.base_url, "/serve/" + SERVE)
    finally:
        viewer.close()

    # What the store holds, read without the viewer: each window's pass rates.
    windows = [r for r in list_runs(runs_dir) if r.run_id != "offline-run"]
    assert len({w.started_at for w in windows}) >= len(batches)
    by_start: dict[float, list[CaseResult]] = defaultdict(list)
    for window in windows:
        by_start[window.started_at].extend(load_run(window.path).cases)
    starts = sorted(by_start)

    def rate(cases: list[CaseResult], criterion: str | None = None) -> float:
        if criterion is None:
            verdicts = [c.status == CaseStatus.PASSED for c in cases]
        else:
            verdicts = [r.passed for c in cases for r in c.criterion_results
                        if r.criterion == criterion]
        return round(sum(verdicts) / len(verdicts), 4)

    # The index groups the windows under their serve (the offline run of that name is not one).
    row = re.search(r'<tr data-serve="' + SERVE + r'">.*?</tr>', index, re.S)
    assert row is not None
    assert f'<td class="num">{len(windows)}</td>' in row.group(0)
    assert "offline-run" not in row.group(0)
    assert f'href="/serve/{SERVE}"' in row.group(0)
    newest = max(windows, key=lambda w: w.started_at)
    assert f'<td class="num">{format_rate(newest.pass_rate, newest.passed + newest.failed)}</td>' \
        in row.group(0)

    # One point per window, overall and per criterion, at the rates the store holds.
    assert chart_values(page, "overall", "Pass rate per window") == [
        rate(by_start[s]) for s in starts]
    for criterion in ("contains", "contains#2"):
        assert chart_values(page, "criterion", criterion) == [
            rate(by_start[s], criterion) for s in starts]
    assert 'data-live=""' in page  # stopped: the last window is finished

    # The latest failures, newest first, each linked to its case in its window's run.
    failed = sorted(((w.started_at, c.index, w.run_id, c.eval_id) for w in windows
                     for c in load_run(w.path).cases if c.status != CaseStatus.PASSED),
                    reverse=True)
    assert len(failed) == 9  # 4 of the first batch, none of the second, 5 of the third
    links = re.findall(r'<td><a href="(/run/[^"]+)">([0-9a-f]{32})</a></td>', page)
    assert [(unescape(href), eval_id) for href, eval_id in links] == [
        (f"/run/{run_id}#case-{index}", eval_id) for _start, index, run_id, eval_id in failed]


def test_a_serve_page_renders_its_chart_in_chromium(tmp_path):
    from chromium_cdp import Browser
    from chromium_support import find_chromium

    find_chromium()
    asyncio.run(_serve_three_windows(tmp_path))
    runs_dir = tmp_path / "runs"
    windows = {r.started_at for r in list_runs(runs_dir)}
    with start_viewer(None, runs_dir) as viewer, Browser(tmp_path) as browser:
        browser.goto(f"{viewer.base_url}/serve/{SERVE}")
        drawn = browser.evaluate("""(() => {
            const figure = document.querySelector('figure[data-kind="overall"]');
            const svg = figure.querySelector('svg').getBoundingClientRect();
            const points = [...figure.querySelectorAll('circle.m-rate')].map(c => {
                const box = c.getBoundingClientRect();
                return [box.width > 0 && box.height > 0, box.left >= svg.left - 4,
                        box.right <= svg.right + 4];
            });
            return {width: svg.width, height: svg.height, points,
                    line: !!figure.querySelector('polyline.m-rate-line'),
                    criteria: document.querySelectorAll('figure[data-kind="criterion"]').length,
                    failures: [...document.querySelectorAll('table.serve-failures a')]
                                .map(a => a.getAttribute('href'))};
        })()""")
        assert drawn["width"] > 100 and drawn["height"] > 50
        assert len(drawn["points"]) == len(windows) >= 3  # one point per window, all visible
        assert all(all(flags) for flags in drawn["points"])
        assert drawn["line"] and drawn["criteria"] == 2
        # A failure's link opens its case in the window's run page.
        browser.goto(viewer.base_url + drawn["failures"][0])
        case = drawn["failures"][0].rpartition("#")[2]
        assert browser.wait_for(f"!!document.getElementById('{case}')")


async def _serve_three_windows(tmp_path: Path) -> None:
    criteria = [Contains("answer"), Contains("answer 1")]
    async with receiver(criteria, tmp_path, window_s=WINDOW_S, name=SERVE) as (scorer, url):
        for start in (0, 10, 20):
            await at_next_window()
            assert await asyncio.to_thread(export, url, make_traces(3, start=start)) \
                == SpanExportResult.SUCCESS
            await scorer.drain()
