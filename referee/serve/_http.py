"""The OTLP/HTTP receiver (aiohttp): ``POST /v1/traces``, ``POST /v1/logs``, ``GET /metrics``;
``serve`` runs it, and the OTLP/gRPC receiver (``_grpc.py``) beside it when asked.

Answers as OTLP exporters expect: 200 with an empty export response once the request is
spooled; 503 with ``Retry-After`` while the queue is full (exporters retry; nothing is kept, so
nothing is lost); 400 for a body that is not an OTLP export (not retried); 413 past the size
limit; 415 for another content type.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiohttp import web

from referee.serve._decode import JSON, LOGS, PROTOBUF, TRACES
from referee.serve._intake import DEFAULT_MAX_REQUEST_BYTES, Outcome, take
from referee.serve._metrics import CONTENT_TYPE as METRICS_TYPE
from referee.serve._scorer import OnlineScorer

_EMPTY_RESPONSE = {PROTOBUF: b"", JSON: b"{}"}


def build_app(scorer: OnlineScorer, *,
              max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> web.Application:
    app = web.Application(client_max_size=max_request_bytes)

    def receiver(signal: str) -> Callable[[web.Request], object]:
        async def receive(request: web.Request) -> web.Response:
            kind = request.content_type
            if kind not in (PROTOBUF, JSON):
                scorer.metrics.requests[(signal, 415)] += 1
                return web.Response(status=415, text=f"expected {PROTOBUF} or {JSON}")
            intake = await take(scorer, signal, kind, request.read)
            if intake.outcome is Outcome.INVALID:
                scorer.metrics.requests[(signal, 400)] += 1
                return web.Response(status=400, text=intake.detail)
            if intake.outcome is Outcome.BUSY:
                scorer.metrics.requests[(signal, 503)] += 1
                return web.Response(status=503,
                                    headers={"Retry-After": str(intake.retry_after)},
                                    text="queue full; retry later")
            scorer.metrics.requests[(signal, 200)] += 1
            return web.Response(status=200, body=_EMPTY_RESPONSE[kind], content_type=kind)

        return receive

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text=scorer.metrics_text(),
                            headers={"Content-Type": METRICS_TYPE})

    app.router.add_post("/v1/traces", receiver(TRACES))  # type: ignore[arg-type]
    app.router.add_post("/v1/logs", receiver(LOGS))  # type: ignore[arg-type]
    app.router.add_get("/metrics", metrics)
    return app


async def serve(scorer: OnlineScorer, *, host: str, port: int,
                on_ready: Callable[[str], None] = lambda url: None,
                stop: asyncio.Event | None = None,
                max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
                grpc_port: int | None = None,
                on_grpc_ready: Callable[[str], None] = lambda address: None) -> None:
    """Start the scorer, listen (OTLP/HTTP, and OTLP/gRPC on ``grpc_port`` when given), and
    run until ``stop`` is set (or the task is cancelled). Stopping refuses new requests, lets
    those being spooled finish, then stops the scorer, which syncs the store and the ledger."""
    await scorer.start()
    runner = web.AppRunner(build_app(scorer, max_request_bytes=max_request_bytes),
                           access_log=None, handle_signals=False)
    grpc_server: Any = None
    try:
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        if grpc_port is not None:
            from referee.serve._grpc import start_grpc

            grpc_server, address = await start_grpc(scorer, host=host, port=grpc_port,
                                                    max_request_bytes=max_request_bytes)
            on_grpc_ready(address)
        bound = runner.addresses[0]
        host_text = f"[{bound[0]}]" if ":" in str(bound[0]) else str(bound[0])
        on_ready(f"http://{host_text}:{bound[1]}")
        await (stop or asyncio.Event()).wait()
    finally:
        if grpc_server is not None:
            from referee.serve._grpc import STOP_GRACE_S

            await grpc_server.stop(STOP_GRACE_S)
        await runner.cleanup()
        await scorer.stop()
