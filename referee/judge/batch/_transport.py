"""The batch transport: judge requests collected into provider batches, polled, and answered.

A criterion awaits its request as it would online. The request's body is built by the
provider's own adapter, which posts it through a ``_Lane`` standing in for the SDK client's
direct path; the lane hands it to the endpoint's dispatcher, and the result comes back to the
same adapter as the body the online API would have sent, so a reply reads the same either way.

The dispatcher submits what it has collected when a batch is full (the provider's item or
byte limit), when no request has arrived for ``quiet_s`` (everyone in flight is waiting on the
judge), or ``window_s`` after the first one waiting. Each batch is polled until it ends; an
item that failed, expired or was cancelled goes out again in a later batch, at most
``item_attempts`` times in all, and after that its caller gets ``BatchRequestFailed``.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from referee.judge import retry as _retry
from referee.judge.batch._anthropic import AnthropicBatchAPI
from referee.judge.batch._api import BatchAPI, BatchState, EnqueuedLimitReached, ItemOutcome
from referee.judge.batch._google import GoogleBatchAPI
from referee.judge.batch._journal import BatchJournal, current_journal
from referee.judge.batch._openai import OpenAIBatchAPI
from referee.judge.config import JudgeConfig, _env_positive
from referee.judge.providers import JudgeRequest, RawReply, adapter_for
from referee.judge.providers._direct import _direct_http
from referee.redact import clip

logger = logging.getLogger("referee.judge.batch")

_APIS: dict[str, BatchAPI] = {"openai": OpenAIBatchAPI(), "anthropic": AnthropicBatchAPI(),
                              "google": GoogleBatchAPI()}

# Batch API calls (create, retrieve, results) that fail for the network or a 5xx are tried
# this many times before the batch's requests fail.
API_CALL_ATTEMPTS = 5


class BatchRequestFailed(Exception):
    """A request the batch API could not answer (the judge layer reports it as JudgeUnavailable)."""


@dataclass(frozen=True)
class BatchSettings:
    """When a batch goes out and how often it is polled (environment variables in brackets)."""

    quiet_s: float = 0.5       # REFEREE_BATCH_QUIET_S: no new request for this long: submit
    window_s: float = 10.0     # REFEREE_BATCH_WINDOW_S: the longest a request waits to go out
    first_poll_s: float = 1.0  # REFEREE_BATCH_FIRST_POLL_S: the first poll after submitting
    max_poll_s: float = 60.0   # REFEREE_BATCH_MAX_POLL_S: polls back off up to this gap
    item_attempts: int = 3     # REFEREE_BATCH_ITEM_ATTEMPTS: batches a request may go out in

    @classmethod
    def from_env(cls) -> BatchSettings:
        """The defaults, with each variable that is set; BatchRequestFailed naming a bad one."""
        fields: dict[str, Any] = {}
        try:
            for name, kind in (("quiet_s", float), ("window_s", float), ("first_poll_s", float),
                               ("max_poll_s", float), ("item_attempts", int)):
                env = "REFEREE_BATCH_" + name.upper().removesuffix("_S") + (
                    "_S" if name.endswith("_s") else "")
                value = _env_positive(env, kind)
                if value is not None:
                    fields[name] = kind(value)
        except ValueError as exc:
            raise BatchRequestFailed(str(exc)) from None
        return cls(**fields)


@dataclass(eq=False)
class _Item:
    custom_id: str
    path: str
    body: dict[str, Any]
    size: int
    future: asyncio.Future[Any]  # the reply body (Gemini: its GenerateContentResponse)
    attempts: int = 0
    errors: list[str] = field(default_factory=list)


def _group(item: _Item) -> tuple[str, str]:
    return item.path, str(item.body.get("model", ""))


class BatchDispatcher:
    """The batches of one judge endpoint, on one event loop, for one run's journal."""

    def __init__(self, api: BatchAPI, client: Callable[[], Any], label: str,
                 journal: BatchJournal | None, settings: BatchSettings) -> None:
        self._api = api
        self._client = client
        self._label = label
        self._journal = journal
        self.settings = settings
        self._waiting: dict[str, asyncio.Future[Any]] = {}
        self._pending: list[_Item] = []
        self._pending_bytes = 0
        self._first_at = 0.0
        self._last_at = 0.0
        self._arrived = asyncio.Event()
        self._flusher: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._in_flight = 0  # batches submitted and not yet ended
        self._batch_ended = asyncio.Event()
        # Batches this run submitted before (the journal): followed, never sent again.
        self._followed: dict[str, list[_Item]] = {}
        self._finished: dict[str, dict[str, ItemOutcome]] = {}
        self._recovery = asyncio.Lock()
        self._recovered = False
        # What went out, for the report and tests.
        self.batches_submitted = 0
        self.items_submitted = 0
        self.batches_followed = 0
        self._creating = 0  # batches whose create call has not returned

    @property
    def settled_at_provider(self) -> bool:
        """Every request it holds is in a batch the provider has accepted (and at least one
        batch is): nothing collected and unsent, no create call under way."""
        return (not self._pending and self._creating == 0
                and self.batches_submitted + self.batches_followed > 0)

    async def send(self, custom_id: str, path: str, body: dict[str, Any]) -> Any:
        """The reply body for this request, once its batch has answered it."""
        if not self._recovered:
            await self._recover_unconfirmed()
        shared = self._waiting.get(custom_id)
        if shared is not None:  # the same request already waits: one item answers both
            return await asyncio.shield(shared)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[custom_id] = future
        item = _Item(custom_id, path, body, self._api.item_size(custom_id, path, body), future)
        known = self._journal.batch_of(custom_id) if self._journal is not None else None
        if known is not None and known.provider == self._api.provider:
            self._follow(known.batch_id, item)
        else:
            self._enqueue(item)
        try:
            return await asyncio.shield(future)
        finally:
            if future.done() and self._waiting.get(custom_id) is future:
                del self._waiting[custom_id]

    async def _recover_unconfirmed(self) -> None:
        """Before the first request: find at the provider the batches an earlier process
        recorded as being submitted but died before recording their id, so that their
        requests are followed rather than paid for twice (where the API keeps a label)."""
        async with self._recovery:  # every request waits until it is done
            if self._recovered:
                return
            try:
                await self._find_unconfirmed()
            finally:
                self._recovered = True

    async def _find_unconfirmed(self) -> None:
        unconfirmed = (self._journal.unconfirmed_batches(self._api.provider)
                       if self._journal is not None else [])
        if not unconfirmed or self._journal is None:
            return
        labels = [local for local, _ in unconfirmed]
        try:
            found = await self._api_call("list", lambda client: self._api.find(client,
                                                                              labels))
        except BatchRequestFailed as exc:
            logger.warning("judge %s: could not look for batches submitted before the "
                           "resume (%s); their requests are sent again", self._label, exc)
            return
        for local, path in unconfirmed:
            if local in found:
                logger.info("judge %s: batch %s, submitted before the resume, found at "
                            "the provider", self._label, found[local])
                self._journal.submitted(local, self._api.provider, path, found[local])

    # collecting
    def _enqueue(self, item: _Item) -> None:
        now = time.monotonic()
        if not self._pending:
            self._first_at = now
        self._pending.append(item)
        self._pending_bytes += item.size
        self._last_at = now
        self._arrived.set()
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_when_due())

    async def _flush_when_due(self) -> None:
        while self._pending:
            now = time.monotonic()
            full = (len(self._pending) >= self._api.max_items
                    or self._pending_bytes >= self._api.max_bytes)
            due = min(self._first_at + self.settings.window_s,
                      self._last_at + self.settings.quiet_s)
            if full or now >= due:
                self._submit_pending()
                continue
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), due - now)
            except asyncio.TimeoutError:
                pass

    def _submit_pending(self) -> None:
        """Start one batch: the oldest request's path and model (OpenAI takes one model a
        batch), within the provider's limits."""
        group = _group(self._pending[0])
        path = self._pending[0].path
        chosen: list[_Item] = []
        rest: list[_Item] = []
        size = 0
        for item in self._pending:
            fits = (_group(item) == group and len(chosen) < self._api.max_items
                    and (not chosen or size + item.size <= self._api.max_bytes))
            if fits:
                chosen.append(item)
                size += item.size
            else:
                rest.append(item)
        self._pending = rest
        self._pending_bytes = sum(i.size for i in rest)
        self._first_at = self._last_at = time.monotonic()
        self._spawn(self._run_batch(path, chosen))

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # one batch
    async def _run_batch(self, path: str, items: list[_Item]) -> None:
        local = uuid.uuid4().hex[:16]
        ids = [item.custom_id for item in items]
        if self._journal is not None:
            self._journal.submitting(local, self._api.provider, path, ids)
        for item in items:
            item.attempts += 1
        self._in_flight += 1
        try:
            try:
                batch_id = await self._create(path, items, local)
            except EnqueuedLimitReached:
                self._abandon(local, "enqueued-token limit")
                await self._limited(path, items)
                return
            except BatchRequestFailed as exc:
                self._abandon(local, str(exc))
                self._fail(items, f"the batch could not be created: {exc}")
                return
            if self._journal is not None:
                self._journal.submitted(local, self._api.provider, path, batch_id)
            self.batches_submitted += 1
            self.items_submitted += len(items)
            logger.info("judge %s: batch %s submitted, %d request(s)", self._label, batch_id,
                        len(items))
            try:
                outcomes = await self._await_results(batch_id)
            except EnqueuedLimitReached:
                await self._limited(path, items)
                return
            except BatchRequestFailed as exc:
                self._fail(items, str(exc))
                return
            self._settle(items, outcomes, batch_id)
        finally:
            self._in_flight -= 1
            self._batch_ended.set()

    async def _create(self, path: str, items: list[_Item], local: str) -> str:
        self._creating += 1
        try:
            return str(await self._api_call("create", lambda client: self._api.create(
                client, path, [(i.custom_id, i.body) for i in items], local)))
        finally:
            self._creating -= 1

    def _abandon(self, local: str, why: str) -> None:
        if self._journal is not None:
            self._journal.abandoned(local, why)

    async def _limited(self, path: str, items: list[_Item]) -> None:
        """A batch refused for the enqueued-token limit: wait for a batch in flight to end and
        send it again, or, with none in flight, send it in two halves."""
        for item in items:
            item.attempts -= 1  # a refusal is not an attempt at the request
        if self._in_flight > 1:  # others (this one is still counted)
            logger.info("judge %s: enqueued-token limit reached; %d request(s) wait for a "
                        "batch in flight to end", self._label, len(items))
            self._batch_ended.clear()
            await self._batch_ended.wait()
            self._spawn(self._run_batch(path, items))
            return
        if len(items) == 1:
            self._fail(items, "the request alone is over the provider's enqueued-token limit "
                              "for batches")
            return
        half = len(items) // 2
        logger.info("judge %s: enqueued-token limit reached; batch of %d split in two",
                    self._label, len(items))
        self._spawn(self._run_batch(path, items[:half]))
        # The second half waits for the first to be taken or refused.
        await asyncio.sleep(0)
        self._spawn(self._run_batch(path, items[half:]))

    async def _await_results(self, batch_id: str) -> dict[str, ItemOutcome]:
        """Poll until the batch ends; its items' outcomes (every one, or the batch's failure)."""
        finished = self._finished.get(batch_id)
        if finished is not None:
            return finished
        delay = self.settings.first_poll_s
        last_status = ""
        started = time.monotonic()
        while True:
            state: BatchState = await self._api_call(
                "retrieve", lambda client: self._api.retrieve(client, batch_id))
            if state.status != last_status:
                last_status = state.status
                logger.info("judge %s: batch %s %s (%d/%d done, %d failed, %.0fs)", self._label,
                            batch_id, state.status, state.completed, state.total, state.failed,
                            time.monotonic() - started)
            if state.ended:
                break
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, self.settings.max_poll_s)
        if state.limit_exceeded:
            raise EnqueuedLimitReached
        if state.failure is not None:
            raise BatchRequestFailed(f"batch {batch_id} failed: {clip(state.failure, 300)}")
        outcomes: dict[str, ItemOutcome] = await self._api_call(
            "results", lambda client: self._api.results(client, batch_id))
        if batch_id in self._followed:  # later requests of a resumed run read them here
            self._finished[batch_id] = outcomes
        return outcomes

    def _settle(self, items: list[_Item], outcomes: dict[str, ItemOutcome],
                batch_id: str) -> None:
        for item in items:
            if item.future.done():
                continue
            outcome = outcomes.get(item.custom_id) or ItemOutcome(
                error=f"batch {batch_id} returned no result for it")
            if outcome.body is not None:
                item.future.set_result(outcome.body)
                continue
            item.errors.append(outcome.error or "no result")
            if outcome.retryable and item.attempts < self.settings.item_attempts:
                logger.info("judge %s: request %s failed in batch %s (%s); sent again",
                            self._label, item.custom_id[:12], batch_id, outcome.error)
                self._enqueue(item)
            else:
                self._fail([item], f"batch item failed after {item.attempts} batch(es): "
                                   f"{clip('; '.join(item.errors), 300)}")

    def _fail(self, items: list[_Item], why: str) -> None:
        for item in items:
            if not item.future.done():
                item.future.set_exception(BatchRequestFailed(why))

    # batches a run submitted before it was stopped
    def _follow(self, batch_id: str, item: _Item) -> None:
        followers = self._followed.get(batch_id)
        if followers is not None:
            followers.append(item)
            return
        self._followed[batch_id] = [item]
        self.batches_followed += 1
        self._spawn(self._follow_batch(batch_id))

    async def _follow_batch(self, batch_id: str) -> None:
        # The resumed run's other requests for this batch arrive together: gather them first.
        await asyncio.sleep(self.settings.quiet_s)
        logger.info("judge %s: following batch %s submitted before the resume", self._label,
                    batch_id)
        try:
            outcomes = await self._await_results(batch_id)
        except (BatchRequestFailed, EnqueuedLimitReached) as exc:
            outcomes = {}
            reason = str(exc) or "refused for the enqueued-token limit"
            for item in self._followed.get(batch_id, []):
                item.errors.append(reason)
        # Items that join after the results came in are settled from the same results.
        while self._followed.get(batch_id):
            items, self._followed[batch_id] = self._followed[batch_id], []
            for item in items:
                item.attempts += 1
            self._settle(items, outcomes, batch_id)

    async def _api_call(self, what: str, call: Callable[[Any], Any]) -> Any:
        """A batch API call, tried again when the network or the provider failed for now."""
        policy = _retry.RetryPolicy()
        for attempt in range(API_CALL_ATTEMPTS):
            try:
                return await call(self._client())
            except (EnqueuedLimitReached, asyncio.CancelledError):
                raise
            except Exception as exc:
                if not _retry.is_provider_failure(exc):
                    raise
                info = _retry.classify(exc)
                if info.status == 429 and what == "create":
                    raise EnqueuedLimitReached from None
                if not info.retryable or attempt == API_CALL_ATTEMPTS - 1:
                    raise BatchRequestFailed(
                        f"batch {what} failed: {info.summary}: {clip(str(exc), 200)}") from None
                await _retry.sleep(policy.delay(attempt, info.retry_after))
        raise AssertionError("unreachable")


class _BatchPost:
    """One request's way into its dispatcher's batches: the direct path the OpenAI and
    Anthropic adapters post through. It must not refer to its lane, the weak key it is
    registered under, or the registration would keep the lane alive for good."""

    def __init__(self, dispatcher: BatchDispatcher, custom_id: str) -> None:
        self._dispatcher = dispatcher
        self._custom_id = custom_id

    async def post(self, path: str, body: dict[str, Any], timeout: float
                   ) -> tuple[Any, dict[str, str]]:
        del timeout  # a batch has its provider's completion window, not a request timeout
        return await self._dispatcher.send(self._custom_id, path, body), {}


class _Lane:
    """Stands in for an SDK client for one request: what the adapter sends goes into a batch.

    The OpenAI and Anthropic adapters post through its ``_BatchPost`` as the client's direct
    path; ``messages`` is the SDK client's, which the Anthropic adapter inspects. The Gemini
    adapter calls ``aio.models.generate_content``, answered with the batch's
    GenerateContentResponse.
    """

    def __init__(self, sender: _BatchPost, client: Any) -> None:
        self._sender = sender
        self._client = client

    @property
    def messages(self) -> Any:
        return self._client.messages

    @property
    def aio(self) -> _Lane:
        return self

    @property
    def models(self) -> _Lane:
        return self

    async def generate_content(self, *, model: str, contents: Any, config: Any) -> Any:
        settings = config.model_dump(mode="json", exclude_none=True, exclude={"http_options"})
        reply, _ = await self._sender.post(":generateContent", {
            "model": model, "contents": contents, "config": settings}, 0.0)
        return reply


# One dispatcher per (endpoint, journal) on each loop: a dispatcher's futures and tasks
# belong to the loop that made them.
_dispatchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop,
                                         dict[tuple[int, str], BatchDispatcher]] = (
    weakref.WeakKeyDictionary())


def supports_batch(provider: str) -> bool:
    return provider in _APIS


def _dispatcher(endpoint: Any, cfg: JudgeConfig) -> BatchDispatcher:
    api = _APIS.get(cfg.provider)
    if api is None:
        raise BatchRequestFailed(
            f"the batch API is not available for judge provider {cfg.provider!r} (it is for "
            f"{', '.join(sorted(_APIS))}); run without batch_api / --judge-batch-api")
    loop = asyncio.get_running_loop()
    journal = current_journal()
    key = (id(endpoint), str(journal.path) if journal is not None else "")
    per_loop = _dispatchers.setdefault(loop, {})
    dispatcher = per_loop.get(key)
    if dispatcher is None:
        dispatcher = per_loop[key] = BatchDispatcher(
            api, lambda: endpoint.client(cfg), f"{cfg.provider}/{cfg.model}", journal,
            BatchSettings.from_env())
    return dispatcher


def loop_dispatchers() -> list[BatchDispatcher]:
    """The dispatchers of the running loop (what went out, for reports and tests)."""
    return list(_dispatchers.get(asyncio.get_running_loop(), {}).values())


def request_id(key: str) -> str:
    """A request's custom_id: a digest of its key (Anthropic allows 64 of [A-Za-z0-9_-])."""
    return "r" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:47]


async def call_by_batch(endpoint: Any, cfg: JudgeConfig, request: JudgeRequest,
                        key: str) -> tuple[RawReply, float]:
    """Send ``request`` in a batch of ``endpoint``'s; its reply, and seconds until it came."""
    dispatcher = _dispatcher(endpoint, cfg)
    sender = _BatchPost(dispatcher, request_id(key))
    lane = _Lane(sender, endpoint.client(cfg))
    _direct_http[lane] = sender  # type: ignore[assignment]  # the adapters post through it
    started = time.monotonic()
    raw = await adapter_for(cfg.provider).call(lane, request)
    return raw, time.monotonic() - started
