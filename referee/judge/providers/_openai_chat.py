"""OpenAI's Chat Completions API, and the OpenAI-compatible servers that speak it (llama.cpp,
vLLM, Ollama...): one request's body, and its reply read."""

from __future__ import annotations

import json
import re
from typing import Any

from referee.content._wire import around_prompt, openai_chat_content
from referee.judge.providers._base import (
    JSON_INSTRUCTION,
    SCHEMA_NAME,
    JudgeRequest,
    RawReply,
    as_int,
    text_or_none,
)
from referee.judge.providers._sdk import post_json
from referee.judge.retry import MalformedReply

# Reasoning models reject `temperature` and take `max_completion_tokens` in Chat Completions.
OPENAI_REASONING = re.compile(r"^(o\d|gpt-5)", re.IGNORECASE)


def openai_json_system(request: JudgeRequest) -> str | None:
    """OpenAI's JSON mode rejects requests whose messages never mention JSON."""
    system = request.system
    if request.json_mode and "json" not in f"{system or ''} {request.prompt}".lower():
        system = f"{system}\n\n{JSON_INSTRUCTION}" if system else JSON_INSTRUCTION
    return system


async def call(client: Any, request: JudgeRequest) -> RawReply:
    messages: list[dict[str, Any]] = []
    system = openai_json_system(request)
    if system:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": request.prompt if not request.parts else
                     openai_chat_content(around_prompt(request.prompt, request.prompt_prefix,
                                                       request.parts))})
    body: dict[str, Any] = {"model": request.model, "messages": messages}
    if request.cache_key:
        body["prompt_cache_key"] = request.cache_key
    if OPENAI_REASONING.match(request.model):
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
    data, headers = await post_json(client, "/chat/completions", body, request.timeout)
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
    cached = as_int(details.get("cached_tokens", 0)) if isinstance(details, dict) else 0
    return RawReply(text=text, input_tokens=as_int(usage.get("prompt_tokens", 0)),
                    output_tokens=as_int(usage.get("completion_tokens", 0)),
                    model=data.get("model") or request.model, cached_input_tokens=cached,
                    truncated=truncated, content_error=content_error,
                    headers=headers, system_fingerprint=text_or_none(
                        data.get("system_fingerprint")))


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
