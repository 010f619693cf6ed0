"""Provider adapters over the official async SDKs. Each one turns a JudgeRequest into a RawReply.

SDK-internal retries are switched off everywhere: the judge layer owns retrying, and retries
stacked on retries multiply load exactly when a provider is already struggling.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
from dataclasses import dataclass
from typing import Any, Protocol

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


@dataclass(frozen=True)
class RawReply:
    text: str
    input_tokens: int  # every prompt token, cached ones included
    output_tokens: int
    model: str
    cached_input_tokens: int = 0  # read from the provider's prompt cache
    cache_write_tokens: int = 0   # written to it


class ProviderSetupError(Exception):
    """The provider cannot be used at all (missing SDK, missing credentials); never retried."""


class ProviderAdapter(Protocol):
    def credentials(self, cfg: JudgeConfig) -> tuple[str, str | None]:
        """(base_url, api_key) after applying the SDK's own environment variables."""

    def make_client(self, base_url: str, api_key: str | None, cfg: JudgeConfig) -> Any:
        """A new SDK client; called on the event loop that will use it."""

    async def call(self, client: Any, request: JudgeRequest) -> RawReply:
        """One attempt, no retries."""


_JSON_INSTRUCTION = "Respond with a single JSON object and nothing else."
# Reasoning models reject `temperature` and take `max_completion_tokens` in Chat Completions.
_OPENAI_REASONING = re.compile(r"^(o\d|gpt-5)", re.IGNORECASE)


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) else 0


def _openai_json_system(request: JudgeRequest) -> str | None:
    """OpenAI's JSON mode rejects requests whose messages never mention JSON."""
    system = request.system
    if request.json_mode and "json" not in f"{system or ''} {request.prompt}".lower():
        system = f"{system}\n\n{_JSON_INSTRUCTION}" if system else _JSON_INSTRUCTION
    return system


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
            api_key = "not-needed"
        return base_url, api_key

    def make_client(self, base_url: str, api_key: str | None, cfg: JudgeConfig) -> Any:
        import openai

        return openai.AsyncOpenAI(api_key=api_key, base_url=base_url or None, max_retries=0,
                                  timeout=cfg.effective_timeout)

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
        if request.json_mode:
            body["response_format"] = {"type": "json_object"}
        # The SDK's typed create() re-walks the params against TypedDicts and builds a pydantic
        # reply per call, about a millisecond of event-loop CPU each; at judge concurrency that
        # CPU, not the provider, bounds throughput. post() keeps the SDK's client, auth, errors
        # and timeouts, and the reply is read as the JSON it is.
        import httpx

        response = await client.post("/chat/completions", body=body, cast_to=httpx.Response,
                                     options={"timeout": request.timeout})
        try:
            data = response.json()
        except ValueError as exc:
            raise MalformedReply(f"Chat Completions reply is not JSON: {exc}") from None
        choices = data.get("choices") if isinstance(data, dict) else None
        if not isinstance(choices, list):
            raise MalformedReply("Chat Completions reply has no choices")
        text = ""
        if choices and isinstance(choices[0], dict):
            message = choices[0].get("message")
            text = (message.get("content") if isinstance(message, dict) else None) or ""
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        details = usage.get("prompt_tokens_details")
        cached = _int(details.get("cached_tokens", 0)) if isinstance(details, dict) else 0
        return RawReply(text=text, input_tokens=_int(usage.get("prompt_tokens", 0)),
                        output_tokens=_int(usage.get("completion_tokens", 0)),
                        model=data.get("model") or request.model, cached_input_tokens=cached)

    async def _responses(self, client: Any, request: JudgeRequest) -> RawReply:
        params: dict[str, Any] = {"model": request.model, "input": request.prompt,
                                  "max_output_tokens": request.max_tokens,
                                  "timeout": request.timeout}
        if request.cache_key:
            params["prompt_cache_key"] = request.cache_key
        if not _OPENAI_REASONING.match(request.model):
            params["temperature"] = request.temperature
        system = _openai_json_system(request)
        if system:
            params["instructions"] = system
        if request.json_mode:
            params["text"] = {"format": {"type": "json_object"}}
        response = await client.responses.create(**params)
        output = getattr(response, "output", None)
        if not isinstance(output, list):
            raise MalformedReply("Responses API reply has no output list")
        parts: list[str] = []
        for item in output:
            if getattr(item, "type", None) != "message":
                continue  # reasoning items carry no answer text
            for block in getattr(item, "content", None) or []:
                if getattr(block, "type", None) == "output_text":
                    parts.append(getattr(block, "text", "") or "")
        usage = getattr(response, "usage", None)
        details = getattr(usage, "input_tokens_details", None)
        return RawReply(text="".join(parts), input_tokens=_int(getattr(usage, "input_tokens", 0)),
                        output_tokens=_int(getattr(usage, "output_tokens", 0)),
                        model=getattr(response, "model", None) or request.model,
                        cached_input_tokens=_int(getattr(details, "cached_tokens", 0)))


@functools.lru_cache(maxsize=None)
def _messages_create_params(create_type: type) -> frozenset[str]:
    return frozenset(inspect.signature(create_type.create).parameters)


def _accepts_temperature(client: Any) -> bool:
    """Newer anthropic SDKs dropped `temperature` from Messages; older ones still take it."""
    return "temperature" in _messages_create_params(type(client.messages))


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

        return anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url or None, max_retries=0,
                                        timeout=cfg.effective_timeout)

    async def call(self, client: Any, request: JudgeRequest) -> RawReply:
        # The Messages API has no JSON mode; an instruction plus tolerant parsing stands in.
        # With a shared prefix it goes at the very end, so that the system text stays
        # byte-identical between a case's JSON and plain requests and their prefix is shared.
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
        params: dict[str, Any] = {
            "model": request.model, "max_tokens": request.max_tokens,
            "messages": [{"role": "user", "content": content}],
            "timeout": request.timeout,
        }
        if _accepts_temperature(client):
            params["temperature"] = request.temperature
        if system:
            params["system"] = system
        response = await client.messages.create(**params)
        content = getattr(response, "content", None)
        if not isinstance(content, list):
            raise MalformedReply("Messages reply has no content list")
        # Thinking blocks are the model's scratchpad, not its answer.
        text = "".join(getattr(block, "text", "") or "" for block in content
                       if getattr(block, "type", None) == "text")
        usage = getattr(response, "usage", None)
        # Anthropic's input_tokens leaves out what was read from or written to the cache.
        read = _int(getattr(usage, "cache_read_input_tokens", 0))
        written = _int(getattr(usage, "cache_creation_input_tokens", 0))
        return RawReply(text=text,
                        input_tokens=_int(getattr(usage, "input_tokens", 0)) + read + written,
                        output_tokens=_int(getattr(usage, "output_tokens", 0)),
                        model=getattr(response, "model", None) or request.model,
                        cached_input_tokens=read, cache_write_tokens=written)


def _use_vertex() -> bool:
    return os.environ.get("GOOGLE_GENAI_USE_VERTEXAI", "").strip().lower() in ("1", "true", "yes",
                                                                                "on")


def _import_genai() -> Any:
    try:
        from google import genai
    except ImportError:
        raise ProviderSetupError(
            "the google judge provider needs the google-genai package: "
            "pip install 'referee[google]'") from None
    return genai


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

        config = types.GenerateContentConfig(
            system_instruction=request.system or None,
            temperature=request.temperature,
            max_output_tokens=request.max_tokens,
            response_mime_type="application/json" if request.json_mode else None,
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
        if candidates:
            content = getattr(candidates[0], "content", None)
            for part in getattr(content, "parts", None) or []:
                if getattr(part, "thought", False):
                    continue  # thought summaries are not the answer
                parts.append(getattr(part, "text", None) or "")
        usage = getattr(response, "usage_metadata", None)
        return RawReply(text="".join(parts),
                        input_tokens=_int(getattr(usage, "prompt_token_count", 0)),
                        output_tokens=_int(getattr(usage, "candidates_token_count", 0)),
                        model=getattr(response, "model_version", None) or request.model,
                        cached_input_tokens=_int(getattr(usage, "cached_content_token_count", 0)))


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
