"""Anthropic's Messages API through the official ``anthropic`` SDK."""

from __future__ import annotations

import functools
import inspect
import os
import re
from typing import TYPE_CHECKING, Any

from referee.content._rules import ANTHROPIC_CONTENT
from referee.content._wire import anthropic_content, around_prompt
from referee.judge.providers._base import (
    JSON_INSTRUCTION,
    CachingRules,
    JudgeRequest,
    ProviderRules,
    ProviderSetupError,
    RawReply,
    as_dict,
    as_int,
)
from referee.judge.providers._direct import use_direct_http
from referee.judge.providers._sdk import aiohttp_http_client, post_json
from referee.judge.retry import MalformedReply

if TYPE_CHECKING:
    from referee.judge.config import JudgeConfig

# The shortest prefix Anthropic caches, by model (checked 2026-12-01, referee.judge.prompt_caching).
_CACHE_MINIMUMS = (
    (re.compile(r"claude-(haiku-4-5|opus-4-5|opus-4-6|opus-4-7)"), 4096),
    (re.compile(r"claude-(3-5-haiku|3-haiku|haiku-3)"), 2048),
)


@functools.cache
def _messages_create_params(create_type: Any) -> frozenset[str]:
    return frozenset(inspect.signature(create_type.create).parameters)


def _accepts_temperature(client: Any) -> bool:
    """Newer anthropic SDKs dropped `temperature` from Messages; older ones still take it."""
    messages_type: Any = type(client.messages)
    return "temperature" in _messages_create_params(messages_type)


class AnthropicAdapter(ProviderRules):
    content_rules = ANTHROPIC_CONTENT
    default_model = "claude-haiku-4-5"
    own_hosts = ("api.anthropic.com",)
    base_url_env = "ANTHROPIC_BASE_URL"
    prefix_aliases = ("claude",)
    credentials_hint = ("Anthropic", "ANTHROPIC_API_KEY")

    def names_model(self, name: str) -> bool:
        return name.startswith("claude")

    def available(self, base_url: str) -> bool:
        return bool(os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN"))

    def caching_rules(self, model: str) -> CachingRules | None:
        minimum = next((m for pattern, m in _CACHE_MINIMUMS if pattern.search(model)), 1024)
        return CachingRules("anthropic", min_tokens=minimum, needs_breakpoint=True)

    def sends_reply_schema(self, cfg: JudgeConfig, base_url: str) -> bool:
        """Never: a forced tool would add Anthropic's tool-use system prompt."""
        return False

    def credentials(self, cfg: JudgeConfig) -> tuple[str, str | None]:
        base_url = cfg.base_url or os.environ.get("ANTHROPIC_BASE_URL", "").strip()
        api_key = cfg.api_key_value() or os.environ.get("ANTHROPIC_API_KEY") or None
        if api_key is None and not os.environ.get("ANTHROPIC_AUTH_TOKEN"):
            raise ProviderSetupError(
                "no Anthropic API key: set ANTHROPIC_API_KEY or JudgeConfig(api_key=...)")
        return base_url, api_key

    def make_client(self, base_url: str, api_key: str | None, cfg: JudgeConfig) -> Any:
        import anthropic

        http = aiohttp_http_client(anthropic, cfg.effective_timeout, base_url)
        extra = {"http_client": http} if http is not None else {}
        client = anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url or None,
                                          max_retries=0, timeout=cfg.effective_timeout, **extra)
        use_direct_http(client, http)
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
            prompt = f"{prompt}\n\n{JSON_INSTRUCTION}"
        elif request.json_mode:
            system = f"{system}\n\n{JSON_INSTRUCTION}" if system else JSON_INSTRUCTION
        content: Any = prompt
        if request.parts:
            content = anthropic_content(around_prompt(prompt, prefix, request.parts))
            if request.cache_breakpoint and prefix:  # the material and its media are shared
                content[-2 if prompt[len(prefix):] else -1]["cache_control"] = {
                    "type": "ephemeral"}
        elif request.cache_breakpoint and prefix:
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
        data, headers = await post_json(client, "/v1/messages", body, request.timeout)
        blocks = data.get("content") if isinstance(data, dict) else None
        if not isinstance(blocks, list):
            raise MalformedReply("Messages reply has no content list")
        # Thinking blocks are the model's scratchpad, not its answer.
        text = "".join(block.get("text") or "" for block in blocks
                       if isinstance(block, dict) and block.get("type") == "text")
        usage = as_dict(data.get("usage"))
        # Anthropic's input_tokens leaves out what was read from or written to the cache.
        read = as_int(usage.get("cache_read_input_tokens"))
        written = as_int(usage.get("cache_creation_input_tokens"))
        return RawReply(text=text,
                        input_tokens=as_int(usage.get("input_tokens")) + read + written,
                        output_tokens=as_int(usage.get("output_tokens")),
                        model=data.get("model") or request.model,
                        cached_input_tokens=read, cache_write_tokens=written,
                        truncated=data.get("stop_reason") == "max_tokens",
                        headers=headers)
