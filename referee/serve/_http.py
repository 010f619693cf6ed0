"""The OTLP/HTTP receiver (aiohttp): ``POST /v1/traces``, ``POST /v1/logs``, ``GET /metrics``.

Answers as OTLP exporters expect: 200 with an empty export response once the request is
spooled; 503 with ``Retry-After`` while the queue is full (exporters retry; nothing is kept, so
nothing is lost); 400 for a body that is not an OTLP export (not retried); 413 past the size
limit; 415 for another content type.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable

from aiohttp import web

from referee.errors import InputError
from referee.serve._decode import JSON, LOGS, PROTOBUF, TRACES, decode
from referee.serve._metrics import CONTENT_TYPE as METRICS_TYPE
from referee.serve._scorer import Busy, OnlineScorer
from referee.terminal import terminal_safe

DEFAULT_MAX_REQUEST_BYTES = 32 * 1024 * 1024
SPOOL_RETRY_AFTER_S = 5
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
            retry_after = scorer.busy()
            if retry_after is None:
                body = await request.read()
                try:
                    document = decode(signal, body, kind)
                except InputError as exc:
                    scorer.metrics.requests[(signal, 400)] += 1
                    return web.Response(status=400, text=str(exc))
                try:
                    await scorer.accept(signal, document)
                except Busy as busy:
                    retry_after = busy.retry_after
                except OSError as exc:  # the spool cannot be written (a full disk): not kept
                    scorer.metrics.spool_write_failures += 1
                    print(terminal_safe(f"referee serve: the spool cannot be written ({exc}); "
                                        f"answering 503"), file=sys.stderr, flush=True)
                    retry_after = SPOOL_RETRY_AFTER_S
            else:
                scorer.metrics.rejected += 1
            if retry_after is not None:
                scorer.metrics.requests[(signal, 503)] += 1
                return web.Response(status=503, headers={"Retry-After": str(retry_after)},
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
                max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> None:
    """Start the scorer, listen, and run until ``stop`` is set (or the task is cancelled)."""
    await scorer.start()
    runner = web.AppRunner(build_app(scorer, max_request_bytes=max_request_bytes),
                           access_log=None, handle_signals=False)
    try:
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = runner.addresses[0]
        host_text = f"[{bound[0]}]" if ":" in str(bound[0]) else str(bound[0])
        on_ready(f"http://{host_text}:{bound[1]}")
        await (stop or asyncio.Event()).wait()
    finally:
        await runner.cleanup()
        await scorer.stop()
