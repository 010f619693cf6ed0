"""ScriptedBatchService: the providers' batch APIs on 127.0.0.1, answered by a judge script.

It speaks OpenAI's Files and Batch APIs (``/v1/files``, ``/v1/batches``: create, retrieve,
cancel, output and error files in JSONL), Anthropic's Message Batches
(``/v1/messages/batches``: create, retrieve, results JSONL, cancel) and Gemini's batch mode
(``models/{model}:batchGenerateContent`` with inlined requests, ``batches/{id}``, cancel) well
enough for the official SDKs. Each item is answered by the same scripting as ``ScriptedJudgeServer`` (rules, replies,
faults), so a suite gives the same verdicts online and by batch. A test sets how long a batch
takes, which batches expire, an enqueued-token limit, and reads what was received.

>>> with ScriptedBatchService(reply="Yes") as service:
...     cfg = service.judge_config(provider="anthropic")
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
import time
import uuid
from collections import Counter
from typing import Any

from pydantic import SecretStr

from referee.judge.config import DEFAULT_MODELS, JudgeConfig, declare_provider_endpoint
from referee.testing.batch_wire import (
    ANTHROPIC,
    BATCH_APIS,
    GEMINI,
    OPENAI,
    Batch,
    BatchAPI,
    ItemResult,
    anthropic_result,
)
from referee.testing.script import (
    Fault,
    Outcome,
    RecordedRequest,
    Reply,
    Responder,
    ScriptedJudge,
    token_counts,
)
from referee.testing.server import DUMMY_API_KEY, _parse_request, _success_body
from referee.testing.wire import for_provider

# OpenAI's batch endpoints: the item URLs a batch may name.
OPENAI_BATCH_ENDPOINTS = ("/v1/chat/completions", "/v1/responses")

class ScriptedBatchService(ScriptedJudge):
    """A scripted batch service on 127.0.0.1 (ephemeral port), served from a background thread.

    ``processing_s``: seconds from a batch's creation until it has ended (each batch also
    stays "validating" for its first tenth). ``enqueued_token_limit``: the prompt tokens all
    unfinished batches may hold together; over it, OpenAI fails the new batch with
    ``token_limit_exceeded`` and Anthropic refuses the create with a 429, as the providers do.
    Every answered item is also recorded as a request (``requests``), as the online server does.
    """

    def __init__(self, reply: Outcome | Responder = "Yes", *, host: str = "127.0.0.1",
                 processing_s: float = 0.0, enqueued_token_limit: int | None = None) -> None:
        super().__init__(reply)
        # Re-entrant: a handler that holds it (cancel) builds the batch's view, which takes it.
        self._lock = threading.RLock()  # type: ignore[assignment]
        if processing_s < 0:
            raise ValueError(f"processing_s must be >= 0, got {processing_s}")
        if enqueued_token_limit is not None and enqueued_token_limit < 1:
            raise ValueError(f"enqueued_token_limit must be >= 1, got {enqueued_token_limit}")
        self._host = host
        self.processing_s = processing_s
        self.enqueued_token_limit = enqueued_token_limit
        self._batches: dict[str, Batch] = {}
        self._files: dict[str, bytes] = {}
        self._expiries: list[int] = []  # per batch to come: items answered before it expires
        self._calls: Counter[str] = Counter()
        self._prefix = f"/scripted-batch-{uuid.uuid4().hex[:12]}"
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: Any = None
        self._thread: threading.Thread | None = None
        self._port: int | None = None

    # scripting
    def expire_next_batches(self, count: int = 1, *, answered: int = 0) -> None:
        """The next ``count`` batches created expire at their end, each after answering only
        its first ``answered`` items (the rest are reported expired)."""
        if count < 1 or answered < 0:
            raise ValueError("expire_next_batches needs count >= 1 and answered >= 0")
        with self._lock:
            self._expiries.extend([answered] * count)

    # the record
    @property
    def batches_created(self) -> int:
        """Batches accepted by a create call (a batch failed for the token limit included)."""
        with self._lock:
            return len(self._batches)

    @property
    def items_received(self) -> int:
        """Items in every batch created (each is one judge request submitted)."""
        with self._lock:
            return sum(len(b.items) for b in self._batches.values())

    @property
    def calls(self) -> dict[str, int]:
        """API calls received by kind: ``files.create``, ``batches.create``,
        ``batches.retrieve``, ``batches.cancel``, ``batches.list``, ``files.content``,
        ``batches.results``, ``online`` (a request outside any batch),
        ``batches.rejected`` (a create refused for the enqueued-token limit)."""
        with self._lock:
            return dict(self._calls)

    def batch_states(self) -> dict[str, str]:
        """Each batch's id and state (in_progress, ended, failed, expired, cancelled)."""
        with self._lock:
            for batch in self._batches.values():
                self._advance(batch)
            return {b.id: b.state for b in self._batches.values()}

    # lifecycle
    def start(self) -> ScriptedBatchService:
        if self._thread is not None:
            return self
        ready = threading.Event()
        failure: list[BaseException] = []
        self._thread = threading.Thread(target=self._serve, args=(ready, failure),
                                        name="scripted-batch-service", daemon=True)
        self._thread.start()
        ready.wait(30)
        if failure:
            self._thread = None
            raise failure[0]
        declare_provider_endpoint(self.root)
        return self

    def stop(self) -> None:
        if self._thread is None or self._loop is None:
            return
        declare_provider_endpoint(self.root, declared=False)
        loop = self._loop
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(timeout=10)
        self._thread = None
        self._loop = None

    def __enter__(self) -> ScriptedBatchService:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _serve(self, ready: threading.Event, failure: list[BaseException]) -> None:
        from aiohttp import web

        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        app = web.Application(client_max_size=256 * 1024 * 1024)
        p = self._prefix
        app.router.add_post(f"{p}/v1/files", self._files_create)
        app.router.add_get(f"{p}/v1/files/{{file_id}}/content", self._files_content)
        app.router.add_post(f"{p}/v1/batches", self._openai_create)
        app.router.add_post(f"{p}/v1/messages/batches", self._anthropic_create)
        app.router.add_get(f"{p}/v1/messages/batches/{{batch_id}}/results",
                           self._anthropic_results)
        app.router.add_get(f"{p}/{{version:v1[a-z0-9]*}}/batches", self._list)
        app.router.add_post(f"{p}/{{version:v1[a-z0-9]*}}/models/{{model:[^/:]+}}"
                            ":batchGenerateContent", self._gemini_create)
        app.router.add_get(f"{p}/{{version:v1[a-z0-9]*}}/batches/{{batch_id:[^/:]+}}",
                           functools.partial(self._retrieve, api=GEMINI))
        app.router.add_post(f"{p}/{{version:v1[a-z0-9]*}}/batches/{{batch_id:[^/:]+}}:cancel",
                            functools.partial(self._cancel, api=GEMINI))
        # The online APIs beside the batch ones, as at the provider (a batch_fallback="online"
        # request comes here), answered by the same script.
        for api in BATCH_APIS:
            for online in api.online_routes:
                app.router.add_post(f"{p}{online}", functools.partial(self._online, api=api))
        for api, batches in ((OPENAI, f"{p}/v1/batches"),
                             (ANTHROPIC, f"{p}/v1/messages/batches")):
            app.router.add_get(f"{batches}/{{batch_id}}",
                               functools.partial(self._retrieve, api=api))
            app.router.add_post(f"{batches}/{{batch_id}}/cancel",
                                functools.partial(self._cancel, api=api))
        runner = web.AppRunner(app, access_log=None)
        try:
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, self._host, 0)
            loop.run_until_complete(site.start())
            self._port = int(runner.addresses[0][1])
        except BaseException as exc:  # surfaced by start()
            failure.append(exc)
            ready.set()
            loop.close()
            return
        self._loop, self._runner = loop, runner
        ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    # addresses and configs
    @property
    def url(self) -> str:
        if self._port is None:
            raise RuntimeError("the scripted batch service is not running; call start() first")
        return f"http://{self._host}:{self._port}"

    @property
    def root(self) -> str:
        """Where this service's APIs are, before each SDK's own base path."""
        return f"{self.url}{self._prefix}"

    def base_url(self, provider: str = "openai") -> str:
        """The base URL each SDK expects (OpenAI's includes /v1)."""
        return f"{self.root}{for_provider(provider).sdk_base_path}"

    def judge_config(self, provider: str = "openai", model: str | None = None,
                     api_style: str = "chat", **overrides: Any) -> JudgeConfig:
        """A batch-API JudgeConfig pointed at this service with a dummy key; cache off."""
        fields: dict[str, Any] = {
            "provider": provider, "model": model or DEFAULT_MODELS.get(provider, "scripted-judge"),
            "base_url": self.base_url(provider), "api_key": SecretStr(DUMMY_API_KEY),
            "api_style": api_style, "cache": False, "batch_api": True,
        }
        fields.update(overrides)
        return JudgeConfig(**fields)

    # processing
    def _count(self, call: str) -> None:
        with self._lock:
            self._calls[call] += 1

    def _new_batch(self, api: BatchAPI, endpoint: str,
                   items: list[tuple[str, dict[str, Any]]], *, input_file_id: str | None = None,
                   metadata: dict[str, Any] | None = None) -> Batch:
        now = time.time()
        tokens = sum(self._item_tokens(endpoint, body) for _, body in items)
        batch = Batch(id=f"{api.id_prefix}{uuid.uuid4().hex[:24]}",
                       api=api, endpoint=endpoint, items=items, created_at=now,
                       ends_at=now + self.processing_s, input_file_id=input_file_id,
                       tokens=tokens, metadata=metadata)
        with self._lock:
            batch.expire_after = self._expiries.pop(0) if self._expiries else None
            self._batches[batch.id] = batch
        return batch

    def _over_token_limit(self, tokens: int) -> bool:
        limit = self.enqueued_token_limit
        if limit is None:
            return False
        with self._lock:
            for batch in self._batches.values():
                self._advance(batch)
            queued = sum(b.tokens for b in self._batches.values() if b.state == "in_progress")
        return queued + tokens > limit

    @staticmethod
    def _item_tokens(endpoint: str, body: dict[str, Any]) -> int:
        try:
            request = _recorded(endpoint, body)
        except (LookupError, ValueError, TypeError, AttributeError):
            return 0
        return token_counts(Reply(), request)[0]

    def _advance(self, batch: Batch) -> None:
        """Bring a batch to where the clock says it is; called with the lock held."""
        if batch.state != "in_progress":
            return
        now = time.time()
        if batch.cancel_requested is not None:
            self._finish(batch, answered=0, end_state="cancelled", code="batch_cancelled",
                         message="the batch was cancelled before this request ran")
        elif now >= batch.ends_at:
            if batch.expire_after is not None:
                self._finish(batch, answered=batch.expire_after, end_state="expired",
                             code="batch_expired",
                             message="this request could not be executed before the "
                                     "completion window expired")
            else:
                self._finish(batch, answered=len(batch.items), end_state="ended", code="",
                             message="")

    def _finish(self, batch: Batch, *, answered: int, end_state: str, code: str,
                message: str) -> None:
        for position, (custom_id, body) in enumerate(batch.items):
            if position < answered:
                batch.results[custom_id] = self._answer(batch.api, batch.endpoint, body)
            else:
                batch.results[custom_id] = ItemResult(status=0, error_code=code,
                                                       error_message=message)
        batch.state, batch.ended_at = end_state, time.time()
        batch.api.ended(self, batch)

    def _answer(self, api: BatchAPI, endpoint: str, body: dict[str, Any]) -> ItemResult:
        """One item, answered by the script as the online server answers a request."""
        try:
            parsed = _parse_request(endpoint, body)
        except (LookupError, ValueError, TypeError, AttributeError) as exc:
            return ItemResult(status=400, error_code="invalid_request",
                               error_message=f"bad request body: {exc}")
        provider, api_style, model, prompt, system, temperature, max_tokens = parsed
        # The lock is held: record without ScriptedJudge's helper, which takes it.
        request = RecordedRequest(
            index=len(self._requests), method="POST", path=endpoint, provider=provider,
            api_style=api_style, model=model, prompt=prompt, system=system,
            temperature=temperature, max_tokens=max_tokens, body=body)
        self._requests.append(request)
        outcome = self.script.decide(request)
        if isinstance(outcome, Fault):
            if outcome.kind == "latency":
                outcome = Reply()
            else:
                status = outcome.status or 500
                error = api.item_error(status, f"scripted HTTP {status}")
                return ItemResult(body=error, status=status,
                                   error_code=str(error.get("error", {}).get("type")
                                                  or status),
                                   error_message=f"scripted HTTP {status}")
        reply_body = _success_body(request, outcome, outcome.text)
        request.answered_at = time.monotonic()
        return ItemResult(body=reply_body)

    def store_file(self, text: str) -> str:
        """Keep ``text`` as a file its content call serves; its id. Called with the lock held."""
        file_id = f"file-{uuid.uuid4().hex[:24]}"
        self._files[file_id] = text.encode("utf-8")
        return file_id

    # OpenAI
    async def _files_create(self, request: Any) -> Any:
        from aiohttp import web

        self._count("files.create")
        form = await request.post()
        upload = form.get("file")
        purpose = form.get("purpose")
        if upload is None or not hasattr(upload, "file"):
            return _json(400, OPENAI.error(400, "no file in the upload"))
        content = upload.file.read()
        with self._lock:
            file_id = f"file-{uuid.uuid4().hex[:24]}"
            self._files[file_id] = content
        return web.json_response({"id": file_id, "object": "file", "bytes": len(content),
                                  "created_at": int(time.time()),
                                  "filename": getattr(upload, "filename", "batch.jsonl"),
                                  "purpose": str(purpose or "batch"), "status": "processed"})

    async def _files_content(self, request: Any) -> Any:
        from aiohttp import web

        self._count("files.content")
        with self._lock:
            content = self._files.get(request.match_info["file_id"])
        if content is None:
            return _json(404, OPENAI.error(404, "no such file"))
        return web.Response(body=content, content_type="application/octet-stream")

    async def _openai_create(self, request: Any) -> Any:
        self._count("batches.create")
        body = await request.json()
        endpoint = body.get("endpoint")
        with self._lock:
            content = self._files.get(str(body.get("input_file_id")))
        if content is None:
            return _json(400, OPENAI.error(400, "input_file_id names no uploaded file"))
        if endpoint not in OPENAI_BATCH_ENDPOINTS:
            return _json(400, OPENAI.error(400, f"unsupported endpoint {endpoint!r}"))
        items: list[tuple[str, dict[str, Any]]] = []
        problem: str | None = None
        for number, line in enumerate(content.decode("utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except ValueError:
                problem = f"line {number} is not JSON"
                break
            if item.get("url") != endpoint:
                problem = f"line {number}: url {item.get('url')!r} is not the batch's {endpoint}"
                break
            if items and (item.get("body") or {}).get("model") != items[0][1].get("model"):
                problem = f"line {number}: a batch holds requests for one model only"
                break
            if any(custom_id == item.get("custom_id") for custom_id, _ in items):
                problem = f"line {number}: duplicate custom_id {item.get('custom_id')!r}"
                break
            items.append((str(item.get("custom_id")), dict(item.get("body") or {})))
        batch = self._new_batch(OPENAI, endpoint, items, input_file_id=body["input_file_id"],
                                metadata=body.get("metadata"))
        with self._lock:
            if problem is not None:
                batch.state, batch.failure = "failed", ("invalid_request", problem)
        if problem is None and self._rejects(batch):
            self._count("batches.rejected")
        return _json(200, self._view(batch))

    async def _list(self, request: Any) -> Any:
        """Newest first, in one page. OpenAI's and Gemini's SDKs both list at
        ``/v1.../batches``; Gemini's is known by its key header."""
        self._count("batches.list")
        if "x-goog-api-key" in request.headers:
            return _json(200, {"operations": [self._view(b) for b in self._newest(GEMINI)]})
        views = [self._view(b) for b in self._newest(OPENAI)]
        return _json(200, {"object": "list", "data": views,
                           "first_id": views[0]["id"] if views else None,
                           "last_id": views[-1]["id"] if views else None, "has_more": False})

    def _newest(self, api: BatchAPI) -> list[Batch]:
        with self._lock:
            return sorted((b for b in self._batches.values() if b.api is api),
                          key=lambda b: b.created_at, reverse=True)

    def _rejects(self, batch: Batch) -> bool:
        """Fail ``batch`` for the enqueued-token limit, its own tokens not counted twice."""
        with self._lock:
            queued = sum(b.tokens for b in self._batches.values()
                         if b.state == "in_progress" and b is not batch)
            if self.enqueued_token_limit is None or queued + batch.tokens <= self.enqueued_token_limit:
                return False
            batch.state = "failed"
            batch.failure = ("token_limit_exceeded", (
                f"Enqueued token limit reached for {batch.model}. Limit: "
                f"{self.enqueued_token_limit} enqueued tokens. Please try submitting fewer "
                "tasks, or wait until your in-progress batches complete."))
            return True

    async def _retrieve(self, request: Any, api: BatchAPI) -> Any:
        self._count("batches.retrieve")
        batch = self._lookup(request.match_info["batch_id"])
        if batch is None:
            return _json(404, api.error(404, "no such batch"))
        return _json(200, self._view(batch))

    async def _cancel(self, request: Any, api: BatchAPI) -> Any:
        self._count("batches.cancel")
        batch = self._lookup(request.match_info["batch_id"])
        if batch is None:
            return _json(404, api.error(404, "no such batch"))
        with self._lock:
            if batch.state == "in_progress":
                batch.cancel_requested = time.time()
            view = self._view(batch, advance=False)
            if batch.state == "in_progress":
                view.update(batch.api.cancelling)
        return _json(200, view)

    def _view(self, batch: Batch, *, advance: bool = True) -> dict[str, Any]:
        with self._lock:
            if advance:
                self._advance(batch)
            return batch.api.view(self, batch)

    # Anthropic
    async def _anthropic_create(self, request: Any) -> Any:
        self._count("batches.create")
        body = await request.json()
        raw_items = body.get("requests")
        if not isinstance(raw_items, list) or not raw_items:
            return _json(400, ANTHROPIC.error(400, "requests: a non-empty list"))
        items = [(str(item.get("custom_id")), dict(item.get("params") or {}))
                 for item in raw_items]
        if len({custom_id for custom_id, _ in items}) != len(items):
            return _json(400, ANTHROPIC.error(400, "duplicate custom_id in requests"))
        tokens = sum(self._item_tokens("/v1/messages", params) for _, params in items)
        if self._over_token_limit(tokens):
            self._count("batches.rejected")
            return _json(429, ANTHROPIC.error(
                429, "Number of enqueued batch tokens exceeds the rate limit "
                f"({self.enqueued_token_limit}); submit fewer requests or wait"))
        batch = self._new_batch(ANTHROPIC, "/v1/messages", items)
        return _json(200, self._view(batch))

    async def _anthropic_results(self, request: Any) -> Any:
        from aiohttp import web

        self._count("batches.results")
        batch = self._lookup(request.match_info["batch_id"])
        if batch is None:
            return _json(404, ANTHROPIC.error(404, "no such batch"))
        with self._lock:
            self._advance(batch)
            if batch.state == "in_progress":
                return _json(400, ANTHROPIC.error(400, "the batch has not ended"))
            lines = [json.dumps({"custom_id": custom_id,
                                 "result": anthropic_result(batch.results[custom_id])})
                     for custom_id, _ in batch.items]
        return web.Response(body=("\n".join(lines) + "\n").encode("utf-8"),
                            content_type="application/binary")

    async def _online(self, request: Any, api: BatchAPI) -> Any:
        self._count("online")
        endpoint = request.path[len(self._prefix):]
        body = await request.json()
        with self._lock:
            result = self._answer(api, endpoint, body)
        return _json(result.status or 500, result.body or {})

    @property
    def online_requests(self) -> int:
        """Requests answered online (not in a batch)."""
        with self._lock:
            return self._calls["online"]

    # Gemini
    async def _gemini_create(self, request: Any) -> Any:
        self._count("batches.create")
        model = request.match_info["model"]
        body = await request.json()
        raw_items = (((body.get("batch") or {}).get("inputConfig") or {}).get("requests")
                     or {}).get("requests")
        if not isinstance(raw_items, list) or not raw_items:
            return _json(400, GEMINI.error(400, "batch.inputConfig.requests.requests: "
                                                         "a non-empty list"))
        # Gemini keeps the items in order and echoes each one's metadata with its response.
        items = [(str(position), dict(item.get("request") or {}))
                 for position, item in enumerate(raw_items)]
        endpoint = f"/v1beta/models/{model}:generateContent"
        tokens = sum(self._item_tokens(endpoint, params) for _, params in items)
        if self._over_token_limit(tokens):
            self._count("batches.rejected")
            return _json(429, GEMINI.error(429, "enqueued batch tokens over the limit "
                                                         f"({self.enqueued_token_limit})"))
        batch = self._new_batch(GEMINI, endpoint, items,
                                metadata={"displayName": body["batch"].get("displayName")})
        batch.item_metadata = {str(position): item.get("metadata")
                               for position, item in enumerate(raw_items)}
        return _json(200, self._view(batch))

    def _lookup(self, batch_id: str) -> Batch | None:
        with self._lock:
            return self._batches.get(batch_id)


def _recorded(endpoint: str, body: dict[str, Any]) -> RecordedRequest:
    provider, api_style, model, prompt, system, temperature, max_tokens = _parse_request(
        endpoint, body)
    return RecordedRequest(index=-1, method="POST", path=endpoint, provider=provider,
                           api_style=api_style, model=model, prompt=prompt, system=system,
                           temperature=temperature, max_tokens=max_tokens, body=body)


def _json(status: int, payload: dict[str, Any]) -> Any:
    from aiohttp import web

    return web.json_response(payload, status=status)
