"""OpenAI and OpenAI-compatible servers through the official ``openai`` SDK: the client, and the
choice between Chat Completions and the Responses API (``JudgeConfig.api_style``)."""

from __future__ import annotations

import os
from typing import Any

from referee.judge.config import JudgeConfig
from referee.judge.providers import _openai_chat, _openai_responses
from referee.judge.providers._base import (
    PLACEHOLDER_API_KEY,
    JudgeRequest,
    ProviderSetupError,
    RawReply,
)
from referee.judge.providers._direct import use_direct_http
from referee.judge.providers._sdk import aiohttp_http_client


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
