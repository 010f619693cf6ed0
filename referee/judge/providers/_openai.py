"""OpenAI and OpenAI-compatible servers through the official ``openai`` SDK: the client, and the
choice between Chat Completions and the Responses API (``JudgeConfig.api_style``)."""

from __future__ import annotations

import os
import re
from types import MappingProxyType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from referee.content._rules import OPENAI_CONTENT
from referee.judge.providers import _openai_chat, _openai_responses
from referee.judge.providers._base import (
    PLACEHOLDER_API_KEY,
    CachingRules,
    JudgeRequest,
    ProviderRules,
    ProviderSetupError,
    RawReply,
)
from referee.judge.providers._direct import use_direct_http
from referee.judge.providers._sdk import aiohttp_http_client

if TYPE_CHECKING:
    from referee.judge.config import JudgeConfig

# The model names the 10xgraph-style API reads as OpenAI's.
_OPENAI_MODEL = re.compile(r"^(gpt|o1|o3|o4|chatgpt)", re.IGNORECASE)


class OpenAIAdapter(ProviderRules):
    content_rules = OPENAI_CONTENT
    default_model = "gpt-4o-mini"
    own_hosts = ("api.openai.com",)
    base_url_env = "OPENAI_BASE_URL"
    resolves_base_url_from_env = True
    prefix_aliases = ("gpt",)
    api_names = MappingProxyType({"chat": "Chat Completions (/chat/completions)",
                                  "responses": "the Responses API (/responses)"})
    credentials_hint = ("OpenAI", "OPENAI_API_KEY (or OPENAI_BASE_URL)")

    def names_model(self, name: str) -> bool:
        return _OPENAI_MODEL.match(name) is not None

    def available(self, base_url: str) -> bool:
        """A key, or an OpenAI-compatible endpoint (local servers ignore the key)."""
        env = os.environ
        return bool(env.get("OPENAI_API_KEY") or base_url or env.get("OPENAI_BASE_URL"))

    def caching_rules(self, model: str) -> CachingRules | None:
        return CachingRules("openai", min_tokens=1024, step_tokens=128)

    def sends_reply_schema(self, cfg: JudgeConfig, base_url: str) -> bool:
        """Unset, only OpenAI-compatible servers other than OpenAI's own API get the schema
        (llama.cpp, vLLM, Ollama...): there it becomes a decoding grammar that holds a small
        model to the shape asked for. OpenAI's API bills it as input on every request (a
        batched request a quarter to a third more, docs/judge.md), and its models follow the
        instruction, which the reply checks back up."""
        if cfg.structured_output is not None:
            return cfg.structured_output
        if not base_url:
            return False
        host = (urlsplit(base_url).hostname or "").lower()
        return not (host == "openai.com" or host.endswith((".openai.com", ".openai.azure.com")))

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

        http = aiohttp_http_client(openai, cfg.effective_timeout, base_url)
        extra = {"http_client": http} if http is not None else {}
        client = openai.AsyncOpenAI(api_key=api_key, base_url=base_url or None, max_retries=0,
                                    timeout=cfg.effective_timeout, **extra)
        use_direct_http(client, http)
        return client

    async def call(self, client: Any, request: JudgeRequest) -> RawReply:
        if request.api_style == "responses":
            return await _openai_responses.call(client, request)
        return await _openai_chat.call(client, request)
