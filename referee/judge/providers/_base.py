"""What every provider adapter shares: the request and reply types, the adapter Protocol, and
the small readers of a reply's JSON."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

import orjson

from referee.judge.config import JudgeConfig


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
JSON_INSTRUCTION = "Respond with a single JSON object and nothing else."


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


def as_int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) else 0



def text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def as_dict(value: Any) -> dict[str, Any]:
    """A JSON object of a reply, or an empty one where the reply has none (null, missing)."""
    return value if isinstance(value, dict) else {}


def json_value(content: bytes) -> Any:
    """A reply body's JSON; ValueError when it is none. What orjson refuses (NaN, an integer
    past 64 bits) the stdlib reads as it always did."""
    try:
        return orjson.loads(content)
    except ValueError:  # orjson.JSONDecodeError
        return json.loads(content)
