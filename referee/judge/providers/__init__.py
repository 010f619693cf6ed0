"""Provider adapters over the official async SDKs, one module per provider. Each turns a
JudgeRequest into a RawReply.

Each adapter also carries its provider's rules (``ProviderRules``: defaults, its own hosts, API
choice, prompt caching, reply schemas, retry classification); ``rules_for`` hands them to the
rest of the judge layer, so nothing outside this package asks which provider it is.

SDK-internal retries are switched off everywhere: the judge layer owns retrying, and retries
stacked on retries multiply load exactly when a provider is already struggling. The OpenAI and
Anthropic adapters post JSON through the SDK client (``_sdk.post_json``); ``_direct`` holds the
faster path past the SDK's pipeline and its off switch, ``REFEREE_DIRECT_HTTP=0``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from referee.judge.providers._anthropic import AnthropicAdapter
from referee.judge.providers._base import (
    PLACEHOLDER_API_KEY,
    SCHEMA_NAME,
    CachingRules,
    JudgeRequest,
    ProviderAdapter,
    ProviderRules,
    ProviderSetupError,
    RawReply,
    schema_text,
)
from referee.judge.providers._direct import (
    DIRECT_ATTEMPT_BOUNDED,
    bounds_its_attempts,
    direct_http_enabled,
)
from referee.judge.providers._google import GoogleAdapter
from referee.judge.providers._openai import OpenAIAdapter

if TYPE_CHECKING:
    from referee.judge.config import JudgeConfig

__all__ = [
    "BUILTIN_ADAPTERS",
    "DIRECT_ATTEMPT_BOUNDED",
    "PLACEHOLDER_API_KEY",
    "SCHEMA_NAME",
    "AnthropicAdapter",
    "CachingRules",
    "GoogleAdapter",
    "JudgeRequest",
    "OpenAIAdapter",
    "ProviderAdapter",
    "ProviderRules",
    "ProviderSetupError",
    "RawReply",
    "adapter_for",
    "bounds_its_attempts",
    "direct_http_enabled",
    "known_providers",
    "register_provider",
    "rules_for",
    "schema_text",
    "sends_reply_schema",
]

BUILTIN_ADAPTERS: dict[str, ProviderRules] = {
    "anthropic": AnthropicAdapter(),
    "openai": OpenAIAdapter(),
    "google": GoogleAdapter(),
}
# Each built-in adapter is a ProviderAdapter too (credentials, client, call).
_ADAPTERS: dict[str, ProviderAdapter] = {name: cast(ProviderAdapter, adapter)
                                         for name, adapter in BUILTIN_ADAPTERS.items()}
# A registered adapter that does not derive from ProviderRules: its provider taken at its word.
_DEFAULT_RULES = ProviderRules()


def register_provider(name: str, adapter: ProviderAdapter) -> None:
    """Make ``JudgeConfig(provider=name)`` valid and route its calls to ``adapter``; an adapter
    deriving from ``ProviderRules`` sets its provider's rules too."""
    key = name.strip().lower()
    if key in BUILTIN_ADAPTERS:
        raise ValueError(f"provider {key!r} is built in and cannot be replaced")
    _ADAPTERS[key] = adapter


def known_providers() -> set[str]:
    """The built-in providers and those registered at runtime."""
    return set(_ADAPTERS)


def rules_for(provider: str) -> ProviderRules:
    """``provider``'s rules: its adapter's, or the defaults (a provider registered with an
    adapter that sets none, or a name no adapter serves)."""
    adapter = _ADAPTERS.get(provider)
    return adapter if isinstance(adapter, ProviderRules) else _DEFAULT_RULES


def sends_reply_schema(cfg: JudgeConfig, base_url: str) -> bool:
    """Whether a request's reply schema is sent to the provider at ``base_url``.

    ``JudgeConfig.structured_output`` decides when set; unset, the provider's rule
    (``ProviderRules.sends_reply_schema``): only OpenAI-compatible servers other than OpenAI's
    own API get it, and Anthropic never does."""
    return rules_for(cfg.provider).sends_reply_schema(cfg, base_url)


def adapter_for(provider: str) -> ProviderAdapter:
    try:
        return _ADAPTERS[provider]
    except KeyError:
        raise ProviderSetupError(f"no adapter registered for judge provider {provider!r}") from None
