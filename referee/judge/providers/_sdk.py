"""The SDK clients' HTTP side that every SDK-backed adapter shares: the SDK's aiohttp transport,
and one POST that takes the direct path where it is set up and the SDK's public ``post()``
everywhere else."""

from __future__ import annotations

import functools
import importlib
import importlib.util
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from referee.judge.providers._base import json_value
from referee.judge.providers._direct import _direct_http, shared_tls_context
from referee.judge.retry import MalformedReply


@functools.cache
def _aiohttp_installed() -> bool:
    return importlib.util.find_spec("aiohttp") is not None


def aiohttp_http_client(sdk: Any, timeout: float, base_url: str | None = None) -> Any:
    """The SDK's own aiohttp-backed HTTP client, when the SDK and aiohttp provide one.

    Per request it costs a third of the CPU of the default transport, whose connection pool
    rescans every connection on each request; at judge concurrency that CPU bounds throughput.
    A base URL with credentials in it (a gateway's ``user:pass@host``) keeps the default
    transport: aiohttp refuses URL credentials next to the SDK's Authorization header.
    """
    factory = getattr(sdk, "DefaultAioHttpClient", None)
    if factory is None or not _aiohttp_installed():
        return None
    if base_url and "@" in (urlsplit(base_url).netloc or ""):
        return None
    verify = shared_tls_context(sdk)
    try:
        return factory(timeout=timeout, **({"verify": verify} if verify is not None else {}))
    except Exception:  # an SDK whose aiohttp extra is incomplete: its default transport it is
        return None


async def post_json(client: Any, path: str, body: dict[str, Any], timeout: float
                     ) -> tuple[Any, Mapping[str, str]]:
    """POST ``body`` to the SDK client's ``path``: directly where set up (_DirectHTTP), else
    through the SDK client's public ``post()``, which keeps its client, auth, errors and timeouts."""
    direct = _direct_http.get(client)
    if direct is not None:
        return await direct.post(path, body, timeout)
    # The SDK's public response type (not its HTTP library's, which only its internals name):
    # the reply is read as the JSON it is, with no model built from it.
    sdk = importlib.import_module(type(client).__module__.split(".")[0])
    response = await client.post(path, body=body, cast_to=sdk.AsyncAPIResponse[object],
                                 options={"timeout": timeout})
    try:
        return json_value(await response.read()), response.headers
    except ValueError as exc:
        raise MalformedReply(f"{path} reply is not JSON: {exc}") from None
