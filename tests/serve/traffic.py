"""Synthetic agent traffic made with the real OTel SDK, and ways to send it to a receiver."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

import referee
from referee.serve._metrics import read_metrics

SUITE = '''\
from referee import EvalSuite
from referee.evaluators.deterministic import Contains

suite = EvalSuite("shop").add_evaluator(Contains("answer"))
'''


def _text(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def make_traces(count: int, *, service: str = "shop", route: str = "/chat",
                agent: str = "helper", start: int = 0, error: Sequence[int] = (),
                marked: Sequence[int] = (), tags: str | None = None,
                children: int = 1) -> list[list[ReadableSpan]]:
    """``count`` agent traces (an agent span around ``children`` model calls), each a list of
    its spans in the order they ended; trace ``start + i`` answers "answer i"."""
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("shop-app")
    for i in range(start, start + count):
        attributes: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent",
                                      "gen_ai.agent.name": agent, "http.route": route}
        if i in marked:
            attributes["referee.score"] = True
        if tags:
            attributes["referee.tags"] = tags
        with tracer.start_as_current_span(f"invoke_agent {agent}", attributes=attributes) as root:
            for _ in range(children):
                with tracer.start_as_current_span("chat", attributes={
                        "gen_ai.operation.name": "chat",
                        "gen_ai.input.messages": _text("user", f"question {i}"),
                        "gen_ai.output.messages": _text("assistant", f"answer {i}")}):
                    pass
            if i in error:
                root.set_status(Status(StatusCode.ERROR, "boom"))
    by_trace: dict[int, list[ReadableSpan]] = {}
    for span in memory.get_finished_spans():
        by_trace.setdefault(span.context.trace_id, []).append(span)
    provider.shutdown()
    return list(by_trace.values())


def trace_id(spans: Sequence[ReadableSpan]) -> str:
    return format(spans[0].context.trace_id, "032x")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_env() -> dict[str, str]:
    """The environment that runs this checkout's referee, whichever one an editable install
    points at."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(referee.__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}


def start_server(suite: Path, port: int, tmp_path: Path, *extra: str,
                 ready: list[str] | None = None) -> subprocess.Popen[str]:
    """`referee serve` in its own process; returns once it listens (its ready line appended to
    ``ready``)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "referee", "serve", str(suite), "--port", str(port),
         "--spool", str(tmp_path / "spool"), "--out", str(tmp_path / "runs"),
         "--quiet-period", "0.2", "--conversation-quiet", "0.2", *extra],
        stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=server_env())
    assert process.stderr is not None
    line = process.stderr.readline()
    if not re.search(r"listening on http://127\.0\.0\.1:\d+", line):
        process.kill()
        raise AssertionError(f"referee serve did not start: {line}{process.stderr.read()}")
    if ready is not None:
        ready.append(line)
    return process


def scrape(url: str) -> dict[str, float]:
    """/metrics as {name{labels}: value}."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    return read_metrics(text)


def wait_until(condition: Any, timeout: float = 30.0, every: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(every)
