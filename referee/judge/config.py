"""Judge configuration: JudgeConfig, the global ``configure()`` and multivon's resolution order."""

from __future__ import annotations

import functools
import os
import threading
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ConfigDict, Field, PrivateAttr, SecretStr, field_validator

from referee._strict import StrictModel
from referee.judge.environment import env_switch
from referee.judge.providers import BUILTIN_ADAPTERS, known_providers, rules_for
from referee.redact import BaseURL, mask_url_fields, remember_secret

BUILTIN_PROVIDERS = tuple(BUILTIN_ADAPTERS)

# The multivon-style API: "None = inherit"; these are the effective values when no layer sets them.
EFFECTIVE_TEMPERATURE = 0.0
EFFECTIVE_MAX_TOKENS = 1024
EFFECTIVE_TIMEOUT = 30.0
# A per-question verdict is one word, perhaps with a reason. At a server that is not the
# provider's own API (a local model), every token is the user's own wall time, and a small
# model given 1024 rambles to the cap; there a verdict gets this many unless max_tokens is set.
VERDICT_MAX_TOKENS = 128
# Not in the multivon-style API's table; the published implementation's default sample count.
EFFECTIVE_RELIABILITY_SAMPLE = 5
# Unset, max_concurrency adapts per endpoint up to this ceiling; set, it pins the limit.
DEFAULT_MAX_CONCURRENCY = 64
DEFAULT_MAX_RETRIES = 4
DEFAULT_RETRY_MAX_TOTAL_S = 120.0
# A 429 is the provider setting the pace: keep going at its pace for this long before giving up.
DEFAULT_RATE_LIMIT_WAIT_S = 600.0

# A provider switched in one layer must not inherit another provider's model name: it gets its
# adapter's default model.
DEFAULT_MODELS = {name: rules.default_model for name, rules in BUILTIN_ADAPTERS.items()}


@dataclass(frozen=True)
class DefaultJudge:
    """What an API surface's judged criteria assume where the user says nothing: the judge
    they call and its temperature (each API keeps its own documented default), and the
    surface's judge rules, as settings its criteria give the one judged-criterion core."""

    model: str
    provider: str  # empty: inferred from the model's name (``gemini*`` is Google, ...)
    temperature: float
    # True: ``CriterionConfig.judge_model`` names the judge, so the criterion's config is its
    # record; False: the judge is resolved in layers (judge= > configure() > environment >
    # default), and a run records that resolved judge, not the config's judge fields.
    named_by_config: bool = False
    # The score given when no provider can serve the judge (the 10xgraph-style API's 0.5 "No
    # LLM provider available", recorded as a judge error); None: the criterion has no such
    # placeholder.
    unreachable_score: float | None = None


AGENT_EVALUATOR = "AgentEvaluator"
EVAL_SUITE = "EvalSuite"
# The 10xgraph-style AgentEvaluator API's documented judge_model. Defined here, where the
# defaults below are, so that the judge layer imports nothing from referee.config above it.
DEFAULT_JUDGE_MODEL = "gemini-2.5-flash"

# One documented default per API surface (docs/judge.md, "Default judges"). The 10xgraph-style
# AgentEvaluator criteria name their judge in ``CriterionConfig.judge_model`` and sample it at
# 0.3 in JSON mode; the multivon-style EvalSuite evaluators resolve a JudgeConfig whose last
# layer is this default, at temperature 0.0.
DEFAULT_JUDGES = {
    AGENT_EVALUATOR: DefaultJudge(model=DEFAULT_JUDGE_MODEL, provider="", temperature=0.3,
                                  named_by_config=True, unreachable_score=0.5),
    EVAL_SUITE: DefaultJudge(model="claude-haiku-4-5", provider="anthropic",
                             temperature=EFFECTIVE_TEMPERATURE),
}

class JudgeConfig(StrictModel):
    """Which model judges, and how it is called.

    ``temperature``, ``max_tokens``, ``timeout`` and ``reliability_sample`` default to ``None``
    ("inherit"): an explicit value, including ``0.0``, always wins over a lower layer.
    ``reliability_check=True`` asks the judge again on ``reliability_sample`` cases after a run
    (``suite.run()``, a resume or re-score) and reports how often it repeated its verdicts
    (``EvalReport.judge_reliability``; referee/run/reliability.py).
    """

    # NaN passes every range check ("nan <= 0" is false), so it is refused outright, as is inf.
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    provider: str = DEFAULT_JUDGES[EVAL_SUITE].provider
    model: str = DEFAULT_JUDGES[EVAL_SUITE].model
    base_url: BaseURL = ""
    temperature: float | None = None
    max_tokens: int | None = None
    timeout: float | None = None
    reliability_sample: int | None = None
    reliability_check: bool = False
    # referee extensions
    api_key: SecretStr | None = Field(default=None, exclude=True, repr=False)
    api_style: Literal["chat", "responses"] = "chat"
    max_concurrency: int | None = None
    rpm: float | None = None
    tpm: float | None = None
    max_retries: int | None = None
    retry_max_total_s: float | None = None
    rate_limit_wait_s: float | None = None
    cache: bool | None = None
    cache_path: str | None = None
    # Send a request's reply schema where the provider enforces one (None: only to
    # OpenAI-compatible servers other than OpenAI's own API; see providers.sends_reply_schema).
    structured_output: bool | None = None
    # Batch seam (referee/judge/batch): send requests through the provider's batch API at its
    # batch price. None: REFEREE_JUDGE_BATCH_API decides, off when unset.
    batch_api: bool | None = None
    # A request no batch could answer (after its bounded retries): a judge error ("error"),
    # or asked online at the online price ("online").
    batch_fallback: Literal["error", "online"] = "error"
    # Resolution filled max_tokens with the effective default: no layer chose it.
    _max_tokens_filled: bool = PrivateAttr(default=False)

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, value: str) -> str:
        value = value.strip().lower()
        if value not in known_providers():
            known = ", ".join(sorted(known_providers()))
            raise ValueError(f"unknown judge provider {value!r} (expected one of: {known})")
        return value

    @field_validator("api_key")
    @classmethod
    def _remember_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            remember_secret(value.get_secret_value())
        return value

    def __repr_args__(self) -> Any:
        return mask_url_fields(super().__repr_args__())  # a base_url password is never printed

    @field_validator("model")
    @classmethod
    def _non_empty_model(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("judge model name must not be empty")
        return value.strip()

    @field_validator("temperature")
    @classmethod
    def _temperature_range(cls, value: float | None) -> float | None:
        if value is not None and not 0.0 <= value <= 2.0:
            raise ValueError(f"temperature must be between 0.0 and 2.0, got {value}")
        return value

    @field_validator("max_tokens", "max_concurrency")
    @classmethod
    def _positive_int(cls, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise ValueError(f"must be at least 1, got {value}")
        return value

    @field_validator("max_retries")
    @classmethod
    def _non_negative(cls, value: int | None) -> int | None:
        if value is not None and value < 0:
            raise ValueError(f"max_retries must be at least 0, got {value}")
        return value

    @field_validator("rpm", "tpm")
    @classmethod
    def _positive_budget(cls, value: float | None) -> float | None:
        if value is not None and not 0 < value < float("inf"):
            raise ValueError(f"must be a positive number per minute, got {value}")
        return value

    @field_validator("timeout", "retry_max_total_s", "rate_limit_wait_s")
    @classmethod
    def _positive_seconds(cls, value: float | None) -> float | None:
        if value is not None and value <= 0:
            raise ValueError(f"must be a positive number of seconds, got {value}")
        return value

    @field_validator("reliability_sample")
    @classmethod
    def _sample_count(cls, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise ValueError(f"reliability_sample must be at least 1, got {value}")
        return value

    # Effective values: what a call actually uses when the field was left to inherit.
    @property
    def effective_batch_api(self) -> bool:
        if self.batch_api is not None:
            return self.batch_api
        return bool(env_switch("REFEREE_JUDGE_BATCH_API"))

    @property
    def effective_temperature(self) -> float:
        return EFFECTIVE_TEMPERATURE if self.temperature is None else self.temperature

    @property
    def effective_max_tokens(self) -> int:
        return EFFECTIVE_MAX_TOKENS if self.max_tokens is None else self.max_tokens

    @property
    def max_tokens_chosen(self) -> bool:
        """Whether max_tokens was set (by this config or a layer it was resolved from), rather
        than left to the effective default."""
        return self.max_tokens is not None and not (
            self._max_tokens_filled and self.max_tokens == EFFECTIVE_MAX_TOKENS)

    @property
    def effective_timeout(self) -> float:
        return EFFECTIVE_TIMEOUT if self.timeout is None else self.timeout

    @property
    def effective_reliability_sample(self) -> int:
        return EFFECTIVE_RELIABILITY_SAMPLE if self.reliability_sample is None else self.reliability_sample

    @property
    def effective_max_concurrency(self) -> int:
        """The pinned limit, or the ceiling adaptive concurrency grows to."""
        if self.max_concurrency is not None:
            return self.max_concurrency
        env = _env_int("REFEREE_JUDGE_CONCURRENCY")
        return env if env is not None else DEFAULT_MAX_CONCURRENCY

    @property
    def concurrency_pinned(self) -> bool:
        """An explicit max_concurrency (or REFEREE_JUDGE_CONCURRENCY) fixes the limit exactly."""
        return self.max_concurrency is not None or _env_int("REFEREE_JUDGE_CONCURRENCY") is not None

    @property
    def effective_rpm(self) -> float | None:
        return self.rpm if self.rpm is not None else _env_number("REFEREE_JUDGE_RPM")

    @property
    def effective_tpm(self) -> float | None:
        return self.tpm if self.tpm is not None else _env_number("REFEREE_JUDGE_TPM")

    @property
    def effective_rate_limit_wait_s(self) -> float:
        return DEFAULT_RATE_LIMIT_WAIT_S if self.rate_limit_wait_s is None else self.rate_limit_wait_s

    @property
    def effective_max_retries(self) -> int:
        if self.max_retries is not None:
            return self.max_retries
        env = _env_count("REFEREE_JUDGE_MAX_RETRIES")
        return DEFAULT_MAX_RETRIES if env is None else env

    @property
    def effective_retry_max_total_s(self) -> float:
        return DEFAULT_RETRY_MAX_TOTAL_S if self.retry_max_total_s is None else self.retry_max_total_s

    def api_key_value(self) -> str | None:
        return self.api_key.get_secret_value() if self.api_key is not None else None

    def resolve(self) -> JudgeConfig:
        """multivon's ``JudgeConfig.resolve()``: this config with what it leaves unset filled
        from JUDGE_PROVIDER/JUDGE_MODEL (and OPENAI_BASE_URL) and the defaults. ``configure()``
        is not consulted here; :func:`resolve_judge_config` adds that layer."""
        return _resolve_layers((_env_layer(), self))


def _env_positive(name: str, kind: type[int] | type[float]) -> float | None:
    """A positive int/float environment setting, or None when unset; else one clear error."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        value = kind(raw)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise ValueError(f"environment variable {name}={raw!r} is not {what}") from None
    if kind is int and value < 1:
        raise ValueError(f"environment variable {name} must be at least 1, got {value}")
    if not 0 < value < float("inf"):
        raise ValueError(f"environment variable {name} must be a positive number, got {raw}")
    return value


def _env_count(name: str) -> int | None:
    """A whole number of at least 0 from the environment, or None when unset; else one error."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"environment variable {name}={raw!r} is not an integer") from None
    if value < 0:
        raise ValueError(f"environment variable {name} must be at least 0, got {value}")
    return value


def _env_int(name: str) -> int | None:
    value = _env_positive(name, int)
    return None if value is None else int(value)


def _env_number(name: str) -> float | None:
    return _env_positive(name, float)


_global_lock = threading.Lock()
_global_config: JudgeConfig | None = None


def set_configured(config: JudgeConfig | None) -> None:
    """Store the single global judge; :func:`referee.judge.global_judge.configure` calls it."""
    global _global_config
    with _global_lock:
        _global_config = config.model_copy() if config is not None else None


def get_configured() -> JudgeConfig | None:
    """The config passed to ``configure()``, or None."""
    with _global_lock:
        return _global_config


def resolve_judge(per_evaluator: JudgeConfig | None) -> JudgeConfig:
    """The multivon-style ``resolve_judge()``: ``per_evaluator`` over ``configure()``'s judge,
    over JUDGE_PROVIDER/JUDGE_MODEL, over the defaults; fields a layer leaves unset
    (``None``) inherit. The same as :func:`resolve_judge_config`."""
    return resolve_judge_config(per_evaluator)


def _apply_layer(merged: dict[str, Any], layer: JudgeConfig) -> None:
    explicit = layer.model_fields_set
    switched = "provider" in explicit and layer.provider != merged["provider"]
    if switched:
        # Another provider's model name, endpoint or key would be wrong for this one.
        merged["model"] = rules_for(layer.provider).default_model or merged["model"]
        merged["base_url"] = ""
        merged["api_key"] = None
    for name in explicit:
        if name == "max_tokens" and not layer.max_tokens_chosen:
            continue  # a resolved config passed on as a layer: its max_tokens was a default
        value = getattr(layer, name)
        # None means "inherit" even when written out: JudgeConfig(temperature=None) keeps the
        # lower layer's value.
        if value is not None:
            merged[name] = value


def _env_layer() -> JudgeConfig | None:
    provider = os.environ.get("JUDGE_PROVIDER", "").strip()
    model = os.environ.get("JUDGE_MODEL", "").strip()
    kwargs: dict[str, Any] = {}
    if provider:
        kwargs["provider"] = provider
    if model:
        kwargs["model"] = model
    if not kwargs:
        return None
    try:
        return JudgeConfig(**kwargs)
    except ValueError as exc:
        raise ValueError(f"JUDGE_PROVIDER/JUDGE_MODEL environment: {exc}") from None


def resolve_judge_config(judge: JudgeConfig | None = None) -> JudgeConfig:
    """multivon's order: ``judge=`` > ``configure()`` > JUDGE_PROVIDER/JUDGE_MODEL > default.

    Fields a layer does not set explicitly inherit from the layers below it; ``None`` fields
    are filled with the effective defaults (temperature 0.0, max_tokens 1024, timeout 30 s).
    """
    return _resolve_layers((_env_layer(), get_configured(), judge))


@functools.lru_cache(maxsize=1)
def _defaults() -> dict[str, Any]:
    """Every field's default, built once."""
    defaults = JudgeConfig()
    return {name: getattr(defaults, name) for name in JudgeConfig.model_fields}


def _resolve_layers(layers: tuple[JudgeConfig | None, ...]) -> JudgeConfig:
    merged: dict[str, Any] = dict(_defaults())
    for layer in layers:
        if layer is not None:
            _apply_layer(merged, layer)
    rules = rules_for(merged["provider"])
    if rules.resolves_base_url_from_env and not merged["base_url"]:
        merged["base_url"] = os.environ.get(rules.base_url_env, "").strip()
    if merged["temperature"] is None:
        merged["temperature"] = EFFECTIVE_TEMPERATURE
    filled = merged["max_tokens"] is None
    if filled:
        merged["max_tokens"] = EFFECTIVE_MAX_TOKENS
    if merged["timeout"] is None:
        merged["timeout"] = EFFECTIVE_TIMEOUT
    if merged["reliability_sample"] is None:
        merged["reliability_sample"] = EFFECTIVE_RELIABILITY_SAMPLE
    resolved = JudgeConfig(**merged)
    resolved._max_tokens_filled = filled
    return resolved


def verdict_max_tokens(cfg: JudgeConfig) -> int:
    """max_tokens for a per-question verdict: the judge's when set, else VERDICT_MAX_TOKENS at a
    server that is not the provider's own API, else the effective default."""
    if cfg.max_tokens_chosen or is_provider_endpoint(cfg.provider, cfg.base_url):
        return cfg.effective_max_tokens
    return min(VERDICT_MAX_TOKENS, cfg.effective_max_tokens)


def split_judge_model(model_name: str) -> tuple[str | None, str]:
    """``(provider, model)`` of an AgentEvaluator-style criterion's ``judge_model``.

    An explicit provider prefix wins: ``"openai/llama3"`` is ``("openai", "llama3")``, which
    is how a local or gateway model that speaks OpenAI's API is named; 10xgraph's spellings
    ``gemini/``, ``gpt/`` and ``claude/`` name Google, OpenAI and Anthropic. A bare name is
    inferred as documented: ``gemini*`` -> google, ``gpt*``/``o1``/``o3``/``o4`` -> openai,
    ``claude*`` -> anthropic (``models/gemini-...`` style paths go by their last part);
    anything else has no provider (None).
    """
    name = model_name.strip()
    prefix, sep, rest = name.partition("/")
    prefix = prefix.strip().lower()
    if sep and rest.strip() and prefix in known_providers():
        return prefix, rest.strip()
    last = name.rsplit("/", 1)[-1].lower()  # "models/gemini-2.5-flash", "publishers/..."
    for provider, rules in BUILTIN_ADAPTERS.items():
        if sep and rest.strip() and prefix in rules.prefix_aliases:
            return provider, rest.strip()
    for provider, rules in BUILTIN_ADAPTERS.items():
        if rules.names_model(last):
            return provider, name
    return None, name


def provider_for_model(model_name: str) -> str | None:
    """The provider of a ``judge_model``: its prefix (``openai/llama3``), else inferred from
    the name (``gemini*`` google, ``gpt*``/``o1``/``o3``/``o4`` openai, ``claude*`` anthropic)."""
    return split_judge_model(model_name)[0]


def unknown_provider_message(prefix: str) -> str:
    """Why ``prefix`` names no provider: the known ones, and the nearest as a suggestion."""
    import difflib

    aliases = {alias for rules in BUILTIN_ADAPTERS.values() for alias in rules.prefix_aliases}
    known = sorted(known_providers() | aliases)
    near = difflib.get_close_matches(prefix.strip().lower(), known, n=1)
    hint = f"; did you mean {near[0]!r}?" if near else ""
    return (f"unknown provider {prefix.strip()!r} (known: {', '.join(sorted(known_providers()))}"
            f"; gemini, gpt and claude name google, openai and anthropic){hint}")


def provider_available(provider: str, base_url: str = "") -> bool:
    """Whether the provider's SDK is importable and some credentials (or endpoint) are set
    (its adapter's rule, ``ProviderRules.available``). An OpenAI-compatible endpoint
    (``base_url`` or ``OPENAI_BASE_URL``) needs no key: local servers ignore it."""
    return provider in known_providers() and rules_for(provider).available(base_url)


# Base URLs declared to behave as a provider's own API (declare_provider_endpoint).
_declared_endpoints: set[str] = set()
_declared_lock = threading.Lock()


def declare_provider_endpoint(base_url: str, declared: bool = True) -> None:
    """Treat ``base_url`` and the URLs under it as a provider's own API, not as a self-hosted
    server: a gateway that forwards to the provider, or a stand-in for the provider in tests
    (referee.testing's scripted server). ``declared=False`` withdraws it."""
    root = base_url.strip().rstrip("/")
    with _declared_lock:
        (_declared_endpoints.add if declared else _declared_endpoints.discard)(root)


def is_provider_endpoint(provider: str, base_url: str) -> bool:
    """Whether ``base_url`` is ``provider``'s own API: empty (the SDK's default), Vertex AI, a
    URL on the provider's host, or one declared so. A provider registered at runtime is taken
    at its word."""
    base_url = (base_url or "").strip()
    rules = rules_for(provider)
    if not base_url or not rules.own_hosts or rules.is_own_endpoint(base_url):
        return True
    with _declared_lock:
        declared = tuple(_declared_endpoints)
    return any(base_url == root or base_url.startswith(root + "/") for root in declared)


def default_api_style(provider: str, base_url: str) -> Literal["chat", "responses"]:
    """The API an AgentEvaluator-style criterion uses when ``api_style`` is not set, by its
    provider's rule (``ProviderRules.default_api_style``): the documented Responses API at
    OpenAI itself, Chat Completions anywhere else.

    Chosen up front rather than by falling back after a 404: llama-cpp-python's server answers
    /v1/responses with 404, but llama.cpp's own server accepts it and ignores JSON mode there,
    so no error would ever say the choice was wrong.
    """
    style = rules_for(provider).default_api_style(is_provider_endpoint(provider, base_url))
    return "responses" if style == "responses" else "chat"


def judge_config_for_model(model_name: str, api_style: str | None = None,
                           temperature: float = DEFAULT_JUDGES[AGENT_EVALUATOR].temperature,
                           base_url: str = "", *,
                           available_only: bool = True) -> JudgeConfig | None:
    """The 10xgraph-style API's judge for ``judge_model``; None when no provider can serve it.

    ``base_url`` (``CriterionConfig.base_url``) points the provider at another endpoint; when
    empty, the provider's own variable applies (``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``).
    ``api_style`` None (not set by the user) is :func:`default_api_style` for that endpoint.
    None is the caller's cue for the 10xgraph-style API's documented fallback (score 0.5,
    "No LLM provider available"). ``available_only=False`` (a panel member) returns the judge
    even without credentials: asking it then fails as a member that is down, counted.
    """
    provider, model = split_judge_model(model_name)
    base_url = base_url.strip()
    if provider is None or (available_only and not provider_available(provider, base_url)):
        return None
    if api_style not in ("chat", "responses", None):
        raise ValueError(f"api_style must be 'responses' or 'chat', got {api_style!r}")
    base_url_env = rules_for(provider).base_url_env
    if not base_url and base_url_env:
        base_url = os.environ.get(base_url_env, "").strip()
    if api_style is None:
        api_style = default_api_style(provider, base_url)
    return JudgeConfig(provider=provider, model=model, base_url=base_url,
                       api_style=api_style,  # type: ignore[arg-type]
                       temperature=temperature, max_tokens=EFFECTIVE_MAX_TOKENS,
                       timeout=EFFECTIVE_TIMEOUT)
