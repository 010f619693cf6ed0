"""Provider adapters over the official async SDKs, one module per provider. Each turns a
JudgeRequest into a RawReply.

SDK-internal retries are switched off everywhere: the judge layer owns retrying, and retries
stacked on retries multiply load exactly when a provider is already struggling. The OpenAI and
Anthropic adapters post JSON through the SDK client (``_sdk.post_json``); ``_direct`` holds the
faster path past the SDK's pipeline and its off switch, ``REFEREE_DIRECT_HTTP=0``.
"""

from __future__ import annotations

from referee.judge.config import _register_provider_name
from referee.judge.providers._anthropic import AnthropicAdapter
from referee.judge.providers._base import (
    PLACEHOLDER_API_KEY,
    SCHEMA_NAME,
    JudgeRequest,
    ProviderAdapter,
    ProviderSetupError,
    RawReply,
    schema_text,
    sends_reply_schema,
)
from referee.judge.providers._direct import (
    DIRECT_ATTEMPT_BOUNDED,
    bounds_its_attempts,
    direct_http_enabled,
)
from referee.judge.providers._google import GoogleAdapter
from referee.judge.providers._openai import OpenAIAdapter

__all__ = [
    "DIRECT_ATTEMPT_BOUNDED",
    "PLACEHOLDER_API_KEY",
    "SCHEMA_NAME",
    "AnthropicAdapter",
    "GoogleAdapter",
    "JudgeRequest",
    "OpenAIAdapter",
    "ProviderAdapter",
    "ProviderSetupError",
    "RawReply",
    "adapter_for",
    "bounds_its_attempts",
    "direct_http_enabled",
    "register_provider",
    "schema_text",
    "sends_reply_schema",
]

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
