"""A `referee serve` receiver in the test's loop, and the OTel SDK's exporters to it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from referee.serve import OnlineScorer, ServeSettings, serve


@asynccontextmanager
async def receivers(criteria: list[Any], tmp_path: Path, *, cases: Any = None,
                    grpc: bool = True, max_request_bytes: int | None = None,
                    **settings: Any) -> AsyncIterator[tuple[OnlineScorer, str, str, asyncio.Event]]:
    """An OnlineScorer behind its HTTP receiver (and with ``grpc`` its gRPC one) on free
    loopback ports, in this loop: (scorer, the HTTP base URL, the gRPC address or "", the
    event that stops it)."""
    options: dict[str, Any] = {"spool": tmp_path / "spool", "runs_dir": tmp_path / "runs",
                               "quiet_period": 0.2, "conversation_quiet": 1.5, "tick_s": 0.02,
                               **settings}
    scorer = OnlineScorer(criteria, ServeSettings(**options), cases=cases)
    stop = asyncio.Event()
    urls: list[str] = []
    addresses: list[str] = []
    limits = {} if max_request_bytes is None else {"max_request_bytes": max_request_bytes}
    task = asyncio.create_task(serve(scorer, host="127.0.0.1", port=0, on_ready=urls.append,
                                     stop=stop, grpc_port=0 if grpc else None,
                                     on_grpc_ready=addresses.append, **limits))
    while not urls:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield scorer, urls[0], (addresses or [""])[0], stop
    finally:
        stop.set()
        await task


@asynccontextmanager
async def receiver(criteria: list[Any], tmp_path: Path, *, cases: Any = None,
                   **settings: Any) -> AsyncIterator[tuple[OnlineScorer, str]]:
    """An OnlineScorer behind its HTTP receiver on a free loopback port, in this loop."""
    async with receivers(criteria, tmp_path, cases=cases, grpc=False,
                         **settings) as (scorer, url, _, _):
        yield scorer, url


@contextmanager
def exporting(url: str, encoding: str = "protobuf", **options: Any) -> Iterator[Any]:
    """A TracerProvider whose spans go, in batches, to ``url`` through the OTel SDK's own
    OTLP/HTTP exporter (protobuf or JSON). Leaving flushes it from a thread: the receiver
    runs in this loop, which a flush from here would block."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if encoding == "protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    else:
        from opentelemetry.exporter.otlp.json.http import OTLPSpanExporter  # type: ignore
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(
        OTLPSpanExporter(endpoint=f"{url}/v1/traces", **options), schedule_delay_millis=50))
    yield provider


async def shut_down(provider: Any) -> None:
    await asyncio.to_thread(provider.shutdown)
