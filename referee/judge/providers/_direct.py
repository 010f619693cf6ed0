"""The direct HTTP path: a judge request sent straight through the aiohttp session under an SDK
client's own transport, past the SDK's request pipeline.

It reaches into SDK internals (``missing_sdk_internals`` names them, and
tests/test_judge_providers.py checks them against the installed SDKs), so it has an off
switch: ``REFEREE_DIRECT_HTTP=0`` sends every request through the SDK client's public
``post()`` instead (docs/judge.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import json
import os
import sys
import weakref
from collections.abc import Mapping
from typing import Any

import orjson

from referee.judge.environment import env_switch
from referee.judge.providers._base import ProviderSetupError, json_value
from referee.judge.retry import MalformedReply

# The SDK releases the internals below were last checked against (tests/test_judge_providers.py
# checks them against the installed ones and names both versions when one is gone).
SDK_CHECKED_WITH = {"openai": "3.60.0", "anthropic": "2.16.0"}

def direct_http_enabled() -> bool:
    """``REFEREE_DIRECT_HTTP``: unset or 1/true/on uses the direct path where it can be set up;
    0/false/off sends every request through the SDK's public ``post()``."""
    return env_switch("REFEREE_DIRECT_HTTP", ProviderSetupError) is not False


def shared_tls_context(sdk: Any) -> Any:
    """One TLS context for all of an SDK's clients (see ``_default_tls_context``); None, and
    each client builds its own, when the switch is off: its builder is an SDK internal."""
    if not direct_http_enabled():
        return None
    return _default_tls_context(sdk.__name__, os.environ.get("SSL_CERT_FILE", ""),
                                os.environ.get("SSL_CERT_DIR", ""))


@functools.lru_cache(maxsize=8)
def _default_tls_context(sdk_name: str, cert_file: str, cert_dir: str) -> Any:
    """The TLS context the SDK's transport builds by default, built once per process.

    Every event loop gets its own client (a connection pool belongs to one loop), and each
    client would load the system's certificate store again: 35-60 ms of CPU per run, more
    than a hundred judge requests cost. A context can serve any number of connections, loops
    and threads. The SDK's own builder makes it, so it is the one the SDK would have used; the
    certificate variables it reads (SSL_CERT_FILE, SSL_CERT_DIR) are part of the key. None:
    the SDK's HTTP library has no such builder, and each client builds its own as before.
    """
    del cert_file, cert_dir  # the key only: the builder reads them from the environment
    build = getattr(_sdk_http_module(sdk_name), "create_ssl_context", None)
    return None if build is None else build(verify=True, trust_env=True)


class _DirectHTTP:
    """JSON requests sent straight through the aiohttp session under an SDK client's HTTP
    client, with the SDK's URL, headers and auth, and its error classes.

    The SDK's request pipeline (options models, header merging, auth-retry wrappers) and the
    HTTP client's request and response models cost more event-loop CPU per call than everything
    else referee does; at judge concurrency that CPU, not the provider, bounds throughput. Only
    set up where nothing is lost: the SDK's own aiohttp transport, with no proxy in between
    (a proxied or otherwise different transport keeps the SDK's path).
    """

    def __init__(self, client: Any, transport: Any, headers: dict[str, str]) -> None:
        import aiohttp
        import yarl

        self._aiohttp, self._yarl = aiohttp, yarl
        self._client = client
        self._transport = transport
        self._base = str(client.base_url).rstrip("/") + "/"
        self._urls: dict[str, Any] = {}
        self.headers = headers

    @classmethod
    def for_client(cls, client: Any, http: Any) -> _DirectHTTP | None:
        if http is None or missing_sdk_internals(client, http, tls_builder=False):
            return None
        auth = client.auth_headers
        transport = http._transport_for_url(client.base_url)
        if not isinstance(auth, dict) or transport.proxy is not None:
            return None
        # The SDK's platform headers (X-Stainless-*) are left out: each is parsed and normalised
        # again on every request, and they describe the SDK's pipeline, which is not used.
        headers = {k: v for k, v in {**client.default_headers, **auth}.items()
                   if isinstance(v, str) and not k.lower().startswith("x-stainless")}
        return cls(client, transport, headers)

    def _session(self) -> Any:
        # As the transport itself does: its session is opened on first use, on the running loop,
        # and closed with the SDK client.
        session = self._transport.client
        if not isinstance(session, self._aiohttp.ClientSession):
            session = self._transport.client = self._transport.get_client()
        return session

    def _url(self, path: str) -> Any:
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = self._yarl.URL(self._base + path.lstrip("/"))
        return url

    async def post(self, path: str, body: dict[str, Any], timeout: float
                   ) -> tuple[Any, Mapping[str, str]]:
        """The reply's JSON and headers; the SDK's status error for a non-2xx reply, its
        connection or timeout error when the request never got one. ``timeout`` bounds the
        whole attempt (connecting, sending, every read)."""
        url = self._url(path)
        try:
            async with _attempt_deadline(timeout):
                async with self._session().post(url, data=_json_bytes(body),
                                                headers=self.headers,
                                                timeout=_aiohttp_timeout(timeout)) as response:
                    content = await response.read()
                    status, headers = response.status, response.headers
        except (self._aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise self._connection_error(url, exc) from exc
        if not 200 <= status < 300:
            http = _sdk_http(self._client)
            reply = http.Response(status_code=status, headers=list(headers.items()),
                                  content=content, request=http.Request("POST", str(url)))
            raise self._client._make_status_error_from_response(reply)
        try:
            return json_value(content), headers
        except ValueError as exc:
            raise MalformedReply(f"{path} reply is not JSON: {exc}") from None

    def _connection_error(self, url: Any, exc: BaseException) -> Exception:
        sdk = importlib.import_module(type(self._client).__module__.split(".")[0])
        request = _sdk_http(self._client).Request("POST", str(url))
        if isinstance(exc, asyncio.TimeoutError):
            return sdk.APITimeoutError(request=request)
        return sdk.APIConnectionError(request=request)


def _json_bytes(body: dict[str, Any]) -> bytes:
    """A request body as JSON. orjson writes it in a twentieth of the stdlib's time (the
    stdlib's writing and reading were 2% of a judge request's CPU); what it refuses (a lone
    surrogate, an integer past 64 bits) the stdlib writes as it always did."""
    try:
        return orjson.dumps(body)
    except TypeError:  # orjson.JSONEncodeError
        return json.dumps(body).encode()


def _sdk_http_module(sdk_name: str) -> Any:
    """The HTTP library an SDK is built on (httpx2 in newer SDKs, httpx before); None if
    neither."""
    base = importlib.import_module(sdk_name + "._base_client")
    return getattr(base, "httpx2", None) or getattr(base, "httpx", None)


def _sdk_http(client: Any) -> Any:
    """The HTTP library of an SDK client: its ``Response`` and ``Request`` types are the ones
    the SDK's errors and ``post()`` take."""
    return _sdk_http_module(type(client).__module__.split(".")[0])


# Where asyncio has a deadline for the current task (3.11+), one deadline bounds a direct
# attempt: aiohttp's own read and connect timeouts cancel and re-arm a timer for every chunk
# read (0.04 ms of CPU per request here); its ClientTimeout() arms none. Before 3.11 aiohttp's
# timeouts do it, as the SDK's transport maps httpx's (none of them a total: the judge's outer
# bound, _within in referee.judge.client, covers a stalled body there).
DIRECT_ATTEMPT_BOUNDED = sys.version_info >= (3, 11)


def _attempt_deadline(seconds: float) -> Any:
    if DIRECT_ATTEMPT_BOUNDED:
        return asyncio.timeout(seconds)  # type: ignore[attr-defined,unused-ignore]  # 3.11+
    return contextlib.nullcontext()


@functools.lru_cache(maxsize=64)
def _aiohttp_timeout(seconds: float) -> Any:
    import aiohttp

    if DIRECT_ATTEMPT_BOUNDED:
        return aiohttp.ClientTimeout()  # no timers: _attempt_deadline bounds the attempt
    return aiohttp.ClientTimeout(sock_connect=seconds, sock_read=seconds, connect=seconds)


_direct_http: weakref.WeakKeyDictionary[Any, _DirectHTTP] = weakref.WeakKeyDictionary()


def use_direct_http(client: Any, http: Any) -> None:
    """Send ``client``'s requests directly where ``http`` (the SDK's aiohttp client) allows it
    and the switch is on."""
    if not direct_http_enabled():
        return
    direct = _DirectHTTP.for_client(client, http)
    if direct is not None:
        _direct_http[client] = direct


def missing_sdk_internals(client: Any, http: Any, *, tls_builder: bool = True) -> list[str]:
    """The SDK internals the direct path uses that ``client`` (an AsyncOpenAI or AsyncAnthropic
    made with ``http``, its SDK's DefaultAioHttpClient) lacks, by name; empty when all are
    there. Where one is missing, ``_DirectHTTP.for_client`` declines and the SDK path is used,
    so a new SDK release only loses speed; this names what it lost. ``tls_builder``: the shared
    TLS context's builder too (without it, each client builds its own context)."""
    missing = []
    sdk_name = type(client).__module__.split(".")[0]
    try:
        library = _sdk_http_module(sdk_name)
    except ImportError:
        library = None
        missing.append(f"{sdk_name}._base_client")
    if library is None and not missing:
        missing.append(f"{sdk_name}._base_client.httpx2 (or .httpx)")
    for name in ("Response", "Request", *(("create_ssl_context",) if tls_builder else ())):
        if library is not None and not hasattr(library, name):
            missing.append(f"{library.__name__}.{name}")
    for name in ("auth_headers", "default_headers", "base_url",
                 "_make_status_error_from_response"):
        if not hasattr(client, name):
            missing.append(f"{type(client).__name__}.{name}")
    transport_for = getattr(http, "_transport_for_url", None)
    if transport_for is None:
        return [*missing, f"{type(http).__name__}._transport_for_url"]
    try:
        transport = transport_for(client.base_url)
    except Exception as exc:  # an HTTP client unlike the one this was written against
        return [*missing, f"{type(http).__name__}._transport_for_url(base_url) ({exc!r})"]
    if type(transport).__name__ != "AiohttpTransport":
        missing.append(f"AiohttpTransport (the transport is a {type(transport).__name__})")
    for name in ("get_client", "client", "proxy"):
        if not hasattr(transport, name):
            missing.append(f"{type(transport).__name__}.{name}")
    return missing


def bounds_its_attempts(client: Any) -> bool:
    """Whether every attempt through ``client`` ends by its request's timeout on its own (the
    direct path, 3.11+), so that the caller need not arm a deadline of its own as well."""
    if not DIRECT_ATTEMPT_BOUNDED:
        return False
    try:
        return _direct_http.get(client) is not None
    except TypeError:  # a custom adapter's client that cannot be weakly referenced (a dict)
        return False
