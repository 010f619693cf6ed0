"""JudgeConfig, configure() and resolution (document 001), provider detection (document 000)."""

from __future__ import annotations

import sys

import pytest

from referee.judge import (
    JudgeConfig,
    configure,
    judge_config_for_model,
    provider_for_model,
    resolve_judge_config,
)

_ENV = ("JUDGE_PROVIDER", "JUDGE_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "GOOGLE_API_KEY", "GEMINI_API_KEY",
        "GOOGLE_GENAI_USE_VERTEXAI", "REFEREE_CACHE", "REFEREE_CACHE_DIR",
        "REFEREE_JUDGE_CONCURRENCY")


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch):
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    configure(None)
    yield
    configure(None)


def test_documented_defaults() -> None:
    cfg = JudgeConfig()
    assert (cfg.provider, cfg.model, cfg.base_url) == ("anthropic", "claude-haiku-4-5", "")
    assert cfg.temperature is None and cfg.max_tokens is None and cfg.timeout is None
    assert cfg.reliability_sample is None
    assert (cfg.effective_temperature, cfg.effective_max_tokens, cfg.effective_timeout) == (
        0.0, 1024, 30.0)


def test_resolution_fills_effective_values() -> None:
    cfg = resolve_judge_config()
    assert (cfg.provider, cfg.model) == ("anthropic", "claude-haiku-4-5")
    assert (cfg.temperature, cfg.max_tokens, cfg.timeout) == (0.0, 1024, 30.0)
    assert cfg.reliability_sample == 5 and cfg.reliability_check is False


def test_explicit_reliability_sample_wins() -> None:
    configure(JudgeConfig(reliability_sample=9, reliability_check=True))
    assert resolve_judge_config().reliability_sample == 9
    cfg = resolve_judge_config(JudgeConfig(reliability_sample=3))
    assert (cfg.reliability_sample, cfg.reliability_check) == (3, True)


def test_resolution_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGE_PROVIDER", "openai")
    configure(None)
    monkeypatch.setenv("JUDGE_MODEL", "env-model")
    assert resolve_judge_config().model == "env-model"
    configure(JudgeConfig(provider="openai", model="global-model", temperature=0.7))
    assert resolve_judge_config().model == "global-model"
    kwarg = resolve_judge_config(JudgeConfig(model="kwarg-model"))
    # Unset fields of the winning layer inherit: provider and temperature come from configure().
    assert (kwarg.provider, kwarg.model, kwarg.temperature) == ("openai", "kwarg-model", 0.7)


def test_resolution_follows_every_change_to_its_layers(monkeypatch: pytest.MonkeyPatch) -> None:
    # Resolutions are remembered (each evaluator call asks for one); a remembered one must never
    # outlive a change to what it was made from, nor be changed through what it returned.
    own = JudgeConfig(provider="openai", model="first")
    first = resolve_judge_config(own)
    first.model = "changed by the caller"
    assert resolve_judge_config(own).model == "first"
    own.model = "second"
    assert resolve_judge_config(own).model == "second"
    own.temperature = 0.3
    assert resolve_judge_config(own).temperature == 0.3
    global_config = JudgeConfig(provider="openai", max_tokens=50)
    configure(global_config)
    assert resolve_judge_config(own).max_tokens == 50
    configure(JudgeConfig(provider="openai", max_tokens=60))
    assert resolve_judge_config(own).max_tokens == 60
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert resolve_judge_config(own).base_url == "http://127.0.0.1:9/v1"
    configure(None)
    monkeypatch.setenv("JUDGE_MODEL", "env-model")
    assert resolve_judge_config().model == "env-model"
    monkeypatch.setenv("JUDGE_MODEL", "other-env-model")
    assert resolve_judge_config().model == "other-env-model"


def test_explicit_zero_temperature_beats_nonzero_global() -> None:
    configure(JudgeConfig(temperature=0.9, max_tokens=50, timeout=5))
    cfg = resolve_judge_config(JudgeConfig(temperature=0.0))
    assert cfg.temperature == 0.0
    assert (cfg.max_tokens, cfg.timeout) == (50, 5)


def test_explicit_none_inherits_from_global() -> None:
    # Document 001: None = inherit, whether left out or written out.
    configure(JudgeConfig(temperature=0.7, max_tokens=50, timeout=5, reliability_sample=9))
    cfg = resolve_judge_config(JudgeConfig(temperature=None, max_tokens=None, timeout=None,
                                           reliability_sample=None))
    assert (cfg.temperature, cfg.max_tokens, cfg.timeout, cfg.reliability_sample) == (
        0.7, 50, 5, 9)
    configure(JudgeConfig(temperature=None))
    assert resolve_judge_config().temperature == 0.0


def test_switching_provider_does_not_inherit_another_providers_model() -> None:
    configure(JudgeConfig(provider="anthropic", model="claude-sonnet-4-5"))
    cfg = resolve_judge_config(JudgeConfig(provider="openai"))
    assert (cfg.provider, cfg.model) == ("openai", "gpt-4o-mini")


def test_openai_base_url_env_applies_to_openai_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:11434/v1")
    assert resolve_judge_config(JudgeConfig(provider="openai", model="llama3")).base_url == (
        "http://localhost:11434/v1")
    assert resolve_judge_config().base_url == ""
    explicit = JudgeConfig(provider="openai", base_url="http://other:1234/v1")
    assert resolve_judge_config(explicit).base_url == "http://other:1234/v1"


def test_configure_none_resets() -> None:
    configure(JudgeConfig(provider="openai", model="x"))
    configure(None)
    assert resolve_judge_config().model == "claude-haiku-4-5"


def test_configure_rejects_other_types() -> None:
    with pytest.raises(TypeError, match="JudgeConfig"):
        configure({"provider": "openai"})  # type: ignore[arg-type]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"provider": "mistral"}, "unknown judge provider 'mistral'"),
    ({"temperature": 3.0}, "temperature must be between 0.0 and 2.0"),
    ({"max_tokens": 0}, "must be at least 1"),
    ({"timeout": 0}, "positive number of seconds"),
    ({"model": " "}, "must not be empty"),
    ({"api_style": "completions"}, "chat"),
    ({"reliability_sample": 0}, "reliability_sample must be at least 1"),
])
def test_invalid_values_are_named(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        JudgeConfig(**kwargs)


def test_bad_env_provider_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGE_PROVIDER", "nope")
    with pytest.raises(ValueError, match="JUDGE_PROVIDER/JUDGE_MODEL"):
        resolve_judge_config()


def test_api_key_is_never_serialized() -> None:
    cfg = JudgeConfig(api_key="sk-secret-value-123")
    assert "sk-secret-value-123" not in repr(cfg)
    assert "sk-secret-value-123" not in str(cfg)
    assert "api_key" not in cfg.model_dump()
    assert "sk-secret-value-123" not in cfg.model_dump_json()
    assert cfg.api_key_value() == "sk-secret-value-123"


@pytest.mark.parametrize(("model", "provider"), [
    ("gemini-2.5-flash", "google"),
    ("models/gemini-2.0-pro", "google"),
    ("gpt-4o-mini", "openai"),
    ("o1-preview", "openai"),
    ("o3-mini", "openai"),
    ("o4-mini", "openai"),
    ("claude-haiku-4-5", "anthropic"),
    ("llama3", None),
    ("mistral-large", None),
])
def test_provider_detection(model: str, provider: str | None) -> None:
    assert provider_for_model(model) == provider


def test_judge_config_for_model_needs_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    assert judge_config_for_model("gemini-2.5-flash") is None
    assert judge_config_for_model("gpt-4o") is None
    assert judge_config_for_model("llama3") is None
    monkeypatch.setenv("GOOGLE_API_KEY", "k")
    cfg = judge_config_for_model("gemini-2.5-flash")
    assert cfg is not None
    assert (cfg.provider, cfg.model, cfg.temperature, cfg.api_style) == (
        "google", "gemini-2.5-flash", 0.3, "responses")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    chat = judge_config_for_model("gpt-4o", api_style="chat")
    assert chat is not None and (chat.provider, chat.api_style) == ("openai", "chat")


def test_vertex_flag_makes_google_available(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")
    monkeypatch.setenv("REFEREE_CACHE", "0")  # else the default cache, in the user's home
    cfg = judge_config_for_model("gemini-2.5-flash")
    assert cfg is not None and cfg.provider == "google"


def test_missing_google_sdk_means_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "k")
    monkeypatch.setitem(sys.modules, "google.genai", None)
    assert judge_config_for_model("gemini-2.5-flash") is None


async def test_missing_google_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from referee.errors import JudgeUnavailable
    from referee.judge import get_judge

    monkeypatch.setitem(sys.modules, "google.genai", None)
    judge = get_judge(JudgeConfig(provider="google", model="gemini-2.5-flash", api_key="k"))
    with pytest.raises(JudgeUnavailable, match=r"referee\[google\]"):
        await judge.complete("hi")


async def test_missing_credentials_is_judge_unavailable() -> None:
    from referee.errors import JudgeUnavailable
    from referee.judge import get_judge

    with pytest.raises(JudgeUnavailable, match="ANTHROPIC_API_KEY") as info:
        await get_judge(resolve_judge_config()).complete("hi")
    assert (info.value.provider, info.value.model) == ("anthropic", "claude-haiku-4-5")


async def test_vertex_without_project_is_judge_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    from referee.errors import JudgeUnavailable
    from referee.judge import get_judge

    for name in ("GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_APPLICATION_CREDENTIALS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")
    monkeypatch.setenv("REFEREE_CACHE", "0")  # else the default cache, in the user's home
    cfg = judge_config_for_model("gemini-2.5-flash")
    assert cfg is not None
    with pytest.raises(JudgeUnavailable, match="google"):
        await get_judge(cfg).complete("hi")


def test_each_api_surface_has_one_documented_default_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/judge.md, "Default judges": the 10xgraph-style criteria's default and the
    multivon-style evaluators' default, from the one table both resolution paths read."""
    from referee.config import CriterionConfig
    from referee.judge import DEFAULT_JUDGES

    agent, suite = DEFAULT_JUDGES["AgentEvaluator"], DEFAULT_JUDGES["EvalSuite"]
    assert (agent.model, agent.temperature) == (CriterionConfig().judge_model, 0.3)
    assert (agent.model, suite.provider, suite.model) == (
        "gemini-2.5-flash", "anthropic", "claude-haiku-4-5")
    resolved = resolve_judge_config()
    assert (resolved.provider, resolved.model, resolved.temperature) == (
        suite.provider, suite.model, suite.temperature)
    monkeypatch.setenv("GOOGLE_API_KEY", "k")
    by_name = judge_config_for_model(agent.model)
    assert by_name is not None
    assert (by_name.provider, by_name.model, by_name.temperature) == (
        "google", agent.model, agent.temperature)


def test_each_caller_of_a_judge_named_by_model_gets_its_own_config(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A run looks a judge up once and binds it (tests/test_judge_binding.py), so nothing
    memoises the look-up any more (issue 29): each call builds the config afresh."""
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    first = judge_config_for_model("gpt-4o-mini", base_url="http://127.0.0.1:9/v1")
    second = judge_config_for_model("gpt-4o-mini", base_url="http://127.0.0.1:9/v1")
    assert first == second and first is not second
    assert first is not None
    first.model = "changed"
    third = judge_config_for_model("gpt-4o-mini", base_url="http://127.0.0.1:9/v1")
    assert third is not None and third.model == "gpt-4o-mini"
    other = judge_config_for_model("gpt-4o-mini", base_url="http://127.0.0.1:9/v1",
                                   temperature=0.7)
    assert other is not None and other.temperature == 0.7
    monkeypatch.delenv("OPENAI_API_KEY")
    assert judge_config_for_model("gpt-4o-mini") is None  # availability is asked every time


def test_reliability_check_is_acted_on_so_it_no_longer_warns() -> None:
    import warnings

    # The check runs after an EvalSuite-style run (tests/test_judge_reliability.py), so turning
    # it on is no longer deprecated.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg = JudgeConfig(reliability_check=True, reliability_sample=9)
    assert cfg.reliability_check is True and cfg.effective_reliability_sample == 9
