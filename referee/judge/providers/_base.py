"""What every provider adapter shares: the request and reply types, the adapter Protocol, the
provider's rules (``ProviderRules``), and the small readers of a reply's JSON."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import orjson

from referee.judge import retry

if TYPE_CHECKING:  # the configuration reads the providers' rules, not the other way round
    from referee.content._rules import ContentRules
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
    # Images and PDFs shown with the prompt (referee.content parts, fitted to the provider):
    # each adapter sends them in its API's own shape, after ``prompt_prefix``.
    parts: tuple[Any, ...] = field(default=(), hash=False, compare=False)
    media_tokens: int = 0  # their estimated prompt tokens, for the tpm budget


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


@dataclass(frozen=True)
class CachingRules:
    """A provider's published prompt-caching rules for a model (referee.judge.prompt_caching)."""

    provider: str
    min_tokens: int
    # Cached length is rounded down to this many tokens (OpenAI caches in 128-token steps).
    step_tokens: int = 1
    needs_breakpoint: bool = False  # Anthropic caches only what a cache_control marks
    ttl_s: float = 300.0


class ProviderRules:
    """What a provider's API asks of the rest of referee, beyond a call: its defaults, which
    endpoints are its own, the API a judge uses, prompt caching, reply schemas and how its
    failures are retried. Each built-in adapter derives from this and sets its own, so that no
    code outside ``judge/providers/`` asks which provider it is. An adapter registered at
    runtime that does not derive from it gets these defaults: the provider taken at its word.
    """

    # The model a provider switched to in a configuration layer gets when the layer names none.
    default_model: str = ""
    # The hosts of the provider's own public API. Any other base URL is a server that only
    # speaks its API (a local llama.cpp, Ollama or vLLM server, a gateway). None listed: every
    # endpoint counts as its own.
    own_hosts: tuple[str, ...] = ()
    # The environment variable its SDK reads another endpoint from.
    base_url_env: str = ""
    # Whether the multivon-style resolution writes that endpoint into the resolved config
    # (multivon's ``JudgeConfig.resolve()`` reads OPENAI_BASE_URL).
    resolves_base_url_from_env: bool = False
    # Prefixes the 10xgraph-style API writes before "/" that name this provider
    # ("gemini/gemini-2.5-flash").
    prefix_aliases: tuple[str, ...] = ()
    # The APIs it offers, by ``api_style``, as a run's judge line names them.
    api_names: Mapping[str, str] = MappingProxyType({})
    # (its name, where its credentials come from), for the "no judge is reachable" advice.
    credentials_hint: tuple[str, str] | None = None

    def names_model(self, name: str) -> bool:
        """Whether a bare model name (its last path part, lower-case) is this provider's, as
        the 10xgraph-style API infers it (``gemini*`` is Google's)."""
        return False

    def available(self, base_url: str) -> bool:
        """Whether its SDK is importable and some credentials (or an endpoint) are set."""
        return True

    def is_own_endpoint(self, base_url: str) -> bool:
        """Whether ``base_url`` (not empty) is on one of its own hosts."""
        host = (urlsplit(base_url).hostname or "").lower()
        return any(host == known or host.endswith("." + known) for known in self.own_hosts)

    def default_api_style(self, own_endpoint: bool) -> str:
        """The API a judge uses when its ``api_style`` is not set: the documented Responses API
        at the provider's own endpoint, Chat Completions (which every compatible server has)
        anywhere else."""
        return "responses" if own_endpoint else "chat"

    # Its rules for images and PDFs (referee.content): limits, token costs, text-only models
    # and its API's content shape. None: parts are refused for its judges, in one line.
    content_rules: ContentRules | None = None

    def caching_rules(self, model: str) -> CachingRules | None:
        """Its prompt-caching rules for ``model`` (a bare, lower-case name); None: no caching."""
        return None

    def sends_reply_schema(self, cfg: JudgeConfig, base_url: str) -> bool:
        """Whether a request's reply schema is sent (``JudgeConfig.structured_output``)."""
        return bool(cfg.structured_output)

    def classify(self, exc: BaseException) -> retry.FailureInfo:
        """How a failed call is retried (referee.judge.retry.classify)."""
        return retry.classify(exc)


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
