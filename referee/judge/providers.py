"""Provider adapters over the official async SDKs. Each one turns a JudgeRequest into a RawReply.

SDK-internal retries are switched off everywhere: the judge layer owns retrying, and retries
stacked on retries multiply load exactly when a provider is already struggling.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import importlib.util
import inspect
import json
import os
import re
import sys
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

import orjson

from referee.judge.config import JudgeConfig, _register_provider_name
from referee.judge.retry import MalformedReply


@dataclass(frozen=True)
class JudgeRequest:
    model: str
    prompt: str
    system: str | None
    json_mode: bool
    temperature: float
    max_tokens: int
    timeout: float
    api_style: str
    # How much of the start of ``prompt`` sibling requests share (a case's material), so that
    # adapters can mark it for the provider's prompt cache; ``prompt`` is always the whole text.
    prompt_prefix: str = ""
    cache_breakpoint: bool = False  # Anthropic: put cache_control at the end of the prefix
    cache_key: str | None = None    # OpenAI: prompt_cache_key, routing siblings to one cache
    # The reply object's JSON schema, for providers with structured output (implies json_mode).
    json_schema: Mapping[str, Any] | None = field(default=None, hash=False, compare=False)


@dataclass(frozen=True)
class RawReply:
    text: str
    input_tokens: int  # every prompt token, cached ones included
    output_tokens: int
    # The model the reply says served it (OpenAI's and Anthropic's ``model``, Gemini's
    # ``modelVersion``: often a dated snapshot behind the alias asked for); the one asked for
    # when the reply names none.
    model: str
    cached_input_tokens: int = 0  # read from the provider's prompt cache
    cache_write_tokens: int = 0   # written to it
    # The provider stopped at max_tokens (finish_reason "length", stop_reason "max_tokens",
    # MAX_TOKENS): the text is cut off.
    truncated: bool = False
    # Why the answer carries no text (content null, an object, a number), when it does not.
    content_error: str | None = None
    # The reply's HTTP headers where the SDK exposes them: the provider's rate-limit state.
    headers: Mapping[str, str] | None = None
    # OpenAI Chat Completions' ``system_fingerprint``: the backend configuration that served it.
    system_fingerprint: str | None = None


class ProviderSetupError(Exception):
    """The provider cannot be used at all (missing SDK, missing credentials); never retried."""


class ProviderAdapter(Protocol):
    def credentials(self, cfg: JudgeConfig) -> tuple[str, str | None]:
        """(base_url, api_key) after applying the SDK's own environment variables."""

    def make_client(self, base_url: str, api_key: str | None, cfg: JudgeConfig) -> Any:
        """A new SDK client; called on the event loop that will use it."""

    async def call(self, client: Any, request: JudgeRequest) -> RawReply:
        """One attempt, no retries."""


# Sent to keyless OpenAI-compatible endpoints; not a secret.
PLACEHOLDER_API_KEY = "not-needed"
_JSON_INSTRUCTION = "Respond with a single JSON object and nothing else."
# Reasoning models reject `temperature` and take `max_completion_tokens` in Chat Completions.
_OPENAI_REASONING = re.compile(r"^(o\d|gpt-5)", re.IGNORECASE)


# The name a structured-output schema is sent under (OpenAI requires one).
SCHEMA_NAME = "referee_reply"


def schema_text(schema: Mapping[str, Any]) -> str:
    """A schema as stable text: what tells two requests' reply formats apart in a cache key."""
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


def sends_reply_schema(cfg: JudgeConfig, base_url: str) -> bool:
    """Whether a request's reply schema is sent to the provider at ``base_url``.

    ``JudgeConfig.structured_output`` decides when set. Unset, only OpenAI-compatible servers
    other than OpenAI's own API get it (llama.cpp, vLLM, Ollama...): there it becomes a decoding
    grammar that holds a small model to the shape asked for. OpenAI's and Gemini's APIs bill
    it as input on every request (a batched request a quarter to a third more, docs/judge.md),
    and their models follow the instruction, which the reply checks back up. Anthropic never
    gets one (a forced tool would add its tool-use system prompt).
    """
    if cfg.provider == "anthropic":
        return False
    if cfg.structured_output is not None:
        return cfg.structured_output
    if cfg.provider != "openai" or not base_url:
        return False
    host = (urlsplit(base_url).hostname or "").lower()
    return not (host == "openai.com" or host.endswith((".openai.com", ".openai.azure.com")))


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) else 0


def _openai_json_system(request: JudgeRequest) -> str | None:
    """OpenAI's JSON mode rejects requests whose messages never mention JSON."""
    system = request.system
    if request.json_mode and "json" not in f"{system or ''} {request.prompt}".lower():
        system = f"{system}\n\n{_JSON_INSTRUCTION}" if system else _JSON_INSTRUCTION
    return system


@functools.cache
def _aiohttp_installed() -> bool:
    return importlib.util.find_spec("aiohttp") is not None


def _aiohttp_http_client(sdk: Any, timeout: float, base_url: str | None = None) -> Any:
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
    try:
        verify = _default_tls_context(sdk.__name__, os.environ.get("SSL_CERT_FILE", ""),
                                      os.environ.get("SSL_CERT_DIR", ""))
        return factory(timeout=timeout, **({"verify": verify} if verify is not None else {}))
    except Exception:  # an SDK whose aiohttp extra is incomplete: its default transport it is
        return None


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
        auth = getattr(client, "auth_headers", None)
        transport_for = getattr(http, "_transport_for_url", None)
        if http is None or not isinstance(auth, dict) or transport_for is None:
            return None
        try:
            transport = transport_for(client.base_url)
        except Exception:  # an HTTP client unlike the one this was written against
            return None
        if (type(transport).__name__ != "AiohttpTransport" or not hasattr(transport, "get_client")
                or getattr(transport, "proxy", None) is not None):
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
            return _json_value(content), headers
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


def _json_value(content: bytes) -> Any:
    """A reply body's JSON; ValueError when it is none. What orjson refuses (NaN, an integer
    past 64 bits) the stdlib reads as it always did."""
    try:
        return orjson.loads(content)
    except ValueError:  # orjson.JSONDecodeError
        return json.loads(content)


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


def _use_direct_http(client: Any, http: Any) -> None:
    direct = _DirectHTTP.for_client(client, http)
    if direct is not None:
        _direct_http[client] = direct


def bounds_its_attempts(client: Any) -> bool:
    """Whether every attempt through ``client`` ends by its request's timeout on its own (the
    direct path, 3.11+), so that the caller need not arm a deadline of its own as well."""
    if not DIRECT_ATTEMPT_BOUNDED:
        return False
    try:
        return _direct_http.get(client) is not None
    except TypeError:  # a custom adapter's client that cannot be weakly referenced (a dict)
        return False


async def _post_json(client: Any, path: str, body: dict[str, Any], timeout: float
                     ) -> tuple[Any, Mapping[str, str]]:
    """POST ``body`` to the SDK client's ``path``: directly where set up (_DirectHTTP), else
    through the SDK's own ``post()``, which keeps its client, auth, errors and timeouts."""
    direct = _direct_http.get(client)
    if direct is not None:
        return await direct.post(path, body, timeout)
    response = await client.post(path, body=body, cast_to=_sdk_http(client).Response,
                                 options={"timeout": timeout})
    try:
        return response.json(), response.headers
    except ValueError as exc:
        raise MalformedReply(f"{path} reply is not JSON: {exc}") from None


class OpenAIAdapter:
    def credentials(self, cfg: JudgeConfig) -> tuple[str, str | None]:
        base_url = cfg.base_url or os.environ.get("OPENAI_BASE_URL", "").strip()
        api_key = cfg.api_key_value() or os.environ.get("OPENAI_API_KEY") or None
        if api_key is None:
            if not base_url:
                raise ProviderSetupError(
                    "no OpenAI API key: set OPENAI_API_KEY or JudgeConfig(api_key=...)")
            # Local OpenAI-compatible servers (Ollama, vLLM, ...) ignore the key but the SDK
            # insists on one.
            api_key = PLACEHOLDER_API_KEY
        return base_url, api_key

    def make_client(self, base_url: str, api_key: str | None, cfg: JudgeConfig) -> Any:
        import openai

        http = _aiohttp_http_client(openai, cfg.effective_timeout, base_url)
        extra = {"http_client": http} if http is not None else {}
        client = openai.AsyncOpenAI(api_key=api_key, base_url=base_url or None, max_retries=0,
                                    timeout=cfg.effective_timeout, **extra)
        _use_direct_http(client, http)
        return client

    async def call(self, client: Any, request: JudgeRequest) -> RawReply:
        if request.api_style == "responses":
            return await self._responses(client, request)
        return await self._chat(client, request)

    async def _chat(self, client: Any, request: JudgeRequest) -> RawReply:
        messages = []
        system = _openai_json_system(request)
        if system:
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": request.prompt})
        body: dict[str, Any] = {"model": request.model, "messages": messages}
        if request.cache_key:
            body["prompt_cache_key"] = request.cache_key
        if _OPENAI_REASONING.match(request.model):
            body["max_completion_tokens"] = request.max_tokens
        else:
            body["max_tokens"] = request.max_tokens
            body["temperature"] = request.temperature
        if request.json_schema is not None:
            # llama.cpp's and vLLM's servers take the same field and turn it into a grammar.
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": SCHEMA_NAME, "strict": True, "schema": request.json_schema}}
        elif request.json_mode:
            body["response_format"] = {"type": "json_object"}
        # The SDK's typed create() re-walks the params against TypedDicts and builds a pydantic
        # reply per call, about a millisecond of event-loop CPU each; at judge concurrency that
        # CPU, not the provider, bounds throughput. The reply is read as the JSON it is.
        data, headers = await _post_json(client, "/chat/completions", body, request.timeout)
        choices = data.get("choices") if isinstance(data, dict) else None
        if not isinstance(choices, list):
            raise MalformedReply("Chat Completions reply has no choices")
        text, content_error, truncated = "", None, False
        if choices and isinstance(choices[0], dict):
            message = choices[0].get("message")
            text, content_error = _chat_text(message if isinstance(message, dict) else {})
            truncated = choices[0].get("finish_reason") == "length"
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        details = usage.get("prompt_tokens_details")
        cached = _int(details.get("cached_tokens", 0)) if isinstance(details, dict) else 0
        return RawReply(text=text, input_tokens=_int(usage.get("prompt_tokens", 0)),
                        output_tokens=_int(usage.get("completion_tokens", 0)),
                        model=data.get("model") or request.model, cached_input_tokens=cached,
                        truncated=truncated, content_error=content_error,
                        headers=headers, system_fingerprint=_text_or_none(
                            data.get("system_fingerprint")))

    async def _responses(self, client: Any, request: JudgeRequest) -> RawReply:
        body: dict[str, Any] = {"model": request.model, "input": request.prompt,
                                "max_output_tokens": request.max_tokens}
        if request.cache_key:
            body["prompt_cache_key"] = request.cache_key
        if not _OPENAI_REASONING.match(request.model):
            body["temperature"] = request.temperature
        system = _openai_json_system(request)
        if system:
            body["instructions"] = system
        if request.json_schema is not None:
            body["text"] = {"format": {"type": "json_schema", "name": SCHEMA_NAME,
                                       "strict": True, "schema": request.json_schema}}
        elif request.json_mode:
            body["text"] = {"format": {"type": "json_object"}}
        data, headers = await _post_json(client, "/responses", body, request.timeout)
        output = data.get("output") if isinstance(data, dict) else None
        if not isinstance(output, list):
            raise MalformedReply("Responses API reply has no output list")
        parts: list[str] = []
        for item in output:
            if not isinstance(item, dict) or item.get("type") != "message":
                continue  # reasoning items carry no answer text
            for block in item.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "output_text":
                    parts.append(block.get("text") or "")
        usage = _dict(data.get("usage"))
        incomplete = _dict(data.get("incomplete_details")).get("reason")
        return RawReply(text="".join(parts), input_tokens=_int(usage.get("input_tokens")),
                        output_tokens=_int(usage.get("output_tokens")),
                        model=data.get("model") or request.model,
                        cached_input_tokens=_int(
                            _dict(usage.get("input_tokens_details")).get("cached_tokens")),
                        truncated=incomplete == "max_output_tokens",
                        headers=headers)


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _dict(value: Any) -> dict[str, Any]:
    """A JSON object of a reply, or an empty one where the reply has none (null, missing)."""
    return value if isinstance(value, dict) else {}


def _chat_text(message: dict[str, Any]) -> tuple[str, str | None]:
    """(text, why there is none) of a Chat Completions message.

    Servers that are only OpenAI-compatible send content as a list of parts, or as JSON that
    is not text at all; parts are joined, anything else is named rather than read as an answer.
    """
    content = message.get("content")
    if isinstance(content, str):
        return content, None
    if isinstance(content, list) and all(
            isinstance(p, str) or (isinstance(p, dict) and isinstance(p.get("text"), str))
            for p in content):
        return "".join(p if isinstance(p, str) else p["text"] for p in content), None
    if content is None:
        refusal = message.get("refusal")
        if isinstance(refusal, str) and refusal.strip():
            return "", f"the judge refused: {refusal.strip()}"
        return "", "the reply's content is null, not text"
    if isinstance(content, dict):
        kind = "an object"
    elif isinstance(content, list):
        kind = "a list of non-text parts"
    elif isinstance(content, bool):
        kind = "a boolean"
    elif isinstance(content, (int, float)):
        kind = "a number"
    else:
        kind = type(content).__name__
    return "", f"the reply's content is {kind}, not text: {json.dumps(content, default=str)}"


@functools.cache
def _messages_create_params(create_type: Any) -> frozenset[str]:
    return frozenset(inspect.signature(create_type.create).parameters)


def _accepts_temperature(client: Any) -> bool:
    """Newer anthropic SDKs dropped `temperature` from Messages; older ones still take it."""
    messages_type: Any = type(client.messages)
    return "temperature" in _messages_create_params(messages_type)


class AnthropicAdapter:
    def credentials(self, cfg: JudgeConfig) -> tuple[str, str | None]:
        base_url = cfg.base_url or os.environ.get("ANTHROPIC_BASE_URL", "").strip()
        api_key = cfg.api_key_value() or os.environ.get("ANTHROPIC_API_KEY") or None
        if api_key is None and not os.environ.get("ANTHROPIC_AUTH_TOKEN"):
            raise ProviderSetupError(
                "no Anthropic API key: set ANTHROPIC_API_KEY or JudgeConfig(api_key=...)")
        return base_url, api_key

    def make_client(self, base_url: str, api_key: str | None, cfg: JudgeConfig) -> Any:
        import anthropic

        http = _aiohttp_http_client(anthropic, cfg.effective_timeout, base_url)
        extra = {"http_client": http} if http is not None else {}
        client = anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url or None,
                                          max_retries=0, timeout=cfg.effective_timeout, **extra)
        _use_direct_http(client, http)
        return client

    async def call(self, client: Any, request: JudgeRequest) -> RawReply:
        # The Messages API has no JSON mode; an instruction plus tolerant parsing stands in.
        # With a shared prefix it goes at the very end, so that the system text stays
        # byte-identical between a case's JSON and plain requests and their prefix is shared.
        # A reply schema is not sent as a forced tool: Anthropic adds a tool-use system prompt
        # of some 300 tokens, plus the schema, to every such request (about doubling a batched
        # request's input at Haiku 4.5), and tools come before the cached material.
        system = request.system
        prefix = request.prompt_prefix if request.prompt.startswith(request.prompt_prefix) else ""
        prompt = request.prompt
        if request.json_mode and prefix:
            prompt = f"{prompt}\n\n{_JSON_INSTRUCTION}"
        elif request.json_mode:
            system = f"{system}\n\n{_JSON_INSTRUCTION}" if system else _JSON_INSTRUCTION
        content: Any = prompt
        if request.cache_breakpoint and prefix:
            content = [{"type": "text", "text": prefix, "cache_control": {"type": "ephemeral"}},
                       {"type": "text", "text": prompt[len(prefix):]}]
        body: dict[str, Any] = {
            "model": request.model, "max_tokens": request.max_tokens,
            "messages": [{"role": "user", "content": content}],
        }
        if _accepts_temperature(client):
            body["temperature"] = request.temperature
        if system:
            body["system"] = system
        data, headers = await _post_json(client, "/v1/messages", body, request.timeout)
        blocks = data.get("content") if isinstance(data, dict) else None
        if not isinstance(blocks, list):
            raise MalformedReply("Messages reply has no content list")
        # Thinking blocks are the model's scratchpad, not its answer.
        text = "".join(block.get("text") or "" for block in blocks
                       if isinstance(block, dict) and block.get("type") == "text")
        usage = _dict(data.get("usage"))
        # Anthropic's input_tokens leaves out what was read from or written to the cache.
        read = _int(usage.get("cache_read_input_tokens"))
        written = _int(usage.get("cache_creation_input_tokens"))
        return RawReply(text=text,
                        input_tokens=_int(usage.get("input_tokens")) + read + written,
                        output_tokens=_int(usage.get("output_tokens")),
                        model=data.get("model") or request.model,
                        cached_input_tokens=read, cache_write_tokens=written,
                        truncated=data.get("stop_reason") == "max_tokens",
                        headers=headers)


def _use_vertex() -> bool:
    return os.environ.get("GOOGLE_GENAI_USE_VERTEXAI", "").strip().lower() in ("1", "true", "yes",
                                                                                "on")


def _import_genai() -> Any:
    try:
        # import_module, not "from google import genai": the latter is satisfied by the
        # attribute an earlier import left on the google package even when the module is gone.
        genai = importlib.import_module("google.genai")
    except ImportError:
        raise ProviderSetupError(
            "the google judge provider needs the google-genai package: "
            "pip install 'referee[google]'") from None
    return genai


@functools.cache
def _takes_json_schema(config_type: type) -> bool:
    """Older google-genai releases have no ``response_json_schema``: JSON mode alone is sent."""
    return "response_json_schema" in getattr(config_type, "model_fields", {})


class GoogleAdapter:
    def credentials(self, cfg: JudgeConfig) -> tuple[str, str | None]:
        _import_genai()
        api_key = (cfg.api_key_value() or os.environ.get("GOOGLE_API_KEY")
                   or os.environ.get("GEMINI_API_KEY") or None)
        if api_key is None and not _use_vertex():
            raise ProviderSetupError(
                "no Google API key: set GOOGLE_API_KEY (or GEMINI_API_KEY), "
                "GOOGLE_GENAI_USE_VERTEXAI=true for Vertex AI, or JudgeConfig(api_key=...)")
        base_url = cfg.base_url
        if _use_vertex() and not cfg.api_key_value():
            base_url = base_url or "vertex"  # distinct endpoint key; never sent anywhere
        return base_url, api_key

    def make_client(self, base_url: str, api_key: str | None, cfg: JudgeConfig) -> Any:
        genai = _import_genai()
        from google.genai import types

        http_options = types.HttpOptions(
            base_url=base_url if base_url and base_url != "vertex" else None,
            timeout=int(cfg.effective_timeout * 1000),
            retry_options=types.HttpRetryOptions(attempts=1),
        )
        if base_url == "vertex":
            return genai.Client(vertexai=True, http_options=http_options)
        return genai.Client(api_key=api_key, vertexai=False if api_key else None,
                            http_options=http_options)

    async def call(self, client: Any, request: JudgeRequest) -> RawReply:
        from google.genai import types

        schema: dict[str, Any] = {}
        if request.json_schema is not None and _takes_json_schema(types.GenerateContentConfig):
            schema["response_json_schema"] = dict(request.json_schema)
        config = types.GenerateContentConfig(
            system_instruction=request.system or None,
            temperature=request.temperature,
            max_output_tokens=request.max_tokens,
            response_mime_type="application/json" if request.json_mode else None,
            **schema,
            http_options=types.HttpOptions(timeout=int(request.timeout * 1000),
                                           retry_options=types.HttpRetryOptions(attempts=1)),
        )
        response = await client.aio.models.generate_content(model=request.model,
                                                            contents=request.prompt,
                                                            config=config)
        candidates = getattr(response, "candidates", None)
        if candidates is None:
            raise MalformedReply("generateContent reply has no candidates")
        parts: list[str] = []
        truncated = False
        if candidates:
            reason = getattr(candidates[0], "finish_reason", None)
            truncated = str(getattr(reason, "name", reason)) == "MAX_TOKENS"
            content = getattr(candidates[0], "content", None)
            for part in getattr(content, "parts", None) or []:
                if getattr(part, "thought", False):
                    continue  # thought summaries are not the answer
                parts.append(getattr(part, "text", None) or "")
        usage = getattr(response, "usage_metadata", None)
        http = getattr(response, "sdk_http_response", None)
        return RawReply(text="".join(parts),
                        input_tokens=_int(getattr(usage, "prompt_token_count", 0)),
                        output_tokens=_int(getattr(usage, "candidates_token_count", 0)),
                        model=getattr(response, "model_version", None) or request.model,
                        cached_input_tokens=_int(getattr(usage, "cached_content_token_count", 0)),
                        truncated=truncated,
                        headers=getattr(http, "headers", None))


_ADAPTERS: dict[str, ProviderAdapter] = {
    "openai": OpenAIAdapter(),
    "anthropic": AnthropicAdapter(),
    "google": GoogleAdapter(),
}


def register_provider(name: str, adapter: ProviderAdapter) -> None:
    """Make ``JudgeConfig(provider=name)`` valid and route its calls to ``adapter``."""
    key = name.strip().lower()
    if key in ("openai", "anthropic", "google"):
        raise ValueError(f"provider {key!r} is built in and cannot be replaced")
    _ADAPTERS[key] = adapter
    _register_provider_name(key)


def adapter_for(provider: str) -> ProviderAdapter:
    try:
        return _ADAPTERS[provider]
    except KeyError:
        raise ProviderSetupError(f"no adapter registered for judge provider {provider!r}") from None
