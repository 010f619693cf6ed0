"""Each provider API as the scripted judge server speaks it: how a request reads, what a reply,
an error and the rate-limit headers look like.

The server picks one ``WireFormat`` per request, from its route (``for_route``), and asks it
everything that differs between the providers: no code here or in server.py asks which
provider it is. A format that several APIs of one provider share (OpenAI's errors and
rate-limit headers) lives in their common base class.
"""

from __future__ import annotations

import datetime
import json
import math
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import unquote, urlsplit

from referee.testing.prompt_cache import CacheUse
from referee.testing.script import (
    RateLimitState,
    RecordedRequest,
    Reply,
    ScriptedToolCall,
    token_counts,
)


def _text_of(content: Any) -> str:
    """Text of a message content in any of the three APIs' shapes."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(t for t in (_text_of(item) for item in content) if t)
    if isinstance(content, dict):
        if isinstance(content.get("text"), str):
            return content["text"]
        for key in ("content", "parts"):
            if key in content:
                return _text_of(content[key])
    return ""


def _user_text(messages: Any) -> str:
    """The user messages' text, one per line."""
    return "\n".join(_text_of(m.get("content")) for m in messages or [] if m.get("role") == "user")


@dataclass(frozen=True)
class ParsedRequest:
    model: str
    prompt: str
    system: str | None
    temperature: float | None
    max_tokens: int | None


@dataclass(frozen=True)
class Answer:
    """What every API's reply body reports: the text, tool calls and token counts."""

    text: str
    reply: Reply
    calls: list[tuple[str, ScriptedToolCall]]  # (call id, call)
    input_tokens: int
    output_tokens: int
    cached: int  # input tokens read from the prompt cache
    written: int  # input tokens written to it
    created: int
    ident: str

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


def _limits(state: RateLimitState) -> Iterator[tuple[str, float, float, float]]:
    """(kind, limit, remaining, seconds to reset) of each limit the state sets."""
    for kind, limit, remaining, reset in (
            ("requests", state.rpm, state.remaining_requests, state.reset_requests_s),
            ("tokens", state.tpm, state.remaining_tokens, state.reset_tokens_s)):
        if limit:
            yield kind, limit, remaining, reset


class WireFormat(ABC):
    """One provider API. Its defaults: OpenAI-shaped error bodies, no limit headers (only
    ``retry-after`` on a 429), no prompt-cache breakpoints, the served model in ``model``,
    nothing after the base URL."""

    provider: ClassVar[str]
    api_style: ClassVar[str]
    # What its SDK appends to the base URL it is given before the API's own path.
    sdk_base_path: ClassVar[str] = ""
    # The reply field that names the model that served it.
    served_model_field: ClassVar[str] = "model"

    @abstractmethod
    def handles(self, route: str) -> bool:
        """Whether a request to ``route`` is one of this API's."""

    @abstractmethod
    def parse(self, route: str, body: dict[str, Any]) -> ParsedRequest:
        """What the scripted judge needs of a request body."""

    @abstractmethod
    def success_body(self, request: RecordedRequest, answer: Answer) -> dict[str, Any]:
        """The API's reply body for ``answer``."""

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": "scripted_error", "param": None,
                          "code": str(status)}}

    def name_served(self, body: dict[str, Any], model: str | None,
                    fingerprint: str | None) -> None:
        """Name ``model`` as the one that served the reply, and ``fingerprint`` as its
        system fingerprint where the API has one."""
        if model is not None:
            body[self.served_model_field] = model

    def cache_breakpoint(self, body: dict[str, Any], system: str | None) -> int | None:
        """Where the request marks the end of its cacheable prefix; None: it marks none."""
        return None

    def rate_limit_headers(self, state: RateLimitState) -> dict[str, str]:
        """The rate-limit headers it sends; on a 429 also when to retry."""
        headers = self.limit_headers(state)
        if not state.admitted:
            headers.update(self.retry_headers(state.retry_after_s))
        return headers

    def limit_headers(self, state: RateLimitState) -> dict[str, str]:
        return {}

    def oversized_image(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """The API's 400 body for a request carrying an image over its documented per-image
        limit; None when it holds none (or the API's limit is not emulated)."""
        return None

    def retry_headers(self, seconds: float) -> dict[str, str]:
        return {"retry-after": str(max(math.ceil(seconds), 1))}


# OpenAI -------------------------------------------------------------------------------------

def _duration(seconds: float) -> str:
    """OpenAI's reset format: ``"20ms"``, ``"1.5s"``, ``"6m0s"``."""
    if seconds < 1.0:
        return f"{math.ceil(seconds * 1000)}ms"
    if seconds < 60.0:
        return f"{seconds:.3f}".rstrip("0").rstrip(".") + "s"
    return f"{int(seconds // 60)}m{seconds % 60:.0f}s"


class _OpenAI(WireFormat):
    provider = "openai"
    sdk_base_path = "/v1"

    def limit_headers(self, state: RateLimitState) -> dict[str, str]:
        headers: dict[str, str] = {}
        for kind, limit, remaining, reset in _limits(state):
            headers[f"x-ratelimit-limit-{kind}"] = str(int(limit))
            headers[f"x-ratelimit-remaining-{kind}"] = str(max(int(remaining), 0))
            headers[f"x-ratelimit-reset-{kind}"] = _duration(reset)
        return headers

    def retry_headers(self, seconds: float) -> dict[str, str]:
        return {"retry-after-ms": str(max(math.ceil(seconds * 1000), 1)),
                **super().retry_headers(seconds)}


def _chat_message(answer: Answer) -> dict[str, Any]:
    """A Chat Completions assistant message; with tool calls, empty text is sent as null.

    ``reply.content_json`` replaces the content as given (null, an object, a list of parts).
    """
    content = answer.text if answer.text or not answer.calls else None
    if answer.reply.content_json is not None:
        content = json.loads(answer.reply.content_json)
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if answer.calls:
        message["tool_calls"] = [
            {"id": call_id, "type": "function",
             "function": {"name": call.name, "arguments": json.dumps(call.arguments)}}
            for call_id, call in answer.calls]
    return message


class _OpenAIChat(_OpenAI):
    api_style = "chat"

    def handles(self, route: str) -> bool:
        return route.endswith("/chat/completions")

    def parse(self, route: str, body: dict[str, Any]) -> ParsedRequest:
        messages = body.get("messages") or []
        system = "\n".join(_text_of(m.get("content")) for m in messages
                           if m.get("role") in ("system", "developer")) or None
        return ParsedRequest(str(body.get("model", "")), _user_text(messages), system,
                             body.get("temperature"),
                             body.get("max_tokens", body.get("max_completion_tokens")))

    def success_body(self, request: RecordedRequest, answer: Answer) -> dict[str, Any]:
        reply = answer.reply
        return {
            "id": f"chatcmpl-{answer.ident}", "object": "chat.completion",
            "created": answer.created, "model": request.model,
            "choices": [{"index": 0, "finish_reason": (
                "length" if reply.cut_off else "tool_calls" if answer.calls else "stop"),
                         "logprobs": None, "message": _chat_message(answer)}],
            "usage": {"prompt_tokens": answer.input_tokens,
                      "completion_tokens": answer.output_tokens,
                      "total_tokens": answer.total_tokens,
                      "prompt_tokens_details": {"cached_tokens": answer.cached}},
        }

    def name_served(self, body: dict[str, Any], model: str | None,
                    fingerprint: str | None) -> None:
        super().name_served(body, model, fingerprint)
        if fingerprint is not None:
            body["system_fingerprint"] = fingerprint


class _OpenAIResponses(_OpenAI):
    api_style = "responses"

    def handles(self, route: str) -> bool:
        return route.endswith("/responses")

    def parse(self, route: str, body: dict[str, Any]) -> ParsedRequest:
        raw_input = body.get("input")
        if isinstance(raw_input, list):
            prompt = "\n".join(_text_of(item) for item in raw_input
                               if not isinstance(item, dict) or item.get("role", "user") == "user")
        else:
            prompt = _text_of(raw_input)
        return ParsedRequest(str(body.get("model", "")), prompt, body.get("instructions"),
                             body.get("temperature"), body.get("max_output_tokens"))

    def success_body(self, request: RecordedRequest, answer: Answer) -> dict[str, Any]:
        reply, ident = answer.reply, answer.ident
        output: list[dict[str, Any]] = []
        if reply.thinking:
            output.append({"type": "reasoning", "id": f"rs_{ident}", "summary": [
                {"type": "summary_text", "text": reply.thinking}]})
        if answer.text or not answer.calls:
            output.append({"type": "message", "id": f"msg_{ident}", "status": "completed",
                           "role": "assistant", "content": [
                               {"type": "output_text", "text": answer.text, "annotations": []}]})
        output.extend({"type": "function_call", "id": f"fc_{uuid.uuid4().hex[:20]}",
                       "call_id": call_id, "name": call.name,
                       "arguments": json.dumps(call.arguments), "status": "completed"}
                      for call_id, call in answer.calls)
        return {
            "id": f"resp_{ident}", "object": "response", "created_at": answer.created,
            "status": "incomplete" if reply.cut_off else "completed",
            "model": request.model, "output": output, "parallel_tool_calls": True,
            "tool_choice": "auto", "tools": [], "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if reply.cut_off else None,
            "usage": {"input_tokens": answer.input_tokens,
                      "output_tokens": answer.output_tokens,
                      "total_tokens": answer.total_tokens,
                      "input_tokens_details": {"cached_tokens": answer.cached},
                      "output_tokens_details": {"reasoning_tokens": 0}},
        }


# Anthropic ----------------------------------------------------------------------------------

def _instant(seconds: float) -> str:
    """Anthropic's reset format: an RFC 3339 UTC instant."""
    when = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# Anthropic takes at most 5 MB per image, measured on the base64 text the request carries (its
# 400 names ``...image.source.base64`` and counts that text's length).
ANTHROPIC_MAX_IMAGE_BASE64 = 5 * 1024 * 1024


def _base64_image_length(block: Any) -> int:
    if not isinstance(block, dict) or block.get("type") != "image":
        return 0
    source = block.get("source")
    if not isinstance(source, dict) or source.get("type") != "base64":
        return 0
    data = source.get("data")
    return len(data) if isinstance(data, str) else 0


class _AnthropicMessages(WireFormat):
    provider = "anthropic"
    api_style = "messages"

    def handles(self, route: str) -> bool:
        return route.endswith("/messages")

    def parse(self, route: str, body: dict[str, Any]) -> ParsedRequest:
        return ParsedRequest(str(body.get("model", "")), _user_text(body.get("messages")),
                             _text_of(body.get("system")) or None, body.get("temperature"),
                             body.get("max_tokens"))

    def success_body(self, request: RecordedRequest, answer: Answer) -> dict[str, Any]:
        reply = answer.reply
        content: list[dict[str, Any]] = []
        if reply.thinking:
            content.append({"type": "thinking", "thinking": reply.thinking,
                            "signature": "scripted"})
        if answer.text or not answer.calls:
            content.append({"type": "text", "text": answer.text})
        content.extend({"type": "tool_use", "id": call_id, "name": call.name,
                        "input": call.arguments} for call_id, call in answer.calls)
        return {
            "id": f"msg_{answer.ident}", "type": "message", "role": "assistant",
            "model": request.model, "content": content, "stop_reason": (
                "max_tokens" if reply.cut_off else "tool_use" if answer.calls else "end_turn"),
            "stop_sequence": None,
            # Anthropic counts cache reads and writes apart from input_tokens.
            "usage": {"input_tokens": answer.input_tokens - answer.cached - answer.written,
                      "output_tokens": answer.output_tokens,
                      "cache_read_input_tokens": answer.cached,
                      "cache_creation_input_tokens": answer.written},
        }

    max_image_base64: ClassVar[int] = ANTHROPIC_MAX_IMAGE_BASE64

    def oversized_image(self, body: dict[str, Any]) -> dict[str, Any] | None:
        messages = body.get("messages")
        for i, message in enumerate(messages if isinstance(messages, list) else []):
            content = message.get("content") if isinstance(message, dict) else None
            for j, block in enumerate(content if isinstance(content, list) else []):
                size = _base64_image_length(block)
                if size > self.max_image_base64:
                    return {"type": "error", "error": {
                        "type": "invalid_request_error",
                        "message": f"messages.{i}.content.{j}.image.source.base64: image "
                                   f"exceeds 5 MB maximum: {size} bytes > "
                                   f"{self.max_image_base64} bytes"}}
        return None

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind = "rate_limit_error" if status == 429 else (
            "overloaded_error" if status == 529 else "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}

    def limit_headers(self, state: RateLimitState) -> dict[str, str]:
        headers: dict[str, str] = {}
        for kind, limit, remaining, reset in _limits(state):
            prefix = f"anthropic-ratelimit-{kind}"
            headers[f"{prefix}-limit"] = str(int(limit))
            headers[f"{prefix}-remaining"] = str(max(int(remaining), 0))
            headers[f"{prefix}-reset"] = _instant(reset)
        return headers

    def cache_breakpoint(self, body: dict[str, Any], system: str | None) -> int | None:
        """Where the last ``cache_control`` block ends in the request's ``cache_text``."""
        found: int | None = None
        system_blocks = body.get("system")
        if isinstance(system_blocks, list):
            offset = 0
            for block in system_blocks:
                text = _text_of(block)
                if not text:
                    continue
                offset += len(text)
                if isinstance(block, dict) and block.get("cache_control"):
                    found = offset
                offset += 1  # the "\n" _text_of joins blocks with
        offset = len(system or "") + 2
        first_text = True
        for message in body.get("messages") or []:
            if message.get("role") != "user":
                continue
            content = message.get("content")
            blocks = content if isinstance(content, list) else [content]
            for block in blocks:
                text = _text_of(block)
                if not text:
                    continue
                if not first_text:
                    offset += 1
                first_text = False
                offset += len(text)
                if isinstance(block, dict) and block.get("cache_control"):
                    found = offset
        return found


# Google -------------------------------------------------------------------------------------

_GOOGLE_STATUS_NAMES = {429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE",
                        400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 404: "NOT_FOUND"}


class _GoogleGenerateContent(WireFormat):
    provider = "google"
    api_style = "generate_content"
    served_model_field = "modelVersion"

    def handles(self, route: str) -> bool:
        return ":generateContent" in route

    def parse(self, route: str, body: dict[str, Any]) -> ParsedRequest:
        model = unquote(route.rsplit("/models/", 1)[-1].split(":", 1)[0])
        contents = body.get("contents") or []
        if isinstance(contents, list):
            prompt = "\n".join(_text_of(c) for c in contents
                               if not isinstance(c, dict) or c.get("role", "user") == "user")
        else:
            prompt = _text_of(contents)
        instruction = body.get("systemInstruction", body.get("system_instruction"))
        generation = body.get("generationConfig", body.get("generation_config")) or {}
        return ParsedRequest(model, prompt, _text_of(instruction) or None,
                             generation.get("temperature"),
                             generation.get("maxOutputTokens",
                                            generation.get("max_output_tokens")))

    def success_body(self, request: RecordedRequest, answer: Answer) -> dict[str, Any]:
        reply = answer.reply
        parts: list[dict[str, Any]] = []
        if reply.thinking:
            parts.append({"text": reply.thinking, "thought": True})
        if answer.text or not answer.calls:
            parts.append({"text": answer.text})
        parts.extend({"functionCall": {"id": call_id, "name": call.name,
                                       "args": call.arguments}}
                     for call_id, call in answer.calls)
        return {
            "candidates": [{"content": {"role": "model", "parts": parts},
                            "finishReason": "MAX_TOKENS" if reply.cut_off else "STOP",
                            "index": 0}],
            "usageMetadata": {"promptTokenCount": answer.input_tokens,
                              "candidatesTokenCount": answer.output_tokens,
                              "totalTokenCount": answer.total_tokens,
                              **({"cachedContentTokenCount": answer.cached}
                                 if answer.cached else {})},
            "modelVersion": request.model,
        }

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"error": {"code": status, "message": message,
                          "status": _GOOGLE_STATUS_NAMES.get(status, "UNKNOWN")}}


# The table ----------------------------------------------------------------------------------

# In the order routes are tried (a Responses route never ends in /chat/completions).
FORMATS: tuple[WireFormat, ...] = (_OpenAIChat(), _OpenAIResponses(), _AnthropicMessages(),
                                   _GoogleGenerateContent())
_BY_API = {(f.provider, f.api_style): f for f in FORMATS}
# What a provider's APIs share, spoken by its first one.
_BY_PROVIDER = {f.provider: f for f in reversed(FORMATS)}


class _Unemulated(WireFormat):
    """A provider the server has no API of: the base format's errors and headers."""

    provider = api_style = ""

    def handles(self, route: str) -> bool:
        return False

    def parse(self, route: str, body: dict[str, Any]) -> ParsedRequest:
        raise LookupError("the scripted judge emulates no API of this provider")

    def success_body(self, request: RecordedRequest, answer: Answer) -> dict[str, Any]:
        raise LookupError("the scripted judge emulates no API of this provider")


_UNEMULATED = _Unemulated()


def for_route(route: str) -> WireFormat:
    """The API a request path belongs to; LookupError when the server has no such route."""
    for wire in FORMATS:
        if wire.handles(route):
            return wire
    raise LookupError(route)


def for_request(request: RecordedRequest) -> WireFormat:
    """The API a recorded request was made to."""
    return _BY_API[(request.provider, request.api_style)]


def for_provider(provider: str) -> WireFormat:
    """The provider's API for what all its APIs share (errors, headers, the SDK's base path)."""
    return _BY_PROVIDER.get(provider, _UNEMULATED)


def answer_of(request: RecordedRequest, reply: Reply, text: str,
              use: CacheUse | None = None) -> Answer:
    """The reply's counts, recorded on ``request`` as the server reports them."""
    input_tokens, output_tokens = token_counts(reply, request)
    cached = min(use.cached_tokens, input_tokens) if use is not None else 0
    written = min(use.write_tokens, input_tokens - cached) if use is not None else 0
    request.input_tokens, request.output_tokens = input_tokens, output_tokens
    request.cached_input_tokens, request.cache_write_tokens = cached, written
    calls = [(call.call_id or f"call_{uuid.uuid4().hex[:20]}", call) for call in reply.tool_calls]
    return Answer(text=text, reply=reply, calls=calls, input_tokens=input_tokens,
                  output_tokens=output_tokens, cached=cached, written=written,
                  created=int(time.time()), ident=uuid.uuid4().hex[:24])


# Whole requests and replies, for a server that reads and answers requests one by one --------

def parse_request(path: str, body: dict[str, Any]) -> tuple[str, str, str, str, str | None,
                                                           float | None, int | None]:
    """(provider, api_style, model, prompt, system, temperature, max_tokens) of a request."""
    route = urlsplit(path).path
    wire = for_route(route)
    parsed = wire.parse(route, body)
    return (wire.provider, wire.api_style, parsed.model, parsed.prompt, parsed.system,
            parsed.temperature, parsed.max_tokens)


def success_body(request: RecordedRequest, reply: Reply, text: str,
                 use: CacheUse | None = None) -> dict[str, Any]:
    """The reply body ``request``'s API answers ``text`` with (its counts recorded on it)."""
    return for_request(request).success_body(request, answer_of(request, reply, text, use))


def error_body(provider: str, status: int, message: str) -> dict[str, Any]:
    """The error body ``provider`` answers ``status`` with."""
    return for_provider(provider).error_body(status, message)
