"""`referee serve` throughput: spans per second received, cases per second scored.

    python -m benchmarks.serve --traces 5000 --spans-per-trace 3 --traces-per-request 50
    python -m benchmarks.serve --traces 5000 --transport both --rounds 3   # OTLP/gRPC vs HTTP

The receiver runs as its own process (``referee serve``, the multivon-style ``EvalSuite`` with
``Contains``: a deterministic criterion, no judge), on loopback. The traffic is made with the
OTel SDK (agent span around model-call spans, GenAI message attributes) and encoded once with
the SDK's own OTLP protobuf encoder, then posted by ``--connections`` concurrent clients as fast
as the receiver answers; a 503 is retried after its Retry-After, as exporters do.

Reported: received spans/s (all spans / time to the last 200: each 200 means spooled and
fsynced), scored cases/s (all cases / time from the first request to the last case scored, read
from /metrics), the 503s, and the peak of spans held in memory (from /metrics). Receiving and
scoring share the receiver's one event loop; ``--receive-only`` (``--sample-rate 0``: every
trace spooled, assembled and sampled out, none scored) measures the intake alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

TRACE_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
SUITE = '''\
from referee import EvalSuite
from referee.evaluators.deterministic import Contains

suite = EvalSuite("bench").add_evaluator(Contains("answer"))
'''


def _requests(traces: int, spans_per_trace: int, per_request: int) -> list[bytes]:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = TracerProvider(resource=Resource.create({"service.name": "bench"}))
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("bench")
    for i in range(traces):
        with tracer.start_as_current_span("invoke_agent bench", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "bench"}):
            for _ in range(spans_per_trace - 1):
                with tracer.start_as_current_span("chat", attributes={
                        "gen_ai.operation.name": "chat",
                        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [
                            {"type": "text", "content": f"question {i}"}]}]),
                        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
                            {"type": "text", "content": f"answer {i}"}]}])}):
                    pass
    spans = list(memory.get_finished_spans())
    size = per_request * spans_per_trace
    return [encode_spans(spans[i:i + size]).SerializeToString()
            for i in range(0, len(spans), size)]


Sender = Callable[[bytes], Awaitable["float | None"]]  # None: accepted, else wait this long


def _http_sender(session: Any, url: str) -> Sender:
    async def send(body: bytes) -> float | None:
        async with session.post(f"{url}/v1/traces", data=body, headers={
                "Content-Type": "application/x-protobuf"}) as reply:
            await reply.read()
            if reply.status == 200:
                return None
            return float(reply.headers.get("Retry-After", "1"))

    return send


def _grpc_sender(channel: Any) -> Sender:
    import grpc
    from google.rpc.error_details_pb2 import RetryInfo

    export = channel.unary_unary(TRACE_EXPORT)  # the encoded bodies go as they are

    async def send(body: bytes) -> float | None:
        try:
            await export(body)
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            trailers = dict(error.trailing_metadata() or ())
            delay = RetryInfo.FromString(trailers.get("google.rpc.retryinfo-bin", b""))
            return delay.retry_delay.seconds + delay.retry_delay.nanos / 1e9 or 1.0
        return None

    return send


async def _drive(url: str, grpc_address: str | None, bodies: list[bytes], connections: int,
                 expected_cases: int) -> dict[str, Any]:
    import aiohttp

    from referee.serve._metrics import read_metrics

    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)
    rejected = 0
    channel: Any = None
    async with aiohttp.ClientSession() as session:
        if grpc_address is None:
            send = _http_sender(session, url)
        else:
            import grpc

            channel = grpc.aio.insecure_channel(grpc_address)
            send = _grpc_sender(channel)

        async def client() -> None:
            nonlocal rejected
            while not queue.empty():
                body = queue.get_nowait()
                while (wait := await send(body)) is not None:
                    rejected += 1
                    await asyncio.sleep(wait)

        started = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(connections)))
        received = time.perf_counter() - started
        if channel is not None:
            await channel.close()
        peak = 0.0
        while True:
            async with session.get(f"{url}/metrics") as reply:
                metrics = read_metrics(await reply.text())
            peak = max(peak, metrics["referee_serve_pending_spans"])
            scored = sum(v for k, v in metrics.items()
                         if k.startswith(("referee_serve_cases_scored_total",
                                          "referee_serve_cases_sampled_out_total")))
            if scored >= expected_cases:
                break
            await asyncio.sleep(0.05)
        scored_s = time.perf_counter() - started
    return {"received_s": received, "scored_s": scored_s, "rejected": rejected,
            "pending_spans_peak": metrics["referee_serve_pending_spans_peak"],
            "cases_scored": scored, "answers": {  # by HTTP status or gRPC status name
                re.sub(r'.*code="([^"]+)".*', r"\1", k): v for k, v in metrics.items()
                if k.startswith('referee_serve_requests_total{signal="traces"')}}


def run(traces: int, spans_per_trace: int, per_request: int, connections: int,
        concurrency: int, receive_only: bool = False, transport: str = "http",
        bodies: list[bytes] | None = None, max_queue: int | None = None) -> dict[str, Any]:
    """One receiver process, fed over ``transport`` ("http" or "grpc")."""
    bodies = bodies or _requests(traces, spans_per_trace, per_request)
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        (work / "suite.py").write_text(SUITE, encoding="utf-8")
        root = str(Path(__file__).resolve().parents[1])
        process = subprocess.Popen(
            [sys.executable, "-m", "referee", "serve", "suite.py", "--port", "0",
             "--spool", "spool", "--out", "runs", "--quiet-period", "0.2",
             "--conversation-quiet", "0.2", "--concurrency", str(concurrency),
             *(["--sample-rate", "0"] if receive_only else []),
             *(["--max-queue", str(max_queue)] if max_queue else []),
             *(["--grpc-port", "0"] if transport == "grpc" else [])],
            cwd=work, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")})
        assert process.stderr is not None
        line = process.stderr.readline()
        found = re.search(r"listening on (http://\S+) ", line)
        grpc_found = re.search(r"; OTLP/gRPC (\S+);", line)
        if found is None or (transport == "grpc" and grpc_found is None):
            process.kill()
            raise SystemExit(f"referee serve did not start: {line}{process.stderr.read()}")
        try:
            numbers = asyncio.run(_drive(found.group(1), grpc_found.group(1) if grpc_found
                                         and transport == "grpc" else None, bodies,
                                         connections, traces))
        finally:
            process.terminate()
            process.wait(60)
    spans = traces * spans_per_trace
    return {"transport": transport, "traces": traces, "spans": spans,
            "requests": len(bodies), "connections": connections, "scoring_concurrency": concurrency,
            "receive_only": receive_only, "max_queue": max_queue or "default",
            "spans_per_s_received": round(spans / numbers["received_s"]),
            "cases_per_s_scored": round(traces / numbers["scored_s"], 1), **{
                k: round(v, 2) if isinstance(v, float) else v for k, v in numbers.items()}}


def side_by_side(traces: int, spans_per_trace: int, per_request: int, connections: int,
                 concurrency: int, receive_only: bool = False,
                 rounds: int = 1, max_queue: int | None = None) -> dict[str, Any]:
    """HTTP and gRPC receivers fed the same bodies, alternating which goes first each round;
    the ratios are gRPC / HTTP per round and their median."""
    bodies = _requests(traces, spans_per_trace, per_request)
    results: list[dict[str, Any]] = []
    for number in range(rounds):
        order = ("http", "grpc") if number % 2 == 0 else ("grpc", "http")
        pair = {transport: run(traces, spans_per_trace, per_request, connections, concurrency,
                               receive_only, transport, bodies, max_queue)
                for transport in order}
        results.append({"round": number + 1, "first": order[0], **pair, "ratio": {
            key: round(pair["grpc"][key] / pair["http"][key], 2)
            for key in ("spans_per_s_received", "cases_per_s_scored")}})
    return {"rounds": results, "median_ratio": {
        key: statistics.median(r["ratio"][key] for r in results)
        for key in ("spans_per_s_received", "cases_per_s_scored")}}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=5000)
    parser.add_argument("--spans-per-trace", type=int, default=3)
    parser.add_argument("--traces-per-request", type=int, default=50)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--receive-only", action="store_true",
                        help="--sample-rate 0: every trace spooled and assembled, none scored")
    parser.add_argument("--transport", choices=("http", "grpc", "both"), default="http",
                        help="OTLP/HTTP, OTLP/gRPC, or both side by side (default http)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="with --transport both: pairs of runs, alternating the order")
    parser.add_argument("--max-queue", type=int,
                        help="the receiver's --max-queue (default: serve's own)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    shape = (args.traces, args.spans_per_trace, args.traces_per_request, args.connections,
             args.concurrency, args.receive_only)
    result = (side_by_side(*shape, rounds=args.rounds, max_queue=args.max_queue)
              if args.transport == "both"
              else run(*shape, transport=args.transport, max_queue=args.max_queue))
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
