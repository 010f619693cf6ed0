"""Nothing accepted is lost or scored twice: kill -9 mid-stream, restart, count."""

from __future__ import annotations

import json
import signal
import threading
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.sdk.trace.export import SpanExportResult  # noqa: E402
from traffic import (  # noqa: E402
    SUITE,
    free_port,
    make_traces,
    scrape,
    start_server,
    trace_id,
    wait_until,
)

from referee.store import load_run  # noqa: E402


def stored_case_ids(runs_dir: Path) -> Counter[str]:
    """Every case line of every run under ``runs_dir`` (a duplicate line counts twice)."""
    found: Counter[str] = Counter()
    for cases in runs_dir.glob("*/cases.jsonl"):
        for line in cases.read_text(encoding="utf-8").splitlines():
            if line.strip():
                found[json.loads(line)["eval_id"]] += 1
    return found


def test_kill_9_mid_stream_then_restart_scores_every_accepted_trace_exactly_once(tmp_path):
    suite = tmp_path / "suite.py"
    suite.write_text(SUITE, encoding="utf-8")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    traces = make_traces(60, children=2)
    spans = [span for trace in traces for span in trace]
    # Batches cut across traces, so the kill can fall between two parts of one trace.
    batches = [spans[i:i + 7] for i in range(0, len(spans), 7)]
    exporter = OTLPSpanExporter(endpoint=f"{url}/v1/traces", timeout=30)
    servers = [start_server(suite, port, tmp_path)]
    accepted: set[int] = set()  # span ids the exporter was told were accepted
    restarted = threading.Event()

    def restart() -> None:
        servers.append(start_server(suite, port, tmp_path))
        restarted.set()

    try:
        for number, batch in enumerate(batches):
            if number == len(batches) // 2:
                servers[0].send_signal(signal.SIGKILL)
                servers[0].wait()
                threading.Timer(0.5, restart).start()  # meanwhile the exporter retries
            if exporter.export(batch) == SpanExportResult.SUCCESS:
                accepted.update(span.context.span_id for span in batch)
        assert restarted.wait(30)
        # Scored, then the replayed segment deleted once its ledger lines are synced: a moment
        # after the last case is stored, so waited for rather than read at once.
        wait_until(lambda: (m := scrape(url))["referee_serve_pending_spans"] == 0
                   and m["referee_serve_open_traces"] == 0
                   and m["referee_serve_spool_segments"] == 1)
        metrics = scrape(url)
    finally:
        exporter.shutdown()
        for server in servers:
            if server.poll() is None:
                server.send_signal(signal.SIGTERM)
                server.wait(30)

    assert servers[0].returncode == -signal.SIGKILL and servers[-1].returncode == 0
    stored = stored_case_ids(tmp_path / "runs")
    whole = {trace_id(t) for t in traces if all(s.context.span_id in accepted for s in t)}
    assert len(whole) == len(traces)  # every batch got through, some after a retry
    assert {tid: stored[tid] for tid in whole} == {tid: 1 for tid in whole}
    assert set(stored) == whole and max(stored.values()) == 1
    assert metrics["referee_serve_dropped_total"] == 0
    # The killed process's segment was replayed, scored and deleted; the live one remains.
    assert metrics["referee_serve_spool_segments"] == 1
    assert len(list((tmp_path / "spool").glob("segment-*.jsonl"))) == 1
    # The restarted process went on writing the window's run, and finished it.
    (run_dir,) = (tmp_path / "runs").iterdir()
    report = load_run(run_dir)
    assert report.finished_at is not None
    assert (report.total, report.passed) == (len(traces), len(traces))


AGENT_SUITE = '''\
from referee import AgentEvaluator, EvalCase
from referee.config import CriteriaConfig, CriterionConfig, EvalConfig

evaluator = AgentEvaluator(lambda text: text, config=EvalConfig(criteria=CriteriaConfig(
    rouge_match=CriterionConfig(threshold=0.8))))
eval_set = [EvalCase(eval_id={trace!r}, name="known question", input="question 0",
                     expected_output="answer 0")]
'''


def test_an_agent_evaluator_suite_pairs_traces_with_its_eval_set_by_id(tmp_path):
    known, other = make_traces(2)
    suite = tmp_path / "agent_suite.py"
    suite.write_text(AGENT_SUITE.format(trace=trace_id(known)), encoding="utf-8")
    port = free_port()
    server = start_server(suite, port, tmp_path)
    exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces")
    try:
        assert exporter.export(known + other) == SpanExportResult.SUCCESS
        wait_until(lambda: sum(v for k, v in scrape(f"http://127.0.0.1:{port}").items()
                               if k.startswith("referee_serve_cases_scored_total")) == 2)
    finally:
        exporter.shutdown()
        server.send_signal(signal.SIGTERM)
        server.wait(30)
    (run_dir,) = (tmp_path / "runs").iterdir()
    cases = {c.eval_id: c for c in load_run(run_dir).cases}
    assert cases[trace_id(known)].name == "known question"  # the eval set's case
    assert cases[trace_id(known)].criterion_results[0].passed
    assert cases[trace_id(other)].case.expected_output is None  # its own case
