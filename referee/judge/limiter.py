"""How many judge requests an endpoint may have in flight, and when the next one may start.

Each endpoint (provider, base URL, credentials) has one budget, shared by every judge, event loop
and thread that calls it. A request leases a permit before it is sent and settles it with what it
learned afterwards; the budget then:

* adapts the number of requests in flight (unless the user pinned it): it starts low, doubles
  while replies are healthy and the slots are all in use, then grows by one per round trip, stops
  growing when latency climbs well above its floor (unless a known pace needs more requests in
  flight at that latency), and halves on a 429 or 503;
* pauses the whole endpoint when one request is told to wait (Retry-After), so the requests of an
  endpoint do not each rediscover the limit;
* paces starts with token buckets for requests and tokens per minute, set by the user
  (``JudgeConfig(rpm=..., tpm=...)``) or learned from the rate-limit headers the provider sends,
  and kept in step with the ``remaining`` counts those headers report, so it slows down before
  the provider has to answer 429.

``EndpointBudget`` is the seam for budgets held elsewhere (one per cluster rather than per
process): anything with ``lease``/``settle`` can replace the local one (``set_budget_factory``);
the factory learns which endpoint it builds for (``EndpointIdentity``), never its key.

The local budget must work across event loops (the engine may run on a private loop in a worker
thread while a user's own loop runs elsewhere), so it is built on a thread lock and per-waiter
futures woken on their own loop rather than on asyncio primitives bound to one loop.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import math
import random
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

# Adaptive concurrency: where it starts, how far it may grow by default, how it reacts.
INITIAL_CONCURRENCY = 8
# A self-hosted server (llama.cpp, Ollama, vLLM: a base URL that is not the provider's own API)
# answers a fixed number of requests at once (its slots) and queues the rest, where their wait
# counts against the client's timeout. Start at this many and find the slots.
SELF_HOSTED_INITIAL_CONCURRENCY = 2
# When a round trip's mean latency passes this multiple of the best round's, requests queue at
# the server: the window is cut to window x best / mean, which with a queue of requests ahead is
# the number of slots (latency grows with the requests in flight per slot).
SERVER_QUEUE_TOLERANCE = 1.3
DEFAULT_CONCURRENCY_CEILING = 64
# Growth stops while the smoothed latency is above this multiple of the recent floor: more
# requests in flight would only queue somewhere (the provider, or this process's CPU).
LATENCY_TOLERANCE = 2.0
DECREASE_FACTOR = 0.5
# A 429 without Retry-After pauses the endpoint for a backoff that doubles per repeat.
RATE_LIMIT_BACKOFF_S = 0.5
RATE_LIMIT_BACKOFF_CAP_S = 20.0
# A user-set per-minute budget may burst this many seconds' worth at once.
BUDGET_BURST_S = 1.0
# Of a provider's bucket (learned from its headers) use at most this share for bursts: the rest
# absorbs what the model of the provider's bucket gets wrong (a limit enforced over a shorter
# window, a count taken at a different moment). The ``remaining`` counts of every reply keep the
# model in step, so the reserve can be small: a half (as before) left half of every run's first
# burst unused, 0.5 s of the limit at any rate.
LEARNED_BURST_SHARE = 0.9
# Under a known pace (rpm budget or learned limit), requests in flight needed to keep that pace
# at the current latency (Little's law), times this margin: the window grows to it even while
# latency climbs, because the pace, not the window, is what protects the provider then.
PACE_WINDOW_MARGIN = 2.0

OutcomeKind = Literal["ok", "rate_limited", "overloaded", "timed_out", "failed", "cancelled"]


# --- what providers say about their limits ---------------------------------------------------

@dataclass(frozen=True)
class RateLimitHeaders:
    """One response's view of the provider's per-minute limits (None: not reported)."""

    limit_requests: float | None = None
    remaining_requests: float | None = None
    reset_requests_s: float | None = None
    limit_tokens: float | None = None
    remaining_tokens: float | None = None
    reset_tokens_s: float | None = None


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def _duration_s(value: str) -> float | None:
    """OpenAI's reset durations: ``"1s"``, ``"6m0s"``, ``"20ms"``, ``"1h2m3.5s"``, ``"0.5"``."""
    value = value.strip()
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    parts = _DURATION_PART.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        return None
    scale = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    return sum(float(number) * scale[unit] for number, unit in parts)


def _until_s(value: str, now: float | None) -> float | None:
    """Anthropic's resets are RFC 3339 instants: seconds from now until then."""
    try:
        when = datetime.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


def read_rate_limit_headers(headers: Mapping[str, str],
                            now: float | None = None) -> RateLimitHeaders | None:
    """OpenAI ``x-ratelimit-*`` or Anthropic ``anthropic-ratelimit-*`` headers, or None.

    ``headers`` is looked up by lower-case name (httpx's headers, or a lower-cased dict). For
    Anthropic the combined ``tokens`` limit is read, else the ``input-tokens`` one.
    """
    get = headers.get
    limit_requests = get("x-ratelimit-limit-requests")
    limit_tokens = get("x-ratelimit-limit-tokens")
    if limit_requests is not None or limit_tokens is not None:
        reset_requests = get("x-ratelimit-reset-requests")
        reset_tokens = get("x-ratelimit-reset-tokens")
        return RateLimitHeaders(
            limit_requests=_number(limit_requests),
            remaining_requests=_number(get("x-ratelimit-remaining-requests")),
            reset_requests_s=_duration_s(reset_requests) if reset_requests else None,
            limit_tokens=_number(limit_tokens),
            remaining_tokens=_number(get("x-ratelimit-remaining-tokens")),
            reset_tokens_s=_duration_s(reset_tokens) if reset_tokens else None)
    prefix = "anthropic-ratelimit-"
    limit_requests = get(f"{prefix}requests-limit")
    tokens = "tokens" if get(f"{prefix}tokens-limit") is not None else "input-tokens"
    limit_tokens = get(f"{prefix}{tokens}-limit")
    if limit_requests is None and limit_tokens is None:
        return None
    reset_requests = get(f"{prefix}requests-reset")
    reset_tokens = get(f"{prefix}{tokens}-reset")
    return RateLimitHeaders(
        limit_requests=_number(limit_requests),
        remaining_requests=_number(get(f"{prefix}requests-remaining")),
        reset_requests_s=_until_s(reset_requests, now) if reset_requests else None,
        limit_tokens=_number(limit_tokens),
        remaining_tokens=_number(get(f"{prefix}{tokens}-remaining")),
        reset_tokens_s=_until_s(reset_tokens, now) if reset_tokens else None)


# --- the seam ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class BudgetSettings:
    """What the user asked of an endpoint. ``pinned``: exactly ``max_concurrency`` in flight."""

    max_concurrency: int = DEFAULT_CONCURRENCY_CEILING
    pinned: bool = False
    rpm: float | None = None
    tpm: float | None = None
    # Not the provider's own API: adapt to a server's slots (SELF_HOSTED_INITIAL_CONCURRENCY).
    self_hosted: bool = False

    @property
    def explicit(self) -> bool:
        """Whether a config set anything about the endpoint's budget (or the environment did);
        the last explicit setting for an endpoint wins, and one that sets nothing keeps it."""
        return self.pinned or self.rpm is not None or self.tpm is not None


@dataclass
class Permit:
    """One leased request slot; settle it exactly once."""

    tokens: int
    leased_at: float
    request_mark: float = 0.0  # requests reserved up to and including this one
    token_mark: float = 0.0    # tokens reserved up to and including this one
    saturated: bool = False    # every slot was taken when this one was granted
    settled: bool = False


@dataclass(frozen=True)
class Outcome:
    """What a request learned. ``tokens``: the tokens it was billed, once the reply says."""

    kind: OutcomeKind
    latency_s: float = 0.0
    tokens: int | None = None
    retry_after: float | None = None
    headers: RateLimitHeaders | None = None


class EndpointBudget(Protocol):
    """Where an endpoint's permits come from."""

    @property
    def limit(self) -> int: ...

    @property
    def active(self) -> int: ...

    @property
    def settings(self) -> BudgetSettings: ...

    def configure(self, settings: BudgetSettings) -> None: ...

    def paused_for(self) -> float: ...

    async def lease(self, tokens: int) -> Permit: ...

    def settle(self, permit: Permit, outcome: Outcome) -> None: ...


@dataclass(frozen=True)
class EndpointIdentity:
    """Which endpoint a budget is for: the key appears only as its SHA-256 fingerprint."""

    provider: str
    base_url: str
    key_fingerprint: str

    @property
    def digest(self) -> str:
        """A short stable name for the endpoint (e.g. for a budget held by another process)."""
        text = "\n".join((self.provider, self.base_url, self.key_fingerprint))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


BudgetFactory = Callable[[BudgetSettings, EndpointIdentity], EndpointBudget]


def _local_budget(settings: BudgetSettings, endpoint: EndpointIdentity) -> EndpointBudget:
    return EndpointLimiter(settings)


_budget_factory: BudgetFactory = _local_budget


def set_budget_factory(factory: BudgetFactory | None) -> None:
    """Build the budgets of endpoints created from now on with ``factory`` (None: local ones)."""
    global _budget_factory
    _budget_factory = factory or _local_budget


def new_budget(settings: BudgetSettings, endpoint: EndpointIdentity) -> EndpointBudget:
    return _budget_factory(settings, endpoint)


async def _sleep(seconds: float) -> None:
    # Through the retry module, so tests that replace its sleep see pauses without waiting.
    from referee.judge import retry

    await retry.sleep(seconds)


# --- the local budget's parts ------------------------------------------------------------------

class _Slots:
    """A counting semaphore whose size can change, usable from any loop and thread."""

    def __init__(self, limit: int) -> None:
        self._lock = threading.Lock()
        self.limit = max(1, limit)
        self.active = 0
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()

    def try_acquire(self) -> bool:
        """Take a slot only if one is free and no one queues for it."""
        with self._lock:
            if self.active < self.limit and not self._waiters:
                self.active += 1
                return True
        return False

    def resize(self, limit: int) -> None:
        with self._lock:
            self.limit = max(1, limit)
            grants = self._grant_locked()
        self._dispatch(grants)

    async def acquire(self) -> bool:
        """Take a slot; True when this took the last free one (the limit is in use)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self.active < self.limit and not self._waiters:
                self.active += 1
                return self.active >= self.limit
            future: asyncio.Future[None] = loop.create_future()
            entry = (loop, future)
            self._waiters.append(entry)
        try:
            await future
        except asyncio.CancelledError:
            with self._lock:
                try:
                    self._waiters.remove(entry)
                    queued = True
                except ValueError:
                    queued = False
            if not queued and future.done() and not future.cancelled():
                self.release()  # the slot was handed over just before the cancellation landed
            raise
        return True  # it had to queue: demand exceeds the limit

    def release(self) -> None:
        with self._lock:
            self.active -= 1
            grants = self._grant_locked()
        self._dispatch(grants)

    def _grant_locked(self) -> list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]:
        grants = []
        while self._waiters and self.active < self.limit:
            loop, future = self._waiters.popleft()
            if loop.is_closed() or future.done():
                continue
            self.active += 1
            grants.append((loop, future))
        return grants

    def _dispatch(self, grants: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]) -> None:
        if not grants:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        for loop, future in grants:
            if loop is running:
                # Same loop, same thread: hand the slot over now. call_soon_threadsafe would
                # write to the loop's self-pipe (a syscall and a wake-up) for every grant.
                self._wake(future)
                continue
            try:
                loop.call_soon_threadsafe(self._wake, future)
            except RuntimeError:  # the loop closed in between; give the slot back
                self.release()

    def _wake(self, future: asyncio.Future[None]) -> None:
        if future.done():  # cancelled while the grant was in flight
            self.release()
        else:
            future.set_result(None)


class _Bucket:
    """A token bucket kept as the time it will next be full (GCRA), so a reservation is one
    subtraction and a caller learns at once when it may start. Not locked: the owner locks."""

    def __init__(self, per_minute: float, capacity: float, now: float) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(capacity, 1.0)
        self.full_at = now  # "theoretical arrival time": full now
        self.reserved = 0.0  # everything ever reserved, to tell what was sent after a reply

    def available(self, now: float) -> float:
        return self.capacity - max(self.full_at - now, 0.0) * self.rate

    def reserve(self, cost: float, earliest: float) -> float:
        """Take ``cost``; returns when the caller may start (>= earliest): the first moment the
        bucket holds ``cost``, which for a cost above its size is once that much has refilled."""
        start = max(earliest, self.full_at - (self.capacity - cost) / self.rate)
        self.full_at = max(self.full_at, start) + cost / self.rate
        self.reserved += cost
        return start

    def refund(self, cost: float) -> None:
        self.full_at -= cost / self.rate

    def cap_available(self, available: float, now: float) -> None:
        """The provider reports fewer left than we think: believe it. ``available`` may be
        negative (more already reserved than the provider has left); clamping it to zero would
        forget those reservations and let the next callers start at once."""
        if self.available(now) > available:
            self.full_at = now + (self.capacity - available) / self.rate

    def retune(self, per_minute: float, capacity: float, now: float) -> None:
        available = self.available(now)
        self.rate = per_minute / 60.0
        self.capacity = max(capacity, 1.0)
        self.full_at = now + (self.capacity - min(available, self.capacity)) / self.rate


class EndpointLimiter:
    """The local budget of one endpoint: adaptive (or pinned) concurrency, pauses and pacing."""

    def __init__(self, settings: BudgetSettings | int | None = None) -> None:
        if isinstance(settings, int):
            settings = BudgetSettings(max_concurrency=settings, pinned=True)
        settings = settings or BudgetSettings()
        self._lock = threading.Lock()
        self._settings = settings
        self._check(settings)
        self._window = float(self._starting_limit(settings))
        self._slots = _Slots(int(self._window))
        self._slow_start = True
        # Latency: a floor per window of samples (the provider's own time) and a smoothed value.
        self._floor = math.inf
        self._window_floor = math.inf
        self._window_samples = 0
        self._smoothed: float | None = None
        self._last_cut = -math.inf
        # An endpoint-wide pause (Retry-After), and how many 429s in a row had none.
        self._paused_until = 0.0
        self._pause_generation = 0
        self._unexplained_429s = 0
        # Self-hosted servers: latencies of the requests sent since the window last changed,
        # and the lowest mean latency of such a round trip (the server without a queue).
        self._round_start = -math.inf
        self._round_latencies: list[float] = []
        self._round_saturated = False
        self._best_round = math.inf
        # Pacing: user budgets win over what headers teach (never faster than the user asked).
        self._requests: _Bucket | None = None
        self._tokens: _Bucket | None = None
        self._learned_rpm: float | None = None
        self._learned_tpm: float | None = None
        self._apply_budgets(time.monotonic())
        # Counters, for tests, benchmarks and reports.
        self.rate_limited = 0
        self.peak_limit = self._slots.limit

    # settings
    @staticmethod
    def _check(settings: BudgetSettings) -> None:
        if settings.max_concurrency < 1:
            raise ValueError(f"concurrency limit must be at least 1, got {settings.max_concurrency}")
        for name in ("rpm", "tpm"):
            value = getattr(settings, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be positive, got {value}")

    @staticmethod
    def _starting_limit(settings: BudgetSettings) -> int:
        if settings.pinned:
            return settings.max_concurrency
        start = SELF_HOSTED_INITIAL_CONCURRENCY if settings.self_hosted else INITIAL_CONCURRENCY
        return min(start, settings.max_concurrency)

    @property
    def settings(self) -> BudgetSettings:
        return self._settings

    @property
    def limit(self) -> int:
        """Requests that may be in flight right now."""
        return self._slots.limit

    @property
    def active(self) -> int:
        return self._slots.active

    @property
    def requests_per_minute(self) -> float | None:
        """The request pace in force (a user budget or one learned from headers)."""
        with self._lock:
            return self._requests.rate * 60.0 if self._requests else None

    @property
    def tokens_per_minute(self) -> float | None:
        with self._lock:
            return self._tokens.rate * 60.0 if self._tokens else None

    def configure(self, settings: BudgetSettings) -> None:
        """Apply the user's latest explicit settings for this endpoint."""
        self._check(settings)
        with self._lock:
            old = self._settings
            self._settings = settings
            if settings.pinned:
                self._window = float(settings.max_concurrency)
            elif old.pinned:
                self._window = float(self._starting_limit(settings))
                self._slow_start = True
                self._new_round_locked()
            else:
                self._window = min(self._window, float(settings.max_concurrency))
            self._apply_budgets(time.monotonic())
            size = int(self._window)
        self._slots.resize(size)

    def _apply_budgets(self, now: float) -> None:
        rpm = _lowest(self._settings.rpm, self._learned_rpm)
        tpm = _lowest(self._settings.tpm, self._learned_tpm)
        self._requests = _tune(self._requests, rpm, now)
        self._tokens = _tune(self._tokens, tpm, now)

    # leasing
    async def lease(self, tokens: int) -> Permit:
        saturated = await self._slots.acquire()
        try:
            with self._lock:
                now = time.monotonic()
                permit, start = self._reserve_locked(tokens, now)
                generation = self._pause_generation
            permit.saturated = saturated
            wait = start - now
            while wait > 0:
                await _sleep(wait)
                with self._lock:
                    # Only a pause set while we slept moves us again; a budget slot stays ours.
                    if self._pause_generation == generation:
                        break
                    generation = self._pause_generation
                    wait = self._paused_until - time.monotonic()
        except BaseException:
            self._slots.release()
            raise
        return permit

    def try_lease(self, tokens: int) -> Permit | None:
        """A permit that may start now (a free slot, no pause, the pace allows it), or None and
        nothing taken: for a caller that hands out permits in batches."""
        if not self._slots.try_acquire():
            return None
        with self._lock:
            now = time.monotonic()
            ready = self._paused_until <= now and all(
                bucket is None or bucket.available(now) >= cost
                for bucket, cost in ((self._requests, 1.0), (self._tokens, float(tokens))))
            permit = self._reserve_locked(tokens, now)[0] if ready else None
        if permit is None:
            self._slots.release()
            return None
        permit.saturated = self._slots.active >= self._slots.limit
        return permit

    def _reserve_locked(self, tokens: int, now: float) -> tuple[Permit, float]:
        start = max(now, self._paused_until)
        permit = Permit(tokens=tokens, leased_at=now)
        if self._requests is not None:
            start = max(start, self._requests.reserve(1.0, start))
            permit.request_mark = self._requests.reserved
        if self._tokens is not None:
            start = max(start, self._tokens.reserve(float(tokens), start))
            permit.token_mark = self._tokens.reserved
        return permit, start

    def settle(self, permit: Permit, outcome: Outcome) -> None:
        if permit.settled:
            return
        permit.settled = True
        with self._lock:
            now = time.monotonic()
            if outcome.headers is not None:
                self._learn_locked(permit, outcome.headers, now, outcome.latency_s)
            if outcome.tokens is not None and self._tokens is not None and permit.token_mark:
                # The estimate made before the call, corrected by what the provider counted.
                self._tokens.refund(permit.tokens - outcome.tokens)
            if outcome.kind == "ok":
                self._unexplained_429s = 0
                self._on_success_locked(permit, outcome.latency_s)
            elif outcome.kind in ("rate_limited", "overloaded"):
                self._on_pushback_locked(permit, outcome, now)
            elif outcome.kind == "timed_out" and self._settings.self_hosted:
                # No reply within the timeout from a server of our own: it is queueing more
                # than it can answer in time. Half the window, once per round trip.
                self._cut_locked(permit, now)
            size = int(self._window)
        if size != self._slots.limit:
            self._slots.resize(size)
            self.peak_limit = max(self.peak_limit, size)
        self._slots.release()

    # what replies teach
    def _learn_locked(self, permit: Permit, headers: RateLimitHeaders, now: float,
                      latency_s: float) -> None:
        changed = False
        if headers.limit_requests and headers.limit_requests != self._learned_rpm:
            self._learned_rpm, changed = headers.limit_requests, True
        if headers.limit_tokens and headers.limit_tokens != self._learned_tpm:
            self._learned_tpm, changed = headers.limit_tokens, True
        if changed:
            self._apply_budgets(now)
            for bucket, limit, remaining, reset in (
                    (self._requests, headers.limit_requests, headers.remaining_requests,
                     headers.reset_requests_s),
                    (self._tokens, headers.limit_tokens, headers.remaining_tokens,
                     headers.reset_tokens_s)):
                if (bucket is not None and limit and bucket.rate * 60.0 == limit
                        and remaining is not None and reset):
                    # What is left plus what refills until the reset: the provider's bucket size.
                    size = min(remaining + reset * bucket.rate, limit)
                    bucket.retune(limit, size * LEARNED_BURST_SHARE, now)
        # The provider counted this request when it arrived; everything we sent after it may
        # not have reached it yet, so take it off what the provider says is left. Its bucket
        # kept refilling meanwhile: credit the reply's time beyond the fastest reply seen (the
        # time it spent coming back or waiting for this process), else a reply read late, on a
        # busy machine, would stall the endpoint for as long as it was late.
        refilled_s = max(latency_s - self._floor, 0.0) if math.isfinite(self._floor) else 0.0
        if self._requests is not None and headers.remaining_requests is not None:
            sent_since = self._requests.reserved - permit.request_mark
            self._requests.cap_available(
                headers.remaining_requests + refilled_s * self._requests.rate - sent_since, now)
        if self._tokens is not None and headers.remaining_tokens is not None:
            sent_since = self._tokens.reserved - permit.token_mark
            self._tokens.cap_available(
                headers.remaining_tokens + refilled_s * self._tokens.rate - sent_since, now)

    def _on_success_locked(self, permit: Permit, latency_s: float) -> None:
        if latency_s > 0:
            self._window_floor = min(self._window_floor, latency_s)
            self._window_samples += 1
            if self._window_samples >= 200:  # let the floor follow a provider that got slower
                self._floor, self._window_floor, self._window_samples = (
                    self._window_floor, math.inf, 0)
            self._floor = min(self._floor, latency_s)
            self._smoothed = (latency_s if self._smoothed is None
                              else 0.9 * self._smoothed + 0.1 * latency_s)
        if self._settings.self_hosted and not self._settings.pinned:
            self._on_server_round_locked(permit, latency_s)
            return
        if self._settings.pinned or not permit.saturated:
            return  # growing a limit that is not in use would prove nothing
        short_of_pace = self._window < self._pace_window_locked()
        if (self._smoothed is not None and self._smoothed > LATENCY_TOLERANCE * self._floor
                and not short_of_pace):
            self._slow_start = False
            return
        # Below what a known pace needs, grow as in slow start (doubling per round trip):
        # a window frozen by a latency climb would cap the rate under the limit, and every
        # request in it waits for its turn at the pace anyway.
        step = 1.0 if self._slow_start or short_of_pace else 1.0 / max(self._window, 1.0)
        self._window = min(self._window + step, float(self._settings.max_concurrency))

    def _on_server_round_locked(self, permit: Permit, latency_s: float) -> None:
        """A self-hosted server: judge the window once per round trip (as many replies as the
        window, all sent since it last changed) by the round's mean latency, so that replies of
        different lengths average out. Past SERVER_QUEUE_TOLERANCE times the best round the
        server is queueing: cut to the slots that explains; else, with every slot in use, grow
        (doubling until the first cut, then by one)."""
        if permit.leased_at < self._round_start or latency_s <= 0:
            return  # sent under another window: it says nothing about this one
        self._round_latencies.append(latency_s)
        self._round_saturated = self._round_saturated or permit.saturated
        if len(self._round_latencies) < max(int(self._window), 2):
            return
        mean = sum(self._round_latencies) / len(self._round_latencies)
        self._best_round = min(self._best_round, mean)
        if mean > SERVER_QUEUE_TOLERANCE * self._best_round:
            self._window = max(1.0, math.floor(self._window * self._best_round / mean))
            self._slow_start = False
        elif self._round_saturated:
            step = self._window if self._slow_start else 1.0
            self._window = min(self._window + step, float(self._settings.max_concurrency))
        self._new_round_locked()

    def _new_round_locked(self) -> None:
        self._round_start = time.monotonic()
        self._round_latencies = []
        self._round_saturated = False

    def _pace_window_locked(self) -> float:
        """Requests in flight the request pace needs at the smoothed latency (0: no pace)."""
        if self._requests is None or self._smoothed is None:
            return 0.0
        return math.ceil(self._requests.rate * self._smoothed * PACE_WINDOW_MARGIN)

    def _on_pushback_locked(self, permit: Permit, outcome: Outcome, now: float) -> None:
        if outcome.kind == "rate_limited":
            self.rate_limited += 1
        delay = outcome.retry_after
        if delay is None and outcome.kind == "rate_limited":
            if permit.leased_at >= self._last_cut:
                self._unexplained_429s += 1
            ceiling = min(RATE_LIMIT_BACKOFF_CAP_S,
                          RATE_LIMIT_BACKOFF_S * 2 ** max(self._unexplained_429s - 1, 0))
            delay = random.uniform(ceiling / 2, ceiling)
        if delay is not None and now + delay > self._paused_until:
            self._paused_until = now + delay
            self._pause_generation += 1
        self._cut_locked(permit, now)

    def _cut_locked(self, permit: Permit, now: float) -> None:
        # One cut per round trip: the other requests already in flight saw the same limit.
        if not self._settings.pinned and permit.leased_at >= self._last_cut:
            self._window = max(1.0, self._window * DECREASE_FACTOR)
            self._slow_start = False
            self._last_cut = now
            self._new_round_locked()

    def paused_for(self) -> float:
        """Seconds until the endpoint-wide pause ends (0 when not paused)."""
        with self._lock:
            return max(self._paused_until - time.monotonic(), 0.0)


def _lowest(*values: float | None) -> float | None:
    present = [v for v in values if v]
    return min(present) if present else None


def _tune(bucket: _Bucket | None, per_minute: float | None, now: float) -> _Bucket | None:
    if per_minute is None:
        return None
    capacity = per_minute / 60.0 * BUDGET_BURST_S
    if bucket is None:
        return _Bucket(per_minute, capacity, now)
    if bucket.rate * 60.0 != per_minute:
        bucket.retune(per_minute, capacity, now)
    return bucket
