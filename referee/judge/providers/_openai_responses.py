"""OpenAI's Responses API: one request's body, and its reply read."""

from __future__ import annotations

from typing import Any

from referee.content._wire import around_prompt, openai_responses_content
from referee.judge.providers._base import SCHEMA_NAME, JudgeRequest, RawReply, as_dict, as_int
from referee.judge.providers._openai_chat import OPENAI_REASONING, openai_json_system
from referee.judge.providers._sdk import post_json
from referee.judge.retry import MalformedReply


async def call(client: Any, request: JudgeRequest) -> RawReply:
    prompt: Any = request.prompt if not request.parts else [{
        "role": "user", "content": openai_responses_content(
            around_prompt(request.prompt, request.prompt_prefix, request.parts))}]
    body: dict[str, Any] = {"model": request.model, "input": prompt,
                            "max_output_tokens": request.max_tokens}
    if request.cache_key:
        body["prompt_cache_key"] = request.cache_key
    if not OPENAI_REASONING.match(request.model):
        body["temperature"] = request.temperature
    system = openai_json_system(request)
    if system:
        body["instructions"] = system
    if request.json_schema is not None:
        body["text"] = {"format": {"type": "json_schema", "name": SCHEMA_NAME,
                                   "strict": True, "schema": request.json_schema}}
    elif request.json_mode:
        body["text"] = {"format": {"type": "json_object"}}
    data, headers = await post_json(client, "/responses", body, request.timeout)
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
    usage = as_dict(data.get("usage"))
    incomplete = as_dict(data.get("incomplete_details")).get("reason")
    return RawReply(text="".join(parts), input_tokens=as_int(usage.get("input_tokens")),
                    output_tokens=as_int(usage.get("output_tokens")),
                    model=data.get("model") or request.model,
                    cached_input_tokens=as_int(
                        as_dict(usage.get("input_tokens_details")).get("cached_tokens")),
                    truncated=incomplete == "max_output_tokens",
                    headers=headers)
