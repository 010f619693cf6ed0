"""Provider rules live in the provider adapters (issue 29, item 6).

Each adapter carries its provider's rules (``ProviderRules``): defaults, its own hosts, the API a
judge uses, prompt caching, reply schemas, retry classification. Outside
``referee/judge/providers/`` no code compares a provider's name; a provider registered at
runtime sets its own rules by deriving its adapter from ``ProviderRules``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from referee.judge import JudgeConfig, get_judge
from referee.judge.config import default_api_style, is_provider_endpoint, provider_available
from referee.judge.prompt_caching import caching_rules
from referee.judge.providers import (
    BUILTIN_ADAPTERS,
    CachingRules,
    JudgeRequest,
    ProviderRules,
    RawReply,
    register_provider,
    rules_for,
    sends_reply_schema,
)
from referee.judge.retry import FailureInfo

PACKAGE = Path(__file__).resolve().parent.parent / "referee"
# The adapters are where provider rules live. referee.testing's scripted server speaks each
# provider's API through one wire format per API (testing/wire.py), chosen by a request's
# route: it asks no provider's name either.
RULES_LIVE_IN = ("judge/providers/",)
NAMES = frozenset(BUILTIN_ADAPTERS) | {"vertex"}


def _names_a_provider(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_a_provider(e) for e in node.elts)
    return False


def _provider_name_comparisons(path: Path) -> list[str]:
    """Each ``x == "anthropic"``, ``x != "openai"``, ``x in ("google", ...)`` in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare) and any(
                isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops) \
                and any(_names_a_provider(side) for side in (node.left, *node.comparators)):
            found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_code_outside_the_adapters_compares_a_provider_name() -> None:
    modules = [p for p in sorted(PACKAGE.rglob("*.py"))
               if not str(p.relative_to(PACKAGE)).startswith(RULES_LIVE_IN)]
    assert len(modules) > 100
    found = [line for path in modules for line in _provider_name_comparisons(path)]
    assert found == []


def test_the_check_sees_a_provider_name_comparison(tmp_path: Path) -> None:
    module = tmp_path / "rule.py"
    module.write_text('if cfg.provider == "anthropic":\n    pass\nok = p in ("openai", "x")\n')
    global PACKAGE
    kept, PACKAGE = PACKAGE, tmp_path
    try:
        assert len(_provider_name_comparisons(module)) == 2
    finally:
        PACKAGE = kept


def test_the_built_in_rules_read_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY",
                 "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    assert {n: r.default_model for n, r in BUILTIN_ADAPTERS.items()} == {
        "anthropic": "claude-haiku-4-5", "openai": "gpt-4o-mini", "google": "gemini-2.5-flash"}
    assert default_api_style("openai", "") == "responses"
    assert default_api_style("openai", "http://127.0.0.1:8080/v1") == "chat"
    assert is_provider_endpoint("google", "vertex")
    assert is_provider_endpoint("anthropic", "https://eu.api.anthropic.com")
    assert not provider_available("openai") and provider_available("openai", "http://h/v1")
    assert not provider_available("no-such-provider")
    schema_cfg = JudgeConfig(provider="openai", model="m")
    assert sends_reply_schema(schema_cfg, "http://127.0.0.1:8080/v1")
    assert not sends_reply_schema(schema_cfg, "https://api.openai.com/v1")
    assert not sends_reply_schema(JudgeConfig(provider="anthropic", model="m",
                                              structured_output=True), "")
    assert caching_rules("anthropic", "claude-haiku-4-5") == CachingRules(
        "anthropic", min_tokens=4096, needs_breakpoint=True)
    assert caching_rules("google", "gemini-2.0-flash") is None


class _OwnRules(ProviderRules):
    """A provider registered at runtime, with rules of its own."""

    default_model = "own-default"
    own_hosts = ("own.example",)
    classified: list[str] = []

    def __init__(self) -> None:
        self.calls = 0

    def caching_rules(self, model: str) -> CachingRules | None:
        return CachingRules("own-rules", min_tokens=10)

    def classify(self, exc: BaseException) -> FailureInfo:
        self.classified.append(str(exc))
        return FailureInfo(False, None, None, "the provider's own reading: never retried")

    def credentials(self, cfg: JudgeConfig) -> tuple[str, str | None]:
        return cfg.base_url, None

    def make_client(self, base_url: str, api_key: str | None, cfg: JudgeConfig) -> object:
        return object()

    async def call(self, client: object, request: JudgeRequest) -> RawReply:
        self.calls += 1
        raise TimeoutError("the provider timed out")  # retried, by referee.judge.retry's rule


async def test_a_registered_adapter_sets_its_providers_rules() -> None:
    adapter = _OwnRules()
    register_provider("own-rules", adapter)
    assert rules_for("own-rules") is adapter
    assert caching_rules("own-rules", "m") == CachingRules("own-rules", min_tokens=10)
    assert not is_provider_endpoint("own-rules", "http://127.0.0.1:9/v1")
    assert is_provider_endpoint("own-rules", "https://api.own.example/v1")
    layered = JudgeConfig(provider="openai", model="x").model_copy()
    assert layered.model == "x"
    cfg = JudgeConfig(provider="own-rules", model="m", base_url="https://api.own.example",
                      max_retries=3, cache=False)
    from referee.errors import JudgeUnavailable
    with pytest.raises(JudgeUnavailable, match="never retried"):
        await get_judge(cfg).complete("hi")
    assert adapter.calls == 1  # its classify() said: do not retry
    assert adapter.classified == ["the provider timed out"]
