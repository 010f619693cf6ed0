"""Which judge failures are worth retrying, and how long to wait before the next attempt."""

from __future__ import annotations

import asyncio
import datetime
import email.utils
import json
import random
import time
from dataclasses import dataclass, field

RETRYABLE_STATUS = frozenset({408, 409, 429}) | frozenset(range(500, 600))
RETRY_AFTER_CAP_S = 60.0
# The shortest pause a refused request waits before its next attempt. Some gateways answer every
# 429 with ``retry-after: 0``: taken at its word that is a loop of hundreds of requests a second,
# and a wait budget that adds up pauses of zero is never spent. The floor is the refused
# request's own: the endpoint's shared pause takes the server at its word (``endpoint_pause``),
# so a 0 on a few of many concurrent requests does not stop the others each time.
RETRY_AFTER_FLOOR_S = 0.25
# A request's rate-limit wait budget counts its pauses, and by the clock its refused attempts
# too (a server slow to refuse must spend it as well), allowing this much for the round trips
# themselves: on a busy machine they alone would otherwise cut the documented count of pauses.
RATE_LIMIT_CLOCK_ALLOWANCE_S = 1.0
# A request at temperature 0 that timed out asks the same of the same server again: most likely
# it takes as long again (a small local model rambling to max_tokens, a server busy with other
# requests), and each retry holds a slot for a whole timeout. One retry covers a stall.
DETERMINISTIC_TIMEOUT_RETRIES = 1
# 503 Service Unavailable, Anthropic's 529 Overloaded.
OVERLOADED_STATUS = frozenset({503, 529})

# Transport failures of httpx (and its successor httpx2, used by newer SDKs) and aiohttp (the
# SDKs' faster transport), matched by class name so no such package has to be imported here.
_TRANSPORT_NAMES = frozenset({"TransportError", "TimeoutException", "NetworkError",
                              "RemoteProtocolError", "ProtocolError",
                              # aiohttp (google-genai uses it when installed): a body cut
                              # short, a dropped connection
                              "ClientPayloadError", "ServerDisconnectedError"})


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 4
    max_total_s: float = 120.0
    initial_delay_s: float = 0.5
    max_delay_s: float = 20.0
    retry_after_cap_s: float = RETRY_AFTER_CAP_S

    def backoff(self, attempt: int, rng: random.Random | None = None) -> float:
        """Exponential backoff with jitter for retry number ``attempt`` (0-based): a draw from
        the upper half of the step, so concurrent callers spread out yet never retry instantly."""
        ceiling = min(self.max_delay_s, self.initial_delay_s * (2 ** attempt))
        return (rng or random).uniform(ceiling / 2, ceiling)

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            # The server knows its own recovery time better than our backoff does.
            return server_pause(retry_after, self.retry_after_cap_s)
        return self.backoff(attempt)


def server_pause(retry_after: float, cap_s: float = RETRY_AFTER_CAP_S) -> float:
    """The pause a server's Retry-After asks for, held between the floor and ``cap_s``."""
    if not retry_after >= RETRY_AFTER_FLOOR_S:  # also NaN
        return RETRY_AFTER_FLOOR_S
    return min(retry_after, max(cap_s, RETRY_AFTER_FLOOR_S))


def endpoint_pause(retry_after: float, cap_s: float = RETRY_AFTER_CAP_S) -> float | None:
    """How long a 429's Retry-After pauses every request to the endpoint: as asked, within
    [0, ``cap_s``]; None where the value says nothing (NaN), so the limiter backs off itself."""
    if retry_after != retry_after:  # NaN
        return None
    return min(max(retry_after, 0.0), cap_s)


class MalformedReply(Exception):
    """The provider answered 2xx but the body could not be read as a reply."""


@dataclass(frozen=True)
class FailureInfo:
    retryable: bool
    status: int | None
    retry_after: float | None
    summary: str
    # The response headers of an HTTP error: a 429 carries the provider's rate-limit state.
    headers: dict[str, str] = field(default_factory=dict)
    timed_out: bool = False  # no reply within the timeout (not a refused or dropped connection)

    @property
    def rate_limited(self) -> bool:
        """A 429 that asks the caller to slow down (a quota that ran out is not retryable)."""
        return self.status == 429 and self.retryable

    @property
    def overloaded(self) -> bool:
        """The provider says it is busy: fewer requests in flight help it recover."""
        return self.status in OVERLOADED_STATUS


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header: delta-seconds or an HTTP-date."""
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        if when.tzinfo is None:  # "-0000" dates parse naive; HTTP dates are always UTC
            when = when.replace(tzinfo=datetime.timezone.utc)
        seconds = when.timestamp() - (time.time() if now is None else now)
    if seconds != seconds:  # NaN
        return None
    return max(seconds, 0.0)


def _headers_of(exc: BaseException) -> dict[str, str]:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return {}
    try:
        return {str(k).lower(): str(v) for k, v in headers.items()}
    except Exception:  # a foreign response type; no header is better than a crash
        return {}


def _status_of(exc: BaseException) -> int | None:
    for attr in ("status_code", "code"):
        value = getattr(exc, attr, None)
        if isinstance(value, int) and 100 <= value <= 599:
            return value
    response = getattr(exc, "response", None)
    value = getattr(response, "status_code", None)
    return value if isinstance(value, int) else None


def _is_transport_error(exc: BaseException) -> bool:
    if isinstance(exc, (ConnectionError, TimeoutError, asyncio.TimeoutError)):
        return True
    for cls in type(exc).__mro__:
        module = cls.__module__ or ""
        if module.split(".")[0] in ("httpx", "httpx2", "httpcore", "aiohttp") and (
                cls.__name__ in _TRANSPORT_NAMES or "Timeout" in cls.__name__
                or "Connect" in cls.__name__):
            return True
        # The SDKs (openai's, anthropic's) wrap transport failures in APIConnectionError and
        # APITimeoutError; only a provider's failure reaches here (is_provider_failure).
        if cls.__name__ in ("APIConnectionError", "APITimeoutError"):
            return True
    return False


_PROVIDER_PACKAGES = frozenset({"openai", "anthropic", "google", "httpx", "httpx2", "httpcore",
                                "aiohttp"})


def is_provider_failure(exc: BaseException) -> bool:
    """Raised by a provider SDK or the network, as opposed to a bug in the calling code."""
    if getattr(exc, "judge_provider_error", False):
        return True  # custom adapters mark their transport errors this way
    if isinstance(exc, (MalformedReply, OSError, TimeoutError, asyncio.TimeoutError,
                        json.JSONDecodeError)):
        # JSONDecodeError: the SDKs let a 200 whose body is not JSON escape raw.
        return True
    return any((cls.__module__ or "").split(".")[0] in _PROVIDER_PACKAGES
               for cls in type(exc).__mro__)


def _quota_exhausted(exc: BaseException) -> bool:
    """OpenAI's 429 ``insufficient_quota``: the account is out of credit, waiting cannot help."""
    for value in (getattr(exc, "code", None), getattr(exc, "body", None), str(exc)):
        if value is not None and "insufficient_quota" in str(value):
            return True
    return False


def classify(exc: BaseException) -> FailureInfo:
    """Retry only what may succeed later: 408/409/429/5xx, transport errors, malformed bodies."""
    if isinstance(exc, MalformedReply):
        return FailureInfo(True, None, None, f"malformed reply: {exc}")
    if isinstance(exc, json.JSONDecodeError):
        # A gateway's HTML error page or a cut-off body; the next attempt usually succeeds.
        return FailureInfo(True, None, None, "malformed reply: body is not JSON")
    status = _status_of(exc)
    if status is not None and not _is_transport_error(exc):
        retry_after = None
        headers = _headers_of(exc)
        if "retry-after-ms" in headers:
            try:
                retry_after = max(float(headers["retry-after-ms"]) / 1000.0, 0.0)
            except ValueError:
                retry_after = None
            if retry_after is not None and retry_after != retry_after:  # NaN
                retry_after = None
        if retry_after is None:
            retry_after = parse_retry_after(headers.get("retry-after"))
        if status == 429 and _quota_exhausted(exc):
            return FailureInfo(False, status, retry_after,
                               f"HTTP 429 quota exhausted ({type(exc).__name__})", headers)
        return FailureInfo(status in RETRYABLE_STATUS, status, retry_after,
                           f"HTTP {status} ({type(exc).__name__})", headers)
    if _is_transport_error(exc):
        kind = "timeout" if "timeout" in type(exc).__name__.lower() or isinstance(
            exc, (TimeoutError, asyncio.TimeoutError)) else "connection error"
        if kind == "timeout" and _reset_underneath(exc):
            kind = "connection error"  # the SDK's aiohttp transport reports resets as timeouts
        return FailureInfo(True, None, None, f"{kind} ({type(exc).__name__})",
                           timed_out=kind == "timeout")
    return FailureInfo(False, None, None, type(exc).__name__)


def _reset_underneath(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    for _ in range(5):  # a short chain; never loop on a cycle
        seen = seen.__cause__ or seen.__context__ if seen is not None else None
        if isinstance(seen, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)):
            return True
    return "Connection reset" in str(exc)


async def sleep(seconds: float) -> None:
    """The retry loop's sleep; tests replace it to observe delays without waiting."""
    await asyncio.sleep(seconds)
