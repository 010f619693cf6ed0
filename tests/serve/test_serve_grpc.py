"""The OTLP/gRPC receiver: the OTel SDK's own gRPC exporters feed `referee serve` exactly as
its OTLP/HTTP exporters do, with the gRPC answers the OTLP specification asks for."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("grpc")
pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

import grpc  # noqa: E402
from google.rpc import error_details_pb2, status_pb2  # noqa: E402
from grpc import Compression  # noqa: E402
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter  # noqa: E402
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # noqa: E402
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: E402
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.proto.collector.trace.v1 import (  # noqa: E402
    trace_service_pb2,
    trace_service_pb2_grpc,
)
from opentelemetry.sdk.trace.export import SpanExportResult  # noqa: E402
from otlp_receiver import receivers  # noqa: E402
from test_serve_policies import SlowCheck  # noqa: E402
from test_serve_restart import stored_case_ids  # noqa: E402
from traffic import SUITE, free_port, make_traces, scrape, start_server, trace_id  # noqa: E402

from referee.evaluators.deterministic import Contains  # noqa: E402
from referee.store import list_runs, load_run  # noqa: E402

TRACE_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
CRITERIA = [Contains("answer 1"), Contains("answer")]  # one trace of several passes the first


def grpc_export(address: str, spans: list[Any], **options: Any) -> SpanExportResult:
    exporter = GrpcSpanExporter(endpoint=f"http://{address}", insecure=True, **options)
    try:
        return exporter.export(spans)
    finally:
        exporter.shutdown()


def http_export(url: str, spans: list[Any]) -> SpanExportResult:
    exporter = HttpSpanExporter(endpoint=f"{url}/v1/traces")
    try:
        return exporter.export(spans)
    finally:
        exporter.shutdown()


def raw_export(address: str, body: bytes) -> tuple[grpc.StatusCode, str, dict[str, Any]]:
    """One TraceService/Export call with ``body`` as the request bytes, unchecked: (status,
    details, trailing metadata)."""
    with grpc.insecure_channel(address) as channel:
        call = channel.unary_unary(TRACE_EXPORT)  # no serializer: the bytes go as they are
        try:
            call(body, timeout=10)
        except grpc.RpcError as error:
            return error.code(), error.details(), dict(error.trailing_metadata() or ())
    return grpc.StatusCode.OK, "", {}


def stub_export(address: str, request: Any) -> Any:
    with grpc.insecure_channel(address) as channel:
        return trace_service_pb2_grpc.TraceServiceStub(channel).Export(request, timeout=10)


def comparable(case: Any) -> dict[str, Any]:
    """A stored case without what differs between two receptions (timings, receipt time)."""
    data = case.model_dump(mode="json", exclude={"duration_seconds", "scoring_seconds",
                                                 "index", "metadata"})
    data["execution"].pop("latency_s")  # how long handing over the recorded run took
    serve_meta = dict(case.metadata.get("serve") or {})
    serve_meta.pop("received_at", None)
    return {**data, "serve": serve_meta}


def stored_cases(runs_dir: Path) -> dict[str, dict[str, Any]]:
    (run,) = list_runs(runs_dir)
    return {case.eval_id: comparable(case) for case in load_run(run.path).cases}


async def test_a_trace_exported_over_grpc_is_scored_exactly_as_over_http(tmp_path):
    traces = make_traces(3, children=2)
    spans = [span for trace in traces for span in trace]
    async with receivers(CRITERIA, tmp_path / "grpc") as (scorer, url, address, _):
        assert await asyncio.to_thread(grpc_export, address, spans,
                                       compression=Compression.Gzip) == SpanExportResult.SUCCESS
        await scorer.drain()
        metrics = await asyncio.to_thread(scrape, url)
    async with receivers(CRITERIA, tmp_path / "http", grpc=False) as (scorer, url, _, _):
        assert await asyncio.to_thread(http_export, url, spans) == SpanExportResult.SUCCESS
        await scorer.drain()
    over_grpc = stored_cases(tmp_path / "grpc" / "runs")
    over_http = stored_cases(tmp_path / "http" / "runs")
    assert sorted(over_grpc) == sorted(trace_id(t) for t in traces)
    assert over_grpc == over_http
    statuses = sorted(case["status"] for case in over_grpc.values())
    assert statuses == ["FAILED", "FAILED", "PASSED"]  # "answer 1" is in one answer of three
    assert metrics['referee_serve_requests_total{signal="traces",code="OK"}'] == 1
    assert metrics["referee_serve_spans_received_total"] == len(spans)


async def test_log_records_exported_over_grpc_are_spooled_and_joined_to_their_trace(tmp_path):
    from opentelemetry._logs import LogRecord
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor

    (trace,) = make_traces(1)
    root = trace[-1]
    async with receivers(CRITERIA, tmp_path) as (scorer, url, address, _):
        def export_logs() -> None:
            provider = LoggerProvider()
            provider.add_log_record_processor(SimpleLogRecordProcessor(
                OTLPLogExporter(endpoint=f"http://{address}", insecure=True)))
            provider.get_logger("shop-app").emit(LogRecord(
                trace_id=root.context.trace_id, span_id=root.context.span_id,
                body="answer noted", event_name="gen_ai.choice"))
            provider.shutdown()

        await asyncio.to_thread(export_logs)
        assert await asyncio.to_thread(grpc_export, address, trace) == SpanExportResult.SUCCESS
        await scorer.drain()
        metrics = await asyncio.to_thread(scrape, url)
    assert metrics['referee_serve_requests_total{signal="logs",code="OK"}'] == 1
    assert metrics["referee_serve_log_records_received_total"] == 1
    assert list(stored_cases(tmp_path / "runs")) == [trace_id(trace)]
    assert metrics["referee_serve_cases_without_spans_total"] == 0  # joined, not apart


async def test_a_full_queue_answers_unavailable_with_retry_info_and_keeps_nothing(
        tmp_path, monkeypatch):
    (trace,) = make_traces(1)
    request = trace_service_pb2.ExportTraceServiceRequest()
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    request.CopyFrom(encode_spans(trace))
    async with receivers(CRITERIA, tmp_path) as (scorer, url, address, _):
        monkeypatch.setattr(scorer, "busy", lambda: 7)
        code, details, trailers = await asyncio.to_thread(
            raw_export, address, request.SerializeToString())
        monkeypatch.undo()
        metrics = await asyncio.to_thread(scrape, url)
    assert code == grpc.StatusCode.UNAVAILABLE and "retry later" in details
    status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
    (detail,) = status.details
    retry = error_details_pb2.RetryInfo()
    assert detail.Unpack(retry) and retry.retry_delay.seconds == 7
    assert status.code == grpc.StatusCode.UNAVAILABLE.value[0]
    python_sdk_trailer = error_details_pb2.RetryInfo.FromString(
        trailers["google.rpc.retryinfo-bin"])
    assert python_sdk_trailer.retry_delay.seconds == 7
    assert metrics['referee_serve_requests_total{signal="traces",code="UNAVAILABLE"}'] == 1
    assert metrics["referee_serve_rejected_total"] == 1
    assert metrics["referee_serve_spans_received_total"] == 0


async def test_a_spool_that_cannot_be_written_answers_unavailable_with_retry_info(
        tmp_path, monkeypatch):
    async with receivers(CRITERIA, tmp_path) as (scorer, url, address, _):
        def full_disk(lines: list[bytes]) -> int:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(scorer.spool, "_write", full_disk)
        code, _, trailers = await asyncio.to_thread(raw_export, address, b"")
        metrics = await asyncio.to_thread(scrape, url)
    assert code == grpc.StatusCode.UNAVAILABLE
    retry = error_details_pb2.RetryInfo.FromString(trailers["google.rpc.retryinfo-bin"])
    assert retry.retry_delay.seconds == 5
    assert metrics["referee_serve_spool_write_failures_total"] == 1


async def test_an_exporter_faster_than_scoring_is_told_to_retry_and_loses_nothing(tmp_path):
    traces = make_traces(8, children=2)  # 3 spans each
    # One case at a time, 50 ms each; six spans held at most: the third trace offered at once
    # meets the bound, and the exporter must wait for the RetryInfo's delay.
    async with receivers([SlowCheck(0.05)], tmp_path, concurrency=1, max_pending_spans=6,
                         max_queue=1) as (scorer, url, address, _):
        def export_each() -> list[SpanExportResult]:
            exporter = GrpcSpanExporter(endpoint=f"http://{address}", insecure=True,
                                        timeout=60)
            try:
                return [exporter.export(trace) for trace in traces]
            finally:
                exporter.shutdown()

        results = await asyncio.to_thread(export_each)
        await scorer.drain()
        metrics = await asyncio.to_thread(scrape, url)
    assert results == [SpanExportResult.SUCCESS] * len(traces)  # every one, after retries
    assert metrics['referee_serve_requests_total{signal="traces",code="UNAVAILABLE"}'] > 0
    assert metrics['referee_serve_requests_total{signal="traces",code="OK"}'] == len(traces)
    assert metrics["referee_serve_pending_spans_peak"] <= 6 + 3
    report = load_run(list_runs(tmp_path / "runs")[0].path)
    assert sorted(c.eval_id for c in report.cases) == sorted(trace_id(t) for t in traces)


async def test_a_malformed_message_is_invalid_argument_and_the_receiver_goes_on(tmp_path):
    (trace,) = make_traces(1)
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    async with receivers(CRITERIA, tmp_path) as (scorer, url, address, _):
        code, details, _ = await asyncio.to_thread(raw_export, address, b"\xff\xff\xff")
        reply = await asyncio.to_thread(stub_export, address, encode_spans(trace))
        await scorer.drain()
        metrics = await asyncio.to_thread(scrape, url)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "not an OTLP protobuf export" in details
    assert isinstance(reply, trace_service_pb2.ExportTraceServiceResponse)
    assert not reply.HasField("partial_success")
    assert metrics['referee_serve_requests_total{signal="traces",code="INVALID_ARGUMENT"}'] == 1
    assert metrics['referee_serve_requests_total{signal="traces",code="OK"}'] == 1
    assert list(stored_cases(tmp_path / "runs")) == [trace_id(trace)]


async def test_a_message_past_the_size_limit_is_refused_without_retry_info(tmp_path):
    async with receivers(CRITERIA, tmp_path, max_request_bytes=1024) as (scorer, _, address, _):
        code, _, trailers = await asyncio.to_thread(raw_export, address, b"\x0a" + b"\x00" * 4096)
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "google.rpc.retryinfo-bin" not in trailers  # not retryable, as the spec reads it
    assert scorer.metrics.spans_received == 0


async def test_stopping_lets_a_request_being_spooled_finish_and_a_restart_scores_it(tmp_path):
    (trace,) = make_traces(1)
    async with receivers(CRITERIA, tmp_path, quiet_period=60.0) as (scorer, _, address, stop):
        append = scorer.spool.append
        arrived = asyncio.Event()

        async def slow_append(signal_name: str, document: Any) -> Any:
            arrived.set()
            await asyncio.sleep(0.5)  # still writing when serve is told to stop
            return await append(signal_name, document)

        scorer.spool.append = slow_append  # type: ignore[method-assign]
        exporting = asyncio.create_task(asyncio.to_thread(grpc_export, address, trace))
        await arrived.wait()
        stop.set()
        assert await exporting == SpanExportResult.SUCCESS
    assert not list_runs(tmp_path / "runs") or not load_run(
        list_runs(tmp_path / "runs")[0].path).cases  # not scored before the stop
    async with receivers(CRITERIA, tmp_path) as (again, _, _, _):
        await again.drain()
    assert list(stored_cases(tmp_path / "runs")) == [trace_id(trace)]


def test_serve_with_grpc_port_stops_on_sigterm_and_keeps_the_spool(tmp_path):
    suite = tmp_path / "suite.py"
    suite.write_text(SUITE, encoding="utf-8")
    http_port, grpc_port = free_port(), free_port()
    traces = make_traces(5, children=2)
    # A long quiet period: nothing is scored before the stop, all of it is in the spool.
    ready: list[str] = []
    server = start_server(suite, http_port, tmp_path, "--grpc-port", str(grpc_port),
                          "--quiet-period", "60", ready=ready)
    try:
        assert f"; OTLP/gRPC 127.0.0.1:{grpc_port};" in ready[0]
        spans = [span for trace in traces for span in trace]
        assert grpc_export(f"127.0.0.1:{grpc_port}", spans) == SpanExportResult.SUCCESS
        server.send_signal(signal.SIGTERM)
        _, stderr = server.communicate(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
    assert server.returncode == 0, stderr
    assert not stored_case_ids(tmp_path / "runs")
    restarted = start_server(suite, http_port, tmp_path)
    try:
        deadline = time.monotonic() + 30
        while len(stored_case_ids(tmp_path / "runs")) < len(traces) \
                and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        restarted.send_signal(signal.SIGTERM)
        restarted.communicate(timeout=30)
    assert stored_case_ids(tmp_path / "runs") == {trace_id(t): 1 for t in traces}


def test_grpc_port_without_grpcio_is_one_line_naming_the_extra(tmp_path, monkeypatch, capsys):
    from referee.cli import main

    suite = tmp_path / "suite.py"
    suite.write_text(SUITE, encoding="utf-8")
    monkeypatch.setitem(sys.modules, "grpc", None)  # import grpc now fails
    code = main(["serve", str(suite), "--grpc-port", "0", "--spool", str(tmp_path / "spool"),
                 "--out", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert code == 2
    assert "--grpc-port" in err and "referee[serve]" in err
    assert not (tmp_path / "spool").exists()


async def test_a_grpc_port_already_taken_is_an_error_naming_it_and_nothing_keeps_running(
        tmp_path):
    import socket

    from referee.serve import OnlineScorer, ServeSettings, serve

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        scorer = OnlineScorer(CRITERIA, ServeSettings(spool=tmp_path / "spool",
                                                      runs_dir=tmp_path / "runs"))
        with pytest.raises(OSError, match=f"cannot listen for OTLP/gRPC on 127.0.0.1:{port}"):
            await serve(scorer, host="127.0.0.1", port=0, grpc_port=port)
    assert scorer._tasks == []  # the scorer was stopped with the HTTP receiver
    from referee.serve._spool import Spool

    again = Spool(tmp_path / "spool")
    again.open()  # the spool's lock was released
    again.close()
