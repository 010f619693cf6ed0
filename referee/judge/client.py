"""The Judge: one call path for every criterion, with shared clients, limits, retries and cache."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import sys
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from referee.content._parts import ContentError, TextPart
from referee.content._prepare import PreparedContent, prepare_content, reply_cache_parts
from referee.content._rules import ContentRules
from referee.content._scope import case_parts
from referee.content._vision import require_vision
from referee.errors import JudgeUnavailable
from referee.judge import retry as _retry
from referee.judge.config import JudgeConfig, is_provider_endpoint
from referee.judge.limiter import (
    BudgetSettings,
    EndpointIdentity,
    Outcome,
    OutcomeKind,
    new_budget,
    read_rate_limit_headers,
)
from referee.judge.pricing import usage_for
from referee.judge.prompt_caching import estimate_tokens, warm_up, worth_caching
from referee.judge.providers import (
    PLACEHOLDER_API_KEY,
    JudgeRequest,
    ProviderSetupError,
    RawReply,
    adapter_for,
    bounds_its_attempts,
    rules_for,
    schema_text,
    sends_reply_schema,
)
from referee.judge.reply_cache import (
    JudgeCache,
    cache_enabled_by_env,
    cache_key,
    flush_caches,
    get_cache,
)
from referee.judge.served import note_served
from referee.redact import clip, redact, remember_secret
from referee.storable import without_surrogates
from referee.usage import TokenUsage

logger = logging.getLogger("referee.judge")
T = TypeVar("T")

# Caching is on unless turned off: a cache hit needs the exact same provider, model, endpoint,
# prompt, parameters and sample index, so it only ever replays an identical request.
DEFAULT_CACHE_ENABLED = True


# Which repeated run of a case (``EvalSuite.run(runs=N)``) a request belongs to. From the second
# run on it is part of the reply-cache key (and of the in-flight sharing key): repeated runs are
# independent trials, not replays of the first. The first run keys as a single run does.
_TRIAL: ContextVar[int] = ContextVar("referee_judge_trial", default=0)


@contextlib.contextmanager
def trial_scope(index: int) -> Iterator[None]:
    """Judge requests made inside belong to run ``index`` (0-based) of a repeated case."""
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise ValueError(f"trial index must be a non-negative int, got {index!r}")
    token = _TRIAL.set(index)
    try:
        yield
    finally:
        _TRIAL.reset(token)


# Whether requests are re-asks that must reach the judge itself (the reliability check asks
# a sample again to see whether the judge repeats its verdict): the reply cache is neither read
# nor written, and no in-flight request is shared, or every re-ask would repeat its original.
_FRESH: ContextVar[bool] = ContextVar("referee_judge_fresh", default=False)


@contextlib.contextmanager
def fresh_replies() -> Iterator[None]:
    """Judge requests made inside go to the judge, never to the reply cache."""
    token = _FRESH.set(True)
    try:
        yield
    finally:
        _FRESH.reset(token)


# How much of a reply that yielded no verdict is kept as evidence (after redaction).
EVIDENCE_CHARS = 300

# accept(text): whether a reply yielded what the caller asked for (a verdict, a score, the
# questions). Only accepted replies are cached or replayed from the cache.
ReplyCheck = Callable[[str], bool]


@dataclass(frozen=True)
class JudgeReply:
    text: str
    usage: TokenUsage
    cached: bool
    provider: str
    model: str
    # From sending the answered attempt to its reply (not the wait for a permit, nor retries).
    latency_s: float
    attempts: int = 1
    # The provider stopped the reply at this max_tokens: the text is cut off.
    truncated_at: int | None = None
    # The model version the provider says answered (often a dated snapshot of ``model``) and
    # OpenAI's system_fingerprint; None for a reply replayed from the cache.
    served_model: str | None = None
    system_fingerprint: str | None = None

    def unreadable(self, problem: str) -> JudgeUnavailable:
        """The error for this reply when it yielded no verdict or score (see
        ``unreadable_replies``)."""
        return unreadable_replies([self], problem)

    @property
    def excerpt(self) -> str:
        """The start of the text, secrets removed: evidence for ``details``."""
        return clip(self.text, EVIDENCE_CHARS, one_line=False)


def unreadable_replies(replies: Sequence[JudgeReply], problem: str, *,
                       owner: str | None = None) -> JudgeUnavailable:
    """The error for replies that together yielded no verdict or score.

    When the provider cut one off, the error says "judge reply truncated at max_tokens=N"
    instead of ``problem``. It carries the replies' usage (they were paid for) and, in
    ``details``, a redacted excerpt of each (``raw_reply``, or ``raw_replies`` for several).
    """
    cut = next((r for r in replies if r.truncated_at is not None), None)
    reason = (f"judge reply truncated at max_tokens={cut.truncated_at}" if cut is not None
              else clip(problem, EVIDENCE_CHARS))
    if owner:
        reason = f"{owner}: {reason}"
    details: dict[str, Any] = (
        {"raw_reply": replies[0].excerpt} if len(replies) == 1
        else {"raw_replies": [r.excerpt for r in replies]})
    if cut is not None:
        details["truncated_at_max_tokens"] = cut.truncated_at
    first = replies[0] if replies else None
    return JudgeUnavailable(reason, provider=first.provider if first else None,
                            model=first.model if first else None,
                            token_usage=TokenUsage.total([r.usage for r in replies]),
                            details=details)


def _accepted(text: str, accept: ReplyCheck | None) -> bool:
    if not text.strip():
        # An empty reply is a glitch more often than an answer; replaying it forever would
        # turn one bad moment into a permanent UNKNOWN.
        return False
    if accept is None:
        return True
    try:
        return bool(accept(text))
    except Exception:  # a check that cannot read the reply has not accepted it
        return False


class _Endpoint:
    """Everything shared by the judges of one (provider, base_url, credentials)."""

    def __init__(self, provider: str, base_url: str, api_key: str | None,
                 settings: BudgetSettings, identity: EndpointIdentity) -> None:
        self.provider = provider
        self.base_url = base_url
        self._api_key = api_key
        if api_key != PLACEHOLDER_API_KEY:
            remember_secret(api_key)
        self.limiter = new_budget(settings, identity)
        self._lock = threading.Lock()
        # An async SDK client's connection pool belongs to the loop that opened it, so each loop
        # gets its own client. The client refers back to its loop, so the weak key alone never
        # frees it: loops that referee runs close their clients (close_loop_clients).
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary())
        self.clients_created = 0
        # The (loop, client) pair asked for last. It holds the loop, so a closed loop's client
        # stays reachable until the next loop asks (close_loop_clients detaches it first).
        self._last: tuple[asyncio.AbstractEventLoop, Any] | None = None

    @property
    def api_key(self) -> str | None:
        return self._api_key

    def client(self, cfg: JudgeConfig) -> Any:
        loop = asyncio.get_running_loop()
        last = self._last
        if last is not None and last[0] is loop:
            return last[1]  # every request asks; nearly always from the loop before it
        with self._lock:
            client = self._clients.get(loop)
            if client is None:
                try:
                    client = adapter_for(self.provider).make_client(self.base_url, self._api_key,
                                                                    cfg)
                except ProviderSetupError:
                    raise
                except Exception as exc:  # e.g. Vertex AI without a project or location
                    raise ProviderSetupError(
                        f"could not create the {self.provider} client: {exc}") from exc
                self._clients[loop] = client
                self.clients_created += 1
            self._last = (loop, client)
            return client

    @property
    def open_clients(self) -> int:
        with self._lock:
            return len(self._clients)

    def detach_client(self, loop: asyncio.AbstractEventLoop) -> Any:
        with self._lock:
            if self._last is not None and self._last[0] is loop:
                self._last = None
            return self._clients.pop(loop, None)


_endpoints: dict[tuple[str, str, str], _Endpoint] = {}
_endpoints_lock = threading.Lock()

# Cached requests in flight, per event loop: an identical request made while the first is
# still waiting for its reply shares that reply instead of paying for it again.
_flights: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Future[str]]] = (
    weakref.WeakKeyDictionary())


async def close_loop_clients() -> None:
    """Close the SDK clients this event loop opened, before the loop that owns them ends.

    Called by referee's own loops (``run_sync``, the CLI); a loop that is still running keeps
    its clients for reuse. Without it each finished loop leaves its sockets to the garbage
    collector (``ResourceWarning: unclosed transport``).
    """
    flush_caches()  # the run is over: its replies belong in the cache file now
    loop = asyncio.get_running_loop()
    with _endpoints_lock:
        endpoints = list(_endpoints.values())
    for endpoint in endpoints:
        client = endpoint.detach_client(loop)
        if client is None:
            continue
        # google-genai closes its async transport through client.aio; the others on the client.
        close = getattr(getattr(client, "aio", None), "aclose", None) or getattr(client, "close", None)
        if close is None:
            continue
        try:
            result = close()
            if asyncio.iscoroutine(result):
                await result
        except Exception as exc:  # a failed close must not turn a finished run into an error
            logger.debug("closing the %s client failed: %s", endpoint.provider, exc)


def _endpoint_for(cfg: JudgeConfig) -> _Endpoint:
    adapter = adapter_for(cfg.provider)
    base_url, api_key = adapter.credentials(cfg)
    fingerprint = hashlib.sha256((api_key or "").encode("utf-8")).hexdigest()
    key = (cfg.provider, base_url, fingerprint)
    with _endpoints_lock:
        endpoint = _endpoints.get(key)
        settings = _budget_settings(cfg, base_url)
        if endpoint is None:
            endpoint = _endpoints[key] = _Endpoint(cfg.provider, base_url, api_key, settings,
                                                   EndpointIdentity(*key))
        elif settings.explicit and settings != endpoint.limiter.settings:
            # The last explicit setting for an endpoint wins; a config that sets nothing keeps it.
            endpoint.limiter.configure(settings)
    return endpoint


def _budget_settings(cfg: JudgeConfig, base_url: str) -> BudgetSettings:
    return BudgetSettings(max_concurrency=cfg.effective_max_concurrency,
                          pinned=cfg.concurrency_pinned, rpm=cfg.effective_rpm,
                          tpm=cfg.effective_tpm,
                          self_hosted=not is_provider_endpoint(cfg.provider, base_url))


# A short verdict's worth of reply, reserved before the call; the reply's usage corrects it.
REPLY_TOKENS_RESERVED = 16


def estimate_request_tokens(request: JudgeRequest) -> int:
    """The tokens a request is expected to bill, for the tpm budget before the call: its system
    text and prompt by the one estimate (``estimate_tokens``, four characters a token), the
    text between its media (a pairwise judge's labels) likewise, its media as each provider
    counts them, plus a short answer."""
    between = sum(estimate_tokens(part.text) for part in request.parts
                  if isinstance(part, TextPart))
    return (estimate_tokens(request.system or "") + estimate_tokens(request.prompt) + between
            + request.media_tokens + min(request.max_tokens, REPLY_TOKENS_RESERVED))


def _detail(exc: BaseException) -> str:
    """A short, single-line excerpt of the provider's own error text, secrets removed first."""
    return clip(str(exc), 200)


class Judge:
    """A configured judge. Cheap to create; clients and limits live in the shared endpoint."""

    def __init__(self, config: JudgeConfig) -> None:
        self.config = config
        self._setup_error: ProviderSetupError | None = None
        self._endpoint: _Endpoint | None = None
        # The reply cache, found on this judge's first call: each lookup reads the
        # environment and the working directory, per request the dearest part of a cache hit.
        self._reply_cache: JudgeCache | None | bool = False
        try:
            self._endpoint = _endpoint_for(config)
        except ProviderSetupError as exc:
            # Reported on the first call, as JudgeUnavailable, like any other outage.
            self._setup_error = exc

    @property
    def provider(self) -> str:
        return self.config.provider

    @property
    def model(self) -> str:
        return self.config.model

    @property
    def max_concurrency(self) -> int:
        """The endpoint's pinned limit, or the ceiling its adaptive limit may grow to."""
        if self._endpoint is None:
            return self.config.effective_max_concurrency
        return self._endpoint.limiter.settings.max_concurrency

    @property
    def concurrency_limit(self) -> int:
        """Requests the endpoint lets into flight right now."""
        return self._endpoint.limiter.limit if self._endpoint else self.config.effective_max_concurrency

    def _cache_enabled(self) -> bool:
        if self.config.cache is not None:
            return self.config.cache
        env = cache_enabled_by_env()
        return DEFAULT_CACHE_ENABLED if env is None else env

    def _policy(self) -> _retry.RetryPolicy:
        return _retry.RetryPolicy(max_retries=self.config.effective_max_retries,
                                  max_total_s=self.config.effective_retry_max_total_s)

    def _unavailable(self, message: str, cause: BaseException | None) -> JudgeUnavailable:
        # The key in use (from the config, the environment or a custom adapter) is a
        # remembered secret, so redact() removes it along with any key-shaped token.
        text = redact(f"judge {self.provider}/{self.model} unavailable: {message}")
        return JudgeUnavailable(text, provider=self.provider, model=self.model, cause=cause)

    async def complete(self, prompt: str, *, system: str | None = None, json_mode: bool = False,
                       sample_index: int = 0, temperature: float | None = None,
                       max_tokens: int | None = None, prompt_prefix: str = "",
                       cache_group: str | None = None,
                       json_schema: Mapping[str, Any] | None = None,
                       accept: ReplyCheck | None = None,
                       parts: Sequence[Any] | None = None) -> JudgeReply:
        """One judge reply; raises JudgeUnavailable when the provider cannot give one.

        The user message is ``prompt_prefix + prompt``. Give the part that sibling requests
        share (a case's material) as ``prompt_prefix``: when it is long enough for the
        provider's prompt cache, it is marked for caching (Anthropic ``cache_control``, OpenAI
        ``prompt_cache_key=cache_group``) and the first request with it goes before its
        siblings, so that they find it cached.

        ``json_schema`` (a JSON schema of the reply object; implies ``json_mode``) is sent as the
        provider's structured output where ``sends_reply_schema`` says so (OpenAI-compatible
        servers by default; OpenAI and Gemini with ``structured_output=True``); the caller
        still reads the reply as text, so a server that ignores the schema is read as before.

        ``accept(text)`` says whether a reply yielded a verdict or score; the caller, which
        interprets the reply, decides. Only such replies are cached, and a cached reply it does
        not accept is asked again. Empty, cut-off (``truncated_at``) and non-text replies are
        never cached; a non-text reply raises JudgeUnavailable with its usage.

        ``parts`` (images and PDFs, ``referee.content``) are shown with the prompt; left out,
        a request made while a case is scored shows that case's (``case_parts``). They are
        fitted to the provider, refused in one line (ContentError) for a judge without
        vision, estimated for the tpm budget and keyed in the reply cache by content hash.
        """
        if not isinstance(prompt, str):
            raise TypeError(f"prompt must be a str, got {type(prompt).__name__}")
        if not isinstance(sample_index, int) or sample_index < 0:
            raise ValueError(f"sample_index must be a non-negative int, got {sample_index!r}")
        if self._setup_error is not None or self._endpoint is None:
            raise self._unavailable(str(self._setup_error), self._setup_error)
        # A lone surrogate (half of a cut emoji in a model's output) has no UTF-8 form: the
        # request could not be keyed or sent. The judge sees U+FFFD, as the stored run does.
        prompt, prompt_prefix = without_surrogates(prompt), without_surrogates(prompt_prefix)
        system = None if system is None else without_surrogates(system)
        cfg = self.config
        cacheable = bool(prompt_prefix) and worth_caching(cfg.provider, cfg.model,
                                                          (system or "") + prompt_prefix)
        json_mode = json_mode or json_schema is not None
        if json_schema is not None and not sends_reply_schema(cfg, self._endpoint.base_url):
            json_schema = None
        media = tuple(case_parts() if parts is None else parts)
        content_rules = self._content_rules(media) if media else None
        temperature = cfg.effective_temperature if temperature is None else temperature
        max_tokens = cfg.effective_max_tokens if max_tokens is None else max_tokens
        if self._reply_cache is False:
            self._reply_cache = get_cache(cfg.cache_path) if self._cache_enabled() else None
        cache = (self._reply_cache if isinstance(self._reply_cache, JudgeCache)
                 and not _FRESH.get() else None)
        key = ""
        flights: dict[str, asyncio.Future[str]] = {}
        batch = cfg.effective_batch_api
        if cache is not None or batch:
            key = cache_key(provider=cfg.provider, model=cfg.model, base_url=self._endpoint.base_url,
                            api_style=cfg.api_style, prompt=prompt_prefix + prompt, system=system,
                            json_mode=json_mode, temperature=temperature,
                            max_tokens=max_tokens, sample_index=sample_index,
                            **({"trial": trial} if (trial := _TRIAL.get()) else {}),
                            # The original parts and how they will be fitted: a hit fits nothing.
                            **({"parts": list(reply_cache_parts(content_rules, media))}
                               if content_rules else {}),
                            **({"json_schema": schema_text(json_schema)}
                               if json_schema is not None else {}))
        if cache is not None:
            hit = cache.get(key)
            if hit is not None and _accepted(hit.text, accept):
                return self._cached_reply(hit.text)
            flights = _loop_flights()
            if key in flights:
                shared = await _join_flight(flights, key)
                if shared is not None:
                    return self._cached_reply(shared)
        flight = _start_flight(flights, key) if cache is not None else None
        try:
            # Fitted only now that no cached reply answers it (batch items are always sent).
            prepared = await self._prepared(content_rules, media) if content_rules else None
            request = JudgeRequest(
                parts=prepared.parts if prepared else (),
                media_tokens=prepared.media_tokens if prepared else 0,
                model=cfg.model, prompt=prompt_prefix + prompt, system=system,
                json_mode=json_mode, json_schema=json_schema, temperature=temperature,
                max_tokens=max_tokens, timeout=cfg.effective_timeout, api_style=cfg.api_style,
                prompt_prefix=prompt_prefix, cache_breakpoint=cacheable,
                cache_key=cache_group if cacheable else None)
            if batch:  # batch seam: referee/judge/batch sends it in a provider batch
                raw, attempts, latency, batch = await self._call_by_batch(request, key)
            elif cacheable:
                # A reply schema is part of the provider's cached prefix (before the system
                # text), so requests with another schema are not this prefix's siblings.
                async with warm_up(cfg.provider, cfg.model, self._endpoint.base_url,
                                   "" if json_schema is None else schema_text(json_schema),
                                   system or "", prompt_prefix):
                    raw, attempts, latency = await self._call_with_retries(request)
            else:
                raw, attempts, latency = await self._call_with_retries(request)
        except BaseException:
            if flight is not None:
                _end_flight(flights, key, flight, None)  # those waiting make their own attempt
            raise
        reply = JudgeReply(text=raw.text, usage=usage_for(
                               cfg.model, raw.input_tokens, raw.output_tokens,
                               cached_input_tokens=raw.cached_input_tokens,
                               cache_write_tokens=raw.cache_write_tokens,
                               batch_provider=cfg.provider if batch else None),
                           cached=False, provider=cfg.provider, model=cfg.model,
                           latency_s=latency, attempts=attempts,
                           truncated_at=max_tokens if raw.truncated else None,
                           served_model=raw.model or None,
                           system_fingerprint=raw.system_fingerprint)
        note_served(f"{cfg.provider}/{cfg.model}", reply.served_model, reply.system_fingerprint)
        usable = (raw.content_error is None and not raw.truncated
                  and _accepted(raw.text, accept))
        if cache is not None and usable:
            cache.put(key, provider=cfg.provider, model=cfg.model, text=raw.text,
                      input_tokens=raw.input_tokens, output_tokens=raw.output_tokens,
                      endpoint=self._endpoint.base_url)
        if flight is not None:
            # Those waiting on a reply that yielded nothing make their own attempt.
            _end_flight(flights, key, flight, raw.text if usable else None)
        if raw.content_error is not None:
            raise reply.unreadable(raw.content_error)
        return reply

    def _content_rules(self, media: tuple[Any, ...]) -> ContentRules:
        """This judge's provider's rules for ``media``; ContentError (one line) when the
        provider names none or the model takes text only, before any cache is looked up."""
        cfg = self.config
        rules = rules_for(cfg.provider).content_rules
        if rules is None:
            raise ContentError(f"judge {cfg.provider}/{cfg.model} cannot be sent images or "
                               "PDFs: its provider adapter names no content rules")
        require_vision(rules, cfg.model, media)
        return rules

    async def _prepared(self, rules: ContentRules, media: tuple[Any, ...]) -> PreparedContent:
        """The images and PDFs as this judge's provider takes them; fitting decodes and
        re-encodes images, so it runs off the event loop (kept per content: a case's later
        requests find it done)."""
        cfg = self.config
        return await asyncio.to_thread(prepare_content, rules, cfg.api_style, cfg.model, media)

    def _cached_reply(self, text: str) -> JudgeReply:
        cfg = self.config
        return JudgeReply(text=text, usage=usage_for(cfg.model, 0, 0, cached=True), cached=True,
                          provider=cfg.provider, model=cfg.model, latency_s=0.0, attempts=0)

    async def _call_by_batch(self, request: JudgeRequest, key: str
                             ) -> tuple[RawReply, int, float, bool]:
        """The batch seam: one request answered through the provider's batch API
        (referee/judge/batch), which retries in later batches itself; the last field says
        whether the batch answered it. A request no batch could answer is a judge error, or,
        with ``batch_fallback="online"``, asked online."""
        from referee.judge.batch import BatchRequestFailed, call_by_batch

        # A re-ask past the cache (the reliability check) is a request of its own.
        batch_key = f"{key}|fresh" if _FRESH.get() else key
        try:
            raw, latency = await call_by_batch(self._endpoint, self.config, request, batch_key)
            return raw, 1, latency, True
        except BatchRequestFailed as exc:
            failure = self._unavailable(f"batch API: {exc}", exc)
        except ProviderSetupError as exc:
            raise self._unavailable(str(exc), exc) from None
        except Exception as exc:
            if not _retry.is_provider_failure(exc):
                raise
            failure = self._unavailable(f"batch API: {_retry.classify(exc).summary}: "
                                        f"{_detail(exc)}", exc)
        if self.config.batch_fallback != "online":
            raise failure from None
        logger.info("judge %s/%s: %s; asked online (batch_fallback='online')", self.provider,
                    self.model, failure)
        raw, attempts, latency = await self._call_with_retries(request)
        return raw, attempts, latency, False

    @staticmethod
    async def _wait_out_the_floor(endpoint_pause_s: float) -> None:
        """A refused request waits at least ``RETRY_AFTER_FLOOR_S`` before its next attempt,
        whatever the server asked: what the endpoint's shared pause leaves of it."""
        if endpoint_pause_s < _retry.RETRY_AFTER_FLOOR_S:
            await _retry.sleep(_retry.RETRY_AFTER_FLOOR_S - endpoint_pause_s)

    async def _call_with_retries(self, request: JudgeRequest) -> tuple[RawReply, int, float]:
        """Attempts until a reply: (reply, attempts, seconds from sending the answered attempt
        to its reply; the wait for a permit is not the provider's latency).

        A 429 sets the pace: the endpoint pauses as the server asks, the refused request at
        least ``RETRY_AFTER_FLOOR_S``, and it waits its turn again, as long as its refused attempts and their pauses add up
        to at most ``rate_limit_wait_s``; other failures get
        ``max_retries`` retries within ``retry_max_total_s`` of the first, and a timeout at
        temperature 0 only ``DETERMINISTIC_TIMEOUT_RETRIES``."""
        assert self._endpoint is not None
        budget = self._endpoint.limiter
        adapter = adapter_for(self.provider)
        policy: _retry.RetryPolicy | None = None  # built on the first failure
        tokens = estimate_request_tokens(request)
        rate_limit_budget = self.config.effective_rate_limit_wait_s
        paused_s = refused_s = 0.0
        outage_deadline: float | None = None
        attempt = failures = timeouts = 0
        while True:
            attempt += 1
            permit = await budget.lease(tokens)
            sent = time.monotonic()
            try:
                client = self._endpoint.client(self.config)
                # Timed from here: building a loop's client (on a cold process, the SDK's
                # import: seconds) is not the provider's latency; counted as such, it ended
                # slow start at the starting window.
                sent = time.monotonic()
                # An SDK's own timeouts bound each read, not the attempt; this bound also covers
                # a stalled body. The direct path bounds the whole attempt itself.
                if bounds_its_attempts(client):
                    raw = await adapter.call(client, request)
                else:
                    raw = await _within(adapter.call(client, request), request.timeout + 5.0)
            except asyncio.CancelledError:
                budget.settle(permit, Outcome("cancelled"))
                raise
            except ProviderSetupError as exc:
                budget.settle(permit, Outcome("failed"))
                raise self._unavailable(str(exc), exc) from None
            except Exception as exc:
                if not _retry.is_provider_failure(exc):
                    budget.settle(permit, Outcome("failed"))
                    raise  # a bug, not an outage: it must surface as an evaluator error
                info = rules_for(self.provider).classify(exc)  # the provider's own reading
                budget.settle(permit, _failure_outcome(info, time.monotonic() - sent))
                detail = _detail(exc)
                summary = f"{info.summary}: {detail}" if detail else info.summary
                if not info.retryable:
                    # from None: a chained traceback would print the provider's own,
                    # unredacted text (which may echo the key); it stays on .cause.
                    raise self._unavailable(
                        f"{summary}, not retryable{_api_style_hint(request, info)}",
                        exc) from None
                now = time.monotonic()
                if info.rate_limited:
                    # The endpoint has paused (settle); the next lease waits it out. The budget
                    # is about the provider, not the wait for a slot behind other requests: it
                    # counts the pauses, and by the clock the refused attempts' round trips.
                    endpoint_wait = budget.paused_for()
                    wait = max(endpoint_wait, _retry.server_pause(info.retry_after or 0.0))
                    refused_s += now - sent
                    if (paused_s + wait > rate_limit_budget or paused_s + refused_s + wait
                            > rate_limit_budget + _retry.RATE_LIMIT_CLOCK_ALLOWANCE_S):
                        raise self._unavailable(
                            f"{summary}: still rate limited after {attempt} attempt(s), "
                            f"{paused_s:.1f}s of pauses and {refused_s:.1f}s of refused "
                            f"attempts; rate-limit wait budget ({rate_limit_budget:g}s) "
                            "exhausted", exc) from None
                    paused_s += wait
                    # INFO, not WARNING: being paced is routine and a run may see hundreds.
                    logger.info("judge %s/%s: %s; endpoint paused %.1fs", self.provider,
                                self.model, info.summary, wait)
                    await self._wait_out_the_floor(endpoint_wait)
                    continue
                failures += 1
                timeouts += info.timed_out
                if policy is None:
                    policy = self._policy()
                if outage_deadline is None:
                    outage_deadline = now + policy.max_total_s
                delay = policy.delay(failures - 1, info.retry_after)
                out_of_attempts = failures > policy.max_retries
                out_of_time = now + delay > outage_deadline
                if (info.timed_out and request.temperature == 0
                        and timeouts > _retry.DETERMINISTIC_TIMEOUT_RETRIES):
                    raise self._unavailable(
                        f"{summary} after {attempt} attempt(s): a deterministic request "
                        f"(temperature 0) that timed out is retried "
                        f"{_retry.DETERMINISTIC_TIMEOUT_RETRIES} time(s) only; raise the "
                        f"timeout ({request.timeout:g}s) or lower max_tokens "
                        f"({request.max_tokens})", exc) from None
                if out_of_attempts or out_of_time:
                    bound = "attempts" if out_of_attempts else "retry time budget"
                    raise self._unavailable(
                        f"{summary} after {attempt} attempt(s), {bound} exhausted", exc) from None
                logger.info("judge %s/%s: %s; retry %d/%d in %.1fs", self.provider,
                            self.model, info.summary, failures, policy.max_retries, delay)
                if info.overloaded and info.retry_after is not None:
                    # The endpoint's pause is waited in the lease; the floor is this request's.
                    await self._wait_out_the_floor(budget.paused_for())
                else:
                    await _retry.sleep(delay)
                continue
            latency = time.monotonic() - sent
            budget.settle(permit, Outcome(
                "ok", latency_s=latency,
                tokens=raw.input_tokens + raw.output_tokens or None,
                headers=read_rate_limit_headers(raw.headers) if raw.headers is not None else None))
            return raw, attempt, latency


if sys.version_info >= (3, 11):
    async def _within(call: Awaitable[T], seconds: float) -> T:
        """``call``, or TimeoutError after ``seconds``. A deadline on the current task, where
        ``wait_for`` wraps the call in a task of its own: one task fewer per judge request."""
        async with asyncio.timeout(seconds):
            return await call
else:  # Python 3.10: no asyncio.timeout
    async def _within(call: Awaitable[T], seconds: float) -> T:
        return await asyncio.wait_for(call, timeout=seconds)


def _api_style_hint(request: JudgeRequest, info: _retry.FailureInfo) -> str:
    """What to change when a server has no Responses API (llama-cpp-python answers 404)."""
    if request.api_style != "responses" or info.status not in (404, 405):
        return ""
    return ("; the endpoint has no Responses API (/responses): call it through Chat "
            "Completions with api_style='chat' (CriterionConfig or JudgeConfig)")


def _failure_outcome(info: _retry.FailureInfo, latency_s: float) -> Outcome:
    kind: OutcomeKind = ("rate_limited" if info.rate_limited else "overloaded" if info.overloaded
                         else "timed_out" if info.timed_out else "failed")
    headers = read_rate_limit_headers(info.headers) if info.headers else None
    # Only pushback pauses the endpoint; another failure's Retry-After is that request's own.
    retry_after = None
    if kind in ("rate_limited", "overloaded") and info.retry_after is not None:
        retry_after = _retry.endpoint_pause(info.retry_after)
    return Outcome(kind, latency_s=latency_s, retry_after=retry_after, headers=headers)


def _loop_flights() -> dict[str, asyncio.Future[str]]:
    loop = asyncio.get_running_loop()
    flights = _flights.get(loop)
    if flights is None:
        flights = _flights[loop] = {}
    return flights


async def _join_flight(flights: dict[str, asyncio.Future[str]], key: str) -> str | None:
    """The reply of an identical request already in flight, or None (none, or it failed)."""
    flight = flights.get(key)
    if flight is None:
        return None
    try:
        # shield: this caller giving up (a case timeout) must not cancel the other's request.
        return await asyncio.shield(flight)
    except asyncio.CancelledError:
        if flight.cancelled():
            return None  # the first request failed or was cancelled: try on our own
        raise


def _start_flight(flights: dict[str, asyncio.Future[str]], key: str) -> asyncio.Future[str]:
    flight: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    flights[key] = flight
    return flight


def _end_flight(flights: dict[str, asyncio.Future[str]], key: str, flight: asyncio.Future[str],
                text: str | None) -> None:
    if flights.get(key) is flight:
        del flights[key]
    if text is None:
        flight.cancel()
    else:
        flight.set_result(text)


def get_judge(config: JudgeConfig | None = None) -> Judge:
    """A judge for ``config`` (resolved through the multivon-style API's order when None).

    Judges of the same (provider, base_url, credentials) share one client per event loop and
    one concurrency limit.
    """
    from referee.judge.config import resolve_judge_config

    return Judge(resolve_judge_config(None) if config is None else config)
