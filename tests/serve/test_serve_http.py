"""The receiver's answers, /metrics, the spool's torn tail, late spans and rootless traces."""

from __future__ import annotations

import asyncio
import gzip
import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from opentelemetry.exporter.otlp.proto.http import Compression  # noqa: E402
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.sdk.trace.export import SpanExportResult  # noqa: E402
from otlp_receiver import receiver  # noqa: E402
from traffic import make_traces, scrape, trace_id  # noqa: E402

from referee.evaluators.deterministic import Contains  # noqa: E402
from referee.serve._spool import Spool  # noqa: E402
from referee.store import list_runs, load_run  # noqa: E402


def post(url: str, body: bytes, content_type: str,
         encoding: str | None = None) -> tuple[int, bytes, dict[str, str]]:
    headers = {"Content-Type": content_type}
    if encoding:
        headers["Content-Encoding"] = encoding
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, reply.read(), dict(reply.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.read(), dict(error.headers)


def fetch(url: str) -> tuple[int, bytes, dict[str, str]]:
    with urllib.request.urlopen(url, timeout=10) as reply:
        return reply.status, reply.read(), dict(reply.headers)


def export(url: str, spans: list[Any], **options: Any) -> SpanExportResult:
    exporter = OTLPSpanExporter(endpoint=f"{url}/v1/traces", **options)
    try:
        return exporter.export(spans)
    finally:
        exporter.shutdown()


async def test_answers_follow_otlp_http(tmp_path):
    async with receiver([Contains("answer")], tmp_path) as (_, url):
        traces = f"{url}/v1/traces"
        empty = await asyncio.to_thread(post, traces, b'{"resourceSpans": []}',
                                        "application/json")
        assert empty[:2] == (200, b"{}")
        assert (await asyncio.to_thread(post, traces, b"", "application/x-protobuf"))[:2] == (
            200, b"")
        bad_json = await asyncio.to_thread(post, traces, b"{not json", "application/json")
        assert bad_json[0] == 400 and b"not valid JSON" in bad_json[1]
        no_spans = await asyncio.to_thread(post, traces, b'{"resourceSpans": 3}',
                                           "application/json")
        assert no_spans[0] == 400 and b"resourceSpans" in no_spans[1]
        bad_proto = await asyncio.to_thread(post, traces, b"\xff\xff\xff", "application/x-protobuf")
        assert bad_proto[0] == 400 and b"not an OTLP protobuf export" in bad_proto[1]
        other = await asyncio.to_thread(post, traces, b"x", "text/plain")
        assert other[0] == 415
        zipped = await asyncio.to_thread(post, traces, gzip.compress(b'{"resourceSpans": []}'),
                                         "application/json", "gzip")
        assert zipped[:2] == (200, b"{}")


async def test_metrics_are_scraped_in_prometheus_text_format(tmp_path):
    # "answer 1" is in one answer of four: a pass rate of 0.25.
    async with receiver([Contains("answer 1"), Contains("answer")], tmp_path) as (scorer, url):
        spans = [s for t in make_traces(4) for s in t]
        assert await asyncio.to_thread(export, url, spans,
                                       compression=Compression.Gzip) == SpanExportResult.SUCCESS
        await scorer.drain()
        status, body, headers = await asyncio.to_thread(fetch, f"{url}/metrics")
        content_type, text = headers["Content-Type"], body.decode()
        metrics = await asyncio.to_thread(scrape, url)
    assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
    assert "# TYPE referee_serve_cases_scored_total counter" in text
    assert metrics["referee_serve_spans_received_total"] == 8
    assert metrics['referee_serve_cases_scored_total{status="FAILED"}'] == 3
    assert metrics['referee_serve_cases_scored_total{status="PASSED"}'] == 1
    assert metrics['referee_serve_criterion_pass_rate{criterion="contains"}'] == 0.25
    assert metrics['referee_serve_criterion_pass_rate{criterion="contains#2"}'] == 1.0
    assert metrics['referee_serve_criterion_results_total{criterion="contains",'
                   'outcome="failed"}'] == 3
    assert metrics["referee_serve_queue_depth"] == 0
    assert metrics["referee_serve_dropped_total"] == 0
    assert metrics["referee_serve_judge_spend_usd_total"] == 0


async def test_late_spans_and_a_trace_without_its_root_are_scored_apart(tmp_path):
    (trace,) = make_traces(1, children=2)
    child, late_child, root = trace
    (rootless,) = make_traces(1, start=5)
    async with receiver([Contains("answer")], tmp_path, trace_timeout=1.0) as (scorer, url):
        assert await asyncio.to_thread(export, url, [child, root]) == SpanExportResult.SUCCESS
        await scorer.drain()
        assert await asyncio.to_thread(export, url, [late_child]) == SpanExportResult.SUCCESS
        assert await asyncio.to_thread(export, url, rootless[:1]) == SpanExportResult.SUCCESS
        await scorer.drain()
    (run,) = list_runs(tmp_path / "runs")
    keys = sorted(c.eval_id for c in load_run(run.path).cases)
    tid = trace_id(trace)
    assert tid in keys and len(keys) == 3
    assert [k for k in keys if k.startswith(f"{tid}~")]  # the late span: a case of its own
    assert trace_id(rootless) in keys  # taken after trace_timeout, root or not


def test_a_torn_last_line_of_the_spool_is_cut_off_and_never_replayed(tmp_path):
    spool = Spool(tmp_path)
    spool.open()

    async def keep() -> None:
        await spool.append("traces", {"resourceSpans": [{"scopeSpans": [{"spans": [
            {"traceId": "ab" * 16, "spanId": "cd" * 8}]}]}]})

    asyncio.run(keep())
    spool.close()
    (segment,) = tmp_path.glob("segment-*.jsonl")
    whole = segment.read_bytes()
    segment.write_bytes(whole + b'{"seq": 1, "signal": "tra')  # killed while writing
    again = Spool(tmp_path)
    _, records = again.open()
    assert [r.seq for r in records] == [0]
    assert segment.read_bytes() == whole
    assert again.next_seq == 1
    again.close()


def get_page(base: str, path: str) -> tuple[int, str]:
    with urllib.request.urlopen(f"{base}{path}", timeout=10) as reply:
        return reply.status, reply.read().decode()


async def test_the_open_window_shows_live_in_referee_view_and_finishes_at_stop(tmp_path):
    from referee.report.viewer import start_viewer

    async with receiver([Contains("answer 1")], tmp_path) as (scorer, url):
        spans = [s for t in make_traces(3) for s in t]
        assert await asyncio.to_thread(export, url, spans) == SpanExportResult.SUCCESS
        await scorer.drain()
        (live,) = list_runs(tmp_path / "runs")
        assert live.running and not live.finished
        with start_viewer(None, tmp_path / "runs") as viewer:
            status, index = await asyncio.to_thread(get_page, viewer.base_url, "/")
            assert status == 200 and live.path.name in index and "running" in index
            status, page = await asyncio.to_thread(get_page, viewer.base_url,
                                                   f"/run/{live.path.name}")
            assert status == 200 and "answer 1" in page
    (done,) = list_runs(tmp_path / "runs")
    assert done.finished
    report = load_run(done.path)
    assert (report.total, report.passed, report.failed) == (3, 1, 2)


async def test_two_receivers_sharing_a_runs_directory_each_write_their_own_window_run(
        tmp_path):
    first, second = make_traces(4), make_traces(3, start=10)
    runs = {"runs_dir": tmp_path / "runs"}
    async with receiver([Contains("answer")], tmp_path / "a", **runs) as (one, url_one), \
            receiver([Contains("answer")], tmp_path / "b", **runs) as (two, url_two):
        for url, traces in ((url_one, first), (url_two, second)):
            spans = [s for t in traces for s in t]
            assert await asyncio.to_thread(export, url, spans) == SpanExportResult.SUCCESS
        await one.drain()
        await two.drain()
    windows = sorted(list_runs(tmp_path / "runs"), key=lambda run: run.path.name)
    assert len(windows) == 2 and windows[1].path.name == windows[0].path.name + "-2"
    assert all(run.finished for run in windows)
    stored = [{c.eval_id for c in load_run(run.path).cases} for run in windows]
    assert sorted(stored, key=len) == [{trace_id(t) for t in second},
                                       {trace_id(t) for t in first}]


def test_a_second_process_on_the_same_spool_is_refused(tmp_path):
    spool = Spool(tmp_path)
    spool.open()
    try:
        with pytest.raises(Exception, match="another referee serve process uses this spool"):
            Spool(tmp_path).open()
    finally:
        spool.close()
    again = Spool(tmp_path)
    again.open()  # free again once the first one closed
    again.close()


async def test_each_window_is_a_run_of_its_own_finished_when_the_next_begins(tmp_path):
    early, late = make_traces(2), make_traces(3, start=10)
    async with receiver([Contains("answer")], tmp_path, window_s=3.0) as (scorer, url):
        for traces in (early, late):
            await asyncio.sleep(3.0 - time.time() % 3.0 + 0.05)  # just into a new window
            spans = [s for t in traces for s in t]
            assert await asyncio.to_thread(export, url, spans) == SpanExportResult.SUCCESS
            await scorer.drain()
        windows = sorted(list_runs(tmp_path / "runs"), key=lambda run: run.path.name)
        assert [run.finished for run in windows] == [True, False]
    cases = [sorted(c.eval_id for c in load_run(run.path).cases) for run in windows]
    assert cases == [sorted(trace_id(t) for t in early), sorted(trace_id(t) for t in late)]


async def test_a_window_run_is_labelled_like_any_run_and_its_labels_export_for_calibration(
        tmp_path):
    from referee.labels import Label, LabelStore, export_rows, review_queue
    from referee.labels._queue import nothing_to_label

    traces = make_traces(3)
    async with receiver([Contains("answer 1")], tmp_path) as (scorer, url):
        spans = [s for t in traces for s in t]
        assert await asyncio.to_thread(export, url, spans) == SpanExportResult.SUCCESS
        await scorer.drain()
    (run,) = list_runs(tmp_path / "runs")
    report = load_run(run.path)
    # Its one criterion is a deterministic check: no judge verdict to label is queued (the
    # window's meta.json says so, as any run's does), yet a label given anyway still exports.
    assert review_queue(report) == [] and nothing_to_label(report) is not None
    labelled = next(c for c in report.cases if c.eval_id == trace_id(traces[0]))
    verdict = labelled.criterion_results[0]
    LabelStore(run.path).append(Label(case_id=labelled.eval_id, criterion=verdict.criterion,
                                      scoring=1, verdict="wrong", judge_passed=verdict.passed,
                                      judge_score=verdict.score, labeller="reviewer",
                                      at=time.time()))
    (row,) = export_rows(run.path)
    assert (row["input"], row["output"]) == ("question 0", "answer 0")
    assert row["label"] == "pass"  # the check failed it; the person says it was wrong to


async def test_log_records_after_their_trace_was_scored_are_recorded_not_replayed(tmp_path):
    (trace,) = make_traces(1)
    tid = trace_id(trace)
    late_logs = {"resourceLogs": [{"scopeLogs": [{"logRecords": [{
        "traceId": tid, "spanId": format(trace[0].context.span_id, "016x"),
        "eventName": "gen_ai.choice", "body": {"stringValue": "late"}}]}]}]}
    # Log records may come before their spans; alone, they wait for them up to trace_timeout.
    async with receiver([Contains("answer")], tmp_path, trace_timeout=1.0) as (scorer, url):
        assert await asyncio.to_thread(export, url, trace) == SpanExportResult.SUCCESS
        await scorer.drain()
        status, _, _ = await asyncio.to_thread(post, f"{url}/v1/logs",
                                               json.dumps(late_logs).encode(),
                                               "application/json")
        assert status == 200
        await scorer.drain()
        metrics = await asyncio.to_thread(scrape, url)
    assert metrics["referee_serve_cases_without_spans_total"] == 1
    assert metrics["referee_serve_log_records_received_total"] == 1
    # A restart finds everything in the ledger: nothing pending, nothing scored again.
    async with receiver([Contains("answer")], tmp_path) as (again, _):
        assert again.assembler.pending_items == 0
    (run,) = list_runs(tmp_path / "runs")
    assert [c.eval_id for c in load_run(run.path).cases] == [tid]


def test_a_damaged_line_inside_the_spool_loses_that_line_alone(tmp_path):
    spool = Spool(tmp_path)
    spool.open()

    async def keep(count: int) -> None:
        for i in range(count):
            await spool.append("traces", {"resourceSpans": [{"scopeSpans": [{"spans": [
                {"traceId": f"{i:032x}", "spanId": "cd" * 8}]}]}]})

    asyncio.run(keep(3))
    spool.close()
    (segment,) = tmp_path.glob("segment-*.jsonl")
    first, second, third, _ = segment.read_bytes().split(b"\n")
    segment.write_bytes(first + b"\n" + second[:20] + b"\n" + third + b"\n")
    again = Spool(tmp_path)
    _, records = again.open()
    assert [r.seq for r in records] == [0, 2]
    again.close()


async def test_a_spool_that_cannot_be_written_answers_503_and_keeps_nothing(tmp_path,
                                                                           monkeypatch):
    async with receiver([Contains("answer")], tmp_path) as (scorer, url):
        def full_disk(lines: list[bytes]) -> int:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(scorer.spool, "_write", full_disk)
        status, _, headers = await asyncio.to_thread(
            post, f"{url}/v1/traces", b'{"resourceSpans": []}', "application/json")
        metrics = await asyncio.to_thread(scrape, url)
    assert status == 503 and headers["Retry-After"] == "5"
    assert metrics["referee_serve_spool_write_failures_total"] == 1
    assert metrics["referee_serve_spans_received_total"] == 0


async def test_a_body_past_the_size_limit_is_answered_413(tmp_path):
    from aiohttp.test_utils import TestClient, TestServer

    from referee.serve import OnlineScorer, ServeSettings, build_app

    scorer = OnlineScorer([Contains("answer")], ServeSettings(spool=tmp_path / "spool",
                                                              runs_dir=tmp_path / "runs"))
    await scorer.start()
    try:
        async with TestClient(TestServer(build_app(scorer, max_request_bytes=1024))) as client:
            reply = await client.post("/v1/traces", data=b" " * 4096,
                                      headers={"Content-Type": "application/json"})
            assert reply.status == 413
    finally:
        await scorer.stop()
    assert scorer.metrics.spans_received == 0
