"""ScriptedJudgeServer: a loopback HTTP server that answers like OpenAI, Anthropic and Gemini.

It lets suites run offline against the official SDKs: scripted replies, injected faults, and a
record of every request with concurrency counters.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
import uuid
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from pydantic import SecretStr

from referee.judge.config import DEFAULT_MODELS, JudgeConfig, declare_provider_endpoint
from referee.judge.prompt_caching import caching_rules
from referee.testing.prompt_cache import CacheUse, PromptCache
from referee.testing.script import (
    Fault,
    Outcome,
    RateLimitState,
    RecordedRequest,
    Reply,
    Responder,
    ScriptedJudge,
    schema_problem,
)
from referee.testing.wire import (
    ParsedRequest,
    WireFormat,
    answer_of,
    error_body,
    for_provider,
    for_route,
    parse_request,
    success_body,
)

DUMMY_API_KEY = "referee-scripted-judge-key"

# A reader and answerer of single requests outside this server (a batch service answering each
# item as this server would) finds these here under their former names.
_parse_request, _success_body, _error_body = parse_request, success_body, error_body


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so connection reuse is observable
    # Headers and body go out in two writes; with Nagle on, each keep-alive reply then waits
    # for the client's delayed ACK (~40 ms), which swamps any latency a test scripts.
    disable_nagle_algorithm = True
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        self.connection_id = self.server.owner._connection_opened()
        with self.server.sockets_lock:
            self.server.open_sockets.add(self.connection)

    def finish(self) -> None:
        with self.server.sockets_lock:
            self.server.open_sockets.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # the record of requests is the log; stderr noise helps nobody

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self._send_json(404, {"error": {"message": "the scripted judge only answers POST"}})

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        owner = self.server.owner
        # Requests via base_url() carry the instance prefix; record them as the SDK's own path.
        path = self.path
        if path.startswith(owner._prefix):
            path = path[len(owner._prefix):] or "/"
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError("body is not a JSON object")
            route = urlsplit(path).path
            wire = for_route(route)  # every answer to this request is in this API's format
            parsed = wire.parse(route, body)
        except LookupError:
            self._send_json(404, {"error": {"message": f"no scripted route for {path}"}})
            return
        except ValueError as exc:
            self._send_json(400, {"error": {"message": f"bad request body: {exc}"}})
            return
        problem = schema_problem(body)
        if problem is not None:
            self._send_json(400, {"error": {"message": problem, "type": "invalid_request_error",
                                            "param": "response_format", "code": None}})
            return
        if body.get("stream"):
            self._send_json(400, {"error": {"message": "the scripted judge does not stream; "
                                                       "call without stream=True"}})
            return
        if wire.api_style == "responses" and not owner.responses_api:
            # llama-cpp-python's server: FastAPI's 404 for a route it does not have.
            self._send_json(404, {"detail": "Not Found"})
            return
        owner._enter()
        self._in_flight = True
        slot = False
        try:
            # A server with N slots answers N requests at once; the others wait their turn here,
            # and their wait is part of the latency the client sees (llama.cpp's --parallel).
            request = owner._record(self, path, wire, parsed, body)
            slot = owner._take_slot()
            if not slot:
                self._send_json(503, wire.error_body(503, "the scripted server stopped"))
                return
            limits = owner._admit(request)
            if limits is not None and not limits.admitted:
                self._send_json(429, wire.error_body(429, "scripted rate limit reached"),
                                wire.rate_limit_headers(limits))
                return
            try:
                outcome = owner.script.decide(request)
            except Exception as exc:
                # A broken responder must show up in the test, not as a mysterious disconnect.
                owner._responder_failed(exc)
                self._send_json(500, wire.error_body(
                    500, f"scripted responder raised {type(exc).__name__}: {exc}"))
                return
            self._answer(wire, request, outcome, limits)
        finally:
            self._leave_in_flight()
            if slot:
                owner._give_slot()

    def _reply(self, wire: WireFormat, request: RecordedRequest, reply: Reply, wait_s: float,
               headers: dict[str, str] | None = None) -> None:
        owner = self.server.owner
        use = owner._cache_lookup(request)
        if wait_s:
            owner._stopping.wait(wait_s)
        body = wire.success_body(request, answer_of(request, reply, reply.text, use))
        wire.name_served(body, owner.served_model, owner.system_fingerprint)
        # Stored before the reply goes out: a client that reads it and at once sends a
        # sibling must find the prefix cached, as it would at the provider.
        owner._cache_store(request, use)
        self._send_json(200, body, headers)

    def _answer(self, wire: WireFormat, request: RecordedRequest, outcome: Reply | Fault,
                limits: RateLimitState | None = None) -> None:
        if isinstance(outcome, Reply):
            headers = None
            if limits is not None:
                self.server.owner._charge_reply(request, outcome)
                headers = wire.rate_limit_headers(limits)
            self._reply(wire, request, outcome, outcome.latency_s, headers)
            return
        owner = self.server.owner
        fault = outcome
        if fault.kind == "latency":
            self._reply(wire, request, Reply(), fault.seconds or 0.0)
        elif fault.kind == "status":
            headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
            if fault.retry_after_ms is not None:
                headers["retry-after-ms"] = fault.retry_after_ms
            if fault.body is not None:
                self._send_raw(fault.status, fault.body.encode("utf-8"), "application/json",
                               headers)
            else:
                self._send_json(fault.status, wire.error_body(
                    fault.status, f"scripted HTTP {fault.status}"), headers)
        elif fault.kind == "empty":
            self._send_json(200, wire.success_body(request, answer_of(request, Reply(text=""), "")))
        elif fault.kind == "non_json":
            self._send_raw(200, (fault.body or "not json").encode("utf-8"), "application/json")
        elif fault.kind == "truncated":
            payload = json.dumps(wire.success_body(request, answer_of(request, Reply(), "Yes"))
                                 ).encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload[: len(payload) // 2])
            self.wfile.flush()
            self.close_connection = True
            self._abort()
        elif fault.kind == "reset":
            self.close_connection = True
            self._abort()
        elif fault.kind == "hang":
            owner._stopping.wait(fault.seconds)
            self.close_connection = True
            self._abort()
        else:
            raise ValueError(f"unknown fault kind {fault.kind!r}")

    def _abort(self) -> None:
        # SO_LINGER 0 makes close() send a TCP RST instead of an orderly FIN.
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            self.connection.close()
        except OSError:
            pass

    def _send_json(self, status: int, payload: dict[str, Any],
                   headers: dict[str, str] | None = None) -> None:
        self._send_raw(status, json.dumps(payload).encode("utf-8"), "application/json", headers)

    def _leave_in_flight(self) -> None:
        # Before the answer goes out: a client that reads it and sends its next request at once
        # must not find this one still counted (max_in_flight would overstate its concurrency).
        if getattr(self, "_in_flight", False):
            self._in_flight = False
            self.server.owner._leave()

    def _send_raw(self, status: int, payload: bytes, content_type: str,
                  headers: dict[str, str] | None = None) -> None:
        try:
            self._leave_in_flight()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (its timeout); nothing to answer


class _SlotGate:
    """N slots handed out first come, first served, as a server's request queue does."""

    def __init__(self, slots: int) -> None:
        self._changed = threading.Condition()
        self._free = slots
        self._queue: deque[object] = deque()

    def take(self, stopping: threading.Event) -> bool:
        ticket = object()
        with self._changed:
            self._queue.append(ticket)
            while not stopping.is_set() and (self._queue[0] is not ticket or not self._free):
                self._changed.wait(0.05)  # the timeout only notices a stop
            self._queue.remove(ticket)
            if not stopping.is_set():
                self._free -= 1
            self._changed.notify_all()
            return not stopping.is_set()

    def give(self) -> None:
        with self._changed:
            self._free += 1
            self._changed.notify_all()


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024  # hundreds of concurrent clients must not be refused at accept

    def __init__(self, owner: ScriptedJudgeServer, address: tuple[str, int]) -> None:
        self.owner = owner
        # Accepted keep-alive connections: closed on stop, or each would keep a handler thread
        # blocked on its next request (and the client's socket open) for as long as the client
        # lives, hundreds of them over a test session.
        self.open_sockets: set[socket.socket] = set()
        self.sockets_lock = threading.Lock()
        super().__init__(address, _Handler)

    def close_open_sockets(self) -> None:
        with self.sockets_lock:
            open_now = list(self.open_sockets)
        for sock in open_now:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by its peer


class ScriptedJudgeServer(ScriptedJudge):
    """A scripted judge on 127.0.0.1 (ephemeral port), served from a background thread.

    >>> with ScriptedJudgeServer(reply="Yes") as server:
    ...     cfg = server.judge_config(provider="openai")
    """

    def __init__(self, reply: Outcome | Responder = "Yes", *, host: str = "127.0.0.1",
                 prompt_cache: bool = True, slots: int | None = None,
                 responses_api: bool = True, local: bool | None = None,
                 served_model: str | None = None) -> None:
        """``slots``: answer at most that many requests at once, the rest waiting in arrival
        order (a llama.cpp server's parallel slots); None, no limit. ``responses_api=False``:
        /v1/responses answers 404, as llama-cpp-python's server does.

        ``local``: whether the judge layer treats the server as a self-hosted one (a judge whose
        ``api_style`` is unset uses Chat Completions, concurrency starts low and finds the
        slots) rather than as the provider it answers like. Default: local when it emulates a
        local server (``slots`` or ``responses_api=False``). A process of its own (a subprocess
        given the URL) always sees a local server.
        """
        super().__init__(reply)
        # The model version replies say served them (None: the model asked for, as a server
        # without aliases answers) and Chat Completions' system_fingerprint; both may be
        # changed while the server runs, as a provider moves an alias to a new snapshot.
        self.served_model: str | None = served_model
        self.system_fingerprint: str | None = None
        if slots is not None and slots < 1:
            raise ValueError(f"slots must be at least 1, got {slots}")
        self._host = host
        self.slots = slots
        self.responses_api = responses_api
        self.local = local if local is not None else (slots is not None or not responses_api)
        self._slot_gate = _SlotGate(slots) if slots is not None else None
        # Each provider's prompt cache, emulated by its published rules (prompt_cache.py);
        # cached counts show in each reply's usage the way that provider reports them.
        self.prompt_cache_enabled = prompt_cache
        self._prompt_caches: dict[str, PromptCache] = {}
        self._connections = 0
        self._errors: list[BaseException] = []
        self._stopping = threading.Event()
        # A per-instance path prefix in base_url(): a later server that happens to get the same
        # port still has a different endpoint, so cache keys and client pools never carry over.
        self._prefix = f"/scripted-{uuid.uuid4().hex[:12]}"
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle
    def start(self) -> ScriptedJudgeServer:
        if self._httpd is not None:
            return self
        self._stopping.clear()
        self._httpd = _HTTPServer(self, (self._host, 0))
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={
            "poll_interval": 0.05}, name="scripted-judge-server", daemon=True)
        self._thread.start()
        if not self.local:
            declare_provider_endpoint(self._root)
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        declare_provider_endpoint(self._root, declared=False)
        self._stopping.set()  # releases hanging and slow handlers
        self._httpd.shutdown()
        self._httpd.server_close()
        self._httpd.close_open_sockets()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> ScriptedJudgeServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # addresses and configs
    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the scripted judge server is not running; call start() first")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}"

    def base_url(self, provider: str = "openai") -> str:
        """The base URL each SDK expects: OpenAI's includes /v1, the others add their own.

        It carries a prefix unique to this server instance (recorded paths omit it); ``url``
        without the prefix is served too.
        """
        root = self._root
        return root + for_provider(provider).sdk_base_path

    @property
    def _root(self) -> str:
        return f"{self.url}{self._prefix}"

    def judge_config(self, provider: str = "openai", model: str | None = None,
                     api_style: str = "chat", **overrides: Any) -> JudgeConfig:
        """A JudgeConfig pointed at this server with a dummy key; the cache is off by default."""
        fields: dict[str, Any] = {
            "provider": provider, "model": model or DEFAULT_MODELS.get(provider, "scripted-judge"),
            "base_url": self.base_url(provider), "api_key": SecretStr(DUMMY_API_KEY),
            "api_style": api_style, "cache": False,
        }
        fields.update(overrides)
        return JudgeConfig(**fields)

    # the record beyond ScriptedJudge's
    @property
    def connection_count(self) -> int:
        """TCP connections accepted so far; equal to 1 for N sequential calls means reuse."""
        with self._lock:
            return self._connections

    def reset_record(self) -> None:
        super().reset_record()
        with self._lock:
            self._connections = 0

    def clear_prompt_cache(self) -> None:
        """Forget every emulated prompt-cache entry (as if their lifetime had passed)."""
        with self._lock:
            caches = list(self._prompt_caches.values())
        for cache in caches:
            cache.clear()

    def _cache_lookup(self, request: RecordedRequest) -> CacheUse | None:
        rules = caching_rules(request.provider, request.model)
        if not self.prompt_cache_enabled or rules is None:
            return None
        with self._lock:
            cache = self._prompt_caches.setdefault(request.provider, PromptCache())
        # A reply schema comes first in what the provider caches (OpenAI puts it before the
        # system message, Anthropic's tools precede the system text): requests with different
        # schemas share nothing, as at the provider.
        schema = request.reply_schema
        head = "" if schema is None else json.dumps(schema, sort_keys=True) + "\n\n"
        breakpoint_at = request.cache_breakpoint
        if head and breakpoint_at is not None:
            breakpoint_at += len(head)
        return cache.begin(rules, request.model, head + request.cache_text, breakpoint_at,
                           time.monotonic())

    def _cache_store(self, request: RecordedRequest, use: CacheUse | None) -> None:
        request.answered_at = time.monotonic()
        rules = caching_rules(request.provider, request.model)
        if use is None or rules is None:
            return
        self._prompt_caches[request.provider].commit(rules, use, request.answered_at)

    @property
    def errors(self) -> list[BaseException]:
        """Exceptions raised by scripted callbacks; each was answered with an HTTP 500."""
        with self._lock:
            return list(self._errors)

    # handler hooks
    def _take_slot(self) -> bool:
        """Wait for a free slot, in arrival order; False when the server stops first."""
        return self._slot_gate is None or self._slot_gate.take(self._stopping)

    def _give_slot(self) -> None:
        if self._slot_gate is not None:
            self._slot_gate.give()

    def _responder_failed(self, exc: BaseException) -> None:
        with self._lock:
            self._errors.append(exc)

    def _connection_opened(self) -> int:
        with self._lock:
            self._connections += 1
            return self._connections

    def _record(self, handler: _Handler, path: str, wire: WireFormat, parsed: ParsedRequest,
                body: dict[str, Any]) -> RecordedRequest:
        return self._append_request(
            method=handler.command, path=path, provider=wire.provider, api_style=wire.api_style,
            model=parsed.model, prompt=parsed.prompt, system=parsed.system,
            temperature=parsed.temperature, max_tokens=parsed.max_tokens, body=body,
            headers={k.lower(): v for k, v in handler.headers.items()},
            connection_id=handler.connection_id, arrived_at=time.monotonic(),
            cache_breakpoint=wire.cache_breakpoint(body, parsed.system))
