"""The Judge: one call path for every criterion, with shared clients, limits, retries and cache."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

from referee.errors import JudgeUnavailable
from referee.judge import retry as _retry
from referee.judge.cache import cache_enabled_by_env, cache_key, get_cache
from referee.judge.caching import warm_up, worth_caching
from referee.judge.config import JudgeConfig
from referee.judge.limiter import EndpointLimiter
from referee.judge.pricing import usage_for
from referee.judge.providers import JudgeRequest, ProviderSetupError, RawReply, adapter_for
from referee.usage import TokenUsage

logger = logging.getLogger("referee.judge")

# Caching is on unless turned off: a cache hit needs the exact same provider, model, endpoint,
# prompt, parameters and sample index, so it only ever replays an identical request.
DEFAULT_CACHE_ENABLED = True


@dataclass(frozen=True)
class JudgeReply:
    text: str
    usage: TokenUsage
    cached: bool
    provider: str
    model: str
    latency_s: float
    attempts: int = 1


class _Endpoint:
    """Everything shared by the judges of one (provider, base_url, credentials)."""

    def __init__(self, provider: str, base_url: str, api_key: str | None, limit: int) -> None:
        self.provider = provider
        self.base_url = base_url
        self._api_key = api_key
        self.limiter = EndpointLimiter(limit)
        self._lock = threading.Lock()
        # An async SDK client's connection pool belongs to the loop that opened it, so each loop
        # gets its own client. The client refers back to its loop, so the weak key alone never
        # frees it: loops that referee runs close their clients (close_loop_clients).
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary())
        self.clients_created = 0

    @property
    def api_key(self) -> str | None:
        return self._api_key

    def client(self, cfg: JudgeConfig) -> Any:
        loop = asyncio.get_running_loop()
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
            return client

    @property
    def open_clients(self) -> int:
        with self._lock:
            return len(self._clients)

    def detach_client(self, loop: asyncio.AbstractEventLoop) -> Any:
        with self._lock:
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
        if endpoint is None:
            endpoint = _endpoints[key] = _Endpoint(cfg.provider, base_url, api_key,
                                                   cfg.effective_max_concurrency)
        elif cfg.max_concurrency is not None and cfg.max_concurrency != endpoint.limiter.limit:
            endpoint.limiter.set_limit(cfg.max_concurrency)
    return endpoint


# Key-shaped tokens (OpenAI/Anthropic "sk-...", Google "AIza...") in provider error text.
_KEY_SHAPED = re.compile(r"\b(?:sk-[A-Za-z0-9_\-]{8,}|AIza[A-Za-z0-9_\-]{20,})")


def _redact(text: str, secret: str | None) -> str:
    if secret and len(secret) >= 4:
        text = text.replace(secret, "***")
    return _KEY_SHAPED.sub("***", text)


def _detail(exc: BaseException) -> str:
    """A short, single-line excerpt of the provider's own error text."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:197] + "..."


class Judge:
    """A configured judge. Cheap to create; clients and limits live in the shared endpoint."""

    def __init__(self, config: JudgeConfig) -> None:
        self.config = config
        self._setup_error: ProviderSetupError | None = None
        self._endpoint: _Endpoint | None = None
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
        text = f"judge {self.provider}/{self.model} unavailable: {message}"
        # The key in use may have come from the environment, not the config: redact both.
        for secret in (self.config.api_key_value(),
                       self._endpoint.api_key if self._endpoint is not None else None):
            text = _redact(text, secret)
        return JudgeUnavailable(text, provider=self.provider, model=self.model, cause=cause)

    async def complete(self, prompt: str, *, system: str | None = None, json_mode: bool = False,
                       sample_index: int = 0, temperature: float | None = None,
                       max_tokens: int | None = None, prompt_prefix: str = "",
                       cache_group: str | None = None) -> JudgeReply:
        """One judge reply; raises JudgeUnavailable when the provider cannot give one.

        The user message is ``prompt_prefix + prompt``. Give the part that sibling requests
        share (a case's material) as ``prompt_prefix``: when it is long enough for the
        provider's prompt cache, it is marked for caching (Anthropic ``cache_control``, OpenAI
        ``prompt_cache_key=cache_group``) and the first request with it goes before its
        siblings, so that they find it cached.
        """
        if not isinstance(prompt, str):
            raise TypeError(f"prompt must be a str, got {type(prompt).__name__}")
        if not isinstance(sample_index, int) or sample_index < 0:
            raise ValueError(f"sample_index must be a non-negative int, got {sample_index!r}")
        if self._setup_error is not None or self._endpoint is None:
            raise self._unavailable(str(self._setup_error), self._setup_error)
        cfg = self.config
        cacheable = bool(prompt_prefix) and worth_caching(cfg.provider, cfg.model,
                                                          (system or "") + prompt_prefix)
        request = JudgeRequest(
            model=cfg.model, prompt=prompt_prefix + prompt, system=system, json_mode=json_mode,
            temperature=cfg.effective_temperature if temperature is None else temperature,
            max_tokens=cfg.effective_max_tokens if max_tokens is None else max_tokens,
            timeout=cfg.effective_timeout, api_style=cfg.api_style,
            prompt_prefix=prompt_prefix, cache_breakpoint=cacheable,
            cache_key=cache_group if cacheable else None)
        cache = get_cache(cfg.cache_path) if self._cache_enabled() else None
        key = ""
        if cache is not None:
            key = cache_key(provider=cfg.provider, model=cfg.model, base_url=self._endpoint.base_url,
                            api_style=cfg.api_style, prompt=prompt_prefix + prompt, system=system,
                            json_mode=json_mode, temperature=request.temperature,
                            max_tokens=request.max_tokens, sample_index=sample_index)
            hit = cache.get(key)
            if hit is not None:
                return self._cached_reply(hit.text)
            shared = await _join_flight(key)
            if shared is not None:
                return self._cached_reply(shared)
        flight = _start_flight(key) if cache is not None else None
        started = time.monotonic()
        try:
            turn = (warm_up(cfg.provider, cfg.model, self._endpoint.base_url, system or "",
                             prompt_prefix) if cacheable else contextlib.nullcontext())
            async with turn:
                raw, attempts = await self._call_with_retries(request)
        except BaseException:
            if flight is not None:
                _end_flight(key, flight, None)  # those waiting make their own attempt
            raise
        latency = time.monotonic() - started
        # An empty reply is a glitch more often than an answer; replaying it forever would turn
        # one bad moment into a permanent UNKNOWN.
        if cache is not None and raw.text.strip():
            cache.put(key, provider=cfg.provider, model=cfg.model, text=raw.text,
                      input_tokens=raw.input_tokens, output_tokens=raw.output_tokens)
        if flight is not None:
            _end_flight(key, flight, raw.text)
        return JudgeReply(text=raw.text, usage=usage_for(
                              cfg.model, raw.input_tokens, raw.output_tokens,
                              cached_input_tokens=raw.cached_input_tokens,
                              cache_write_tokens=raw.cache_write_tokens),
                          cached=False, provider=cfg.provider, model=cfg.model,
                          latency_s=latency, attempts=attempts)

    def _cached_reply(self, text: str) -> JudgeReply:
        cfg = self.config
        return JudgeReply(text=text, usage=usage_for(cfg.model, 0, 0, cached=True), cached=True,
                          provider=cfg.provider, model=cfg.model, latency_s=0.0, attempts=0)

    async def _call_with_retries(self, request: JudgeRequest) -> tuple[RawReply, int]:
        assert self._endpoint is not None
        endpoint = self._endpoint
        adapter = adapter_for(self.provider)
        policy = self._policy()
        deadline = time.monotonic() + policy.max_total_s
        attempt = 0
        while True:
            attempt += 1
            try:
                async with endpoint.limiter:
                    client = endpoint.client(self.config)
                    # The SDK enforces the timeout too; this bound also covers a stalled body.
                    raw = await asyncio.wait_for(adapter.call(client, request),
                                                 timeout=request.timeout + 5.0)
                return raw, attempt
            except asyncio.CancelledError:
                raise
            except ProviderSetupError as exc:
                raise self._unavailable(str(exc), exc) from None
            except Exception as exc:
                if not _retry.is_provider_failure(exc):
                    raise  # a bug, not an outage: it must surface as an evaluator error
                info = _retry.classify(exc)
                detail = _detail(exc)
                summary = f"{info.summary}: {detail}" if detail else info.summary
                if not info.retryable:
                    # from None: a chained traceback would print the provider's own,
                    # unredacted text (which may echo the key); it stays on .cause.
                    raise self._unavailable(f"{summary}, not retryable", exc) from None
                delay = policy.delay(attempt - 1, info.retry_after)
                out_of_attempts = attempt > policy.max_retries
                out_of_time = time.monotonic() + delay > deadline
                if out_of_attempts or out_of_time:
                    bound = "attempts" if out_of_attempts else "retry time budget"
                    raise self._unavailable(
                        f"{summary} after {attempt} attempt(s), {bound} exhausted", exc) from None
                # INFO, not WARNING: a handled retry is routine and a run may see hundreds.
                logger.info("judge %s/%s: %s; retry %d/%d in %.1fs", self.provider,
                               self.model, info.summary, attempt, policy.max_retries, delay)
            await _retry.sleep(delay)


def _loop_flights() -> dict[str, asyncio.Future[str]]:
    loop = asyncio.get_running_loop()
    flights = _flights.get(loop)
    if flights is None:
        flights = _flights[loop] = {}
    return flights


async def _join_flight(key: str) -> str | None:
    """The reply of an identical request already in flight, or None (none, or it failed)."""
    flight = _loop_flights().get(key)
    if flight is None:
        return None
    try:
        # shield: this caller giving up (a case timeout) must not cancel the other's request.
        return await asyncio.shield(flight)
    except asyncio.CancelledError:
        if flight.cancelled():
            return None  # the first request failed or was cancelled: try on our own
        raise


def _start_flight(key: str) -> asyncio.Future[str]:
    flight: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    _loop_flights()[key] = flight
    return flight


def _end_flight(key: str, flight: asyncio.Future[str], text: str | None) -> None:
    flights = _loop_flights()
    if flights.get(key) is flight:
        del flights[key]
    if text is None:
        flight.cancel()
    else:
        flight.set_result(text)


def get_judge(config: JudgeConfig | None = None) -> Judge:
    """A judge for ``config`` (resolved through document 001's order when None).

    Judges of the same (provider, base_url, credentials) share one client per event loop and
    one concurrency limit.
    """
    from referee.judge.config import resolve_judge_config

    return Judge(resolve_judge_config(None) if config is None else config)
