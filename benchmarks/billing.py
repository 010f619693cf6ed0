"""The judge-bill columns every benchmark table carries, computed from the requests the
scripted judge recorded.

- prompt characters and tokens (referee's 4-characters-a-token estimate, the same for every
  system), and judge requests;
- billable input tokens under each provider's prompt-caching rules: the recorded requests are
  replayed, in the order they arrived and were answered, through ``referee.testing``'s emulated
  cache for that provider (``PromptCache``), and each token is weighted by its price relative
  to plain input at that provider's default judge (cached reads cheaper, Anthropic's cache
  writes dearer);
- the cost of 1,000 cases at that default judge's list price (input as billed, plus output).

A request carries an Anthropic cache breakpoint only if the system sent one, so a system that
never marks its prompts gets no Anthropic caching, as at Anthropic.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

# The provider whose rules price a column, and that provider's default judge in referee.
BILLING_PROVIDERS = {"openai": "gpt-4o-mini", "anthropic": "claude-haiku-4-5",
                     "google": "gemini-2.5-flash"}


@dataclass
class Bill:
    requests: int = 0
    prompt_chars: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    # per billing provider
    cached_tokens: dict[str, int] = field(default_factory=dict)
    write_tokens: dict[str, int] = field(default_factory=dict)
    billable_input_tokens: dict[str, float] = field(default_factory=dict)
    cost_usd: dict[str, float] = field(default_factory=dict)


def _replay(requests: list[Any], provider: str, model: str) -> tuple[int, int]:
    """(cached, written) input tokens of ``requests`` under ``provider``'s caching rules."""
    from referee.judge.prompt_caching import caching_rules
    from referee.testing.prompt_cache import PromptCache

    rules = caching_rules(provider, model)
    if rules is None:
        return 0, 0
    cache = PromptCache()
    events: list[tuple[float, int, int]] = []  # (time, 0 = answered before 1 = arrived, index)
    for i, request in enumerate(requests):
        events.append((request.arrived_at, 1, i))
        if request.answered_at is not None:
            events.append((request.answered_at, 0, i))
    uses: dict[int, Any] = {}
    cached = written = 0
    for when, kind, i in sorted(events):
        request = requests[i]
        if kind == 1:
            breakpoint = request.cache_breakpoint if request.provider == provider else None
            use = uses[i] = cache.begin(rules, "bench", request.cache_text, breakpoint, when)
            cached += min(use.cached_tokens, request.input_tokens)
            written += min(use.write_tokens, request.input_tokens)
        elif i in uses:
            cache.commit(rules, uses[i], when)
    return cached, written


def bill(requests: Iterable[Any]) -> Bill:
    """The judge bill of one run, from ``ScriptedJudgeServer.requests``."""
    from referee.judge.pricing import estimate_cost, price_of

    answered = [r for r in requests if r.answered_at is not None]
    out = Bill(requests=len(answered),
               prompt_chars=sum(len(r.system or "") + len(r.prompt) for r in answered),
               prompt_tokens=sum(r.input_tokens for r in answered),
               output_tokens=sum(r.output_tokens for r in answered))
    for provider, model in BILLING_PROVIDERS.items():
        cached, written = _replay(answered, provider, model)
        price = price_of(model)
        assert price is not None, model
        cached_weight = (price.cached_input if price.cached_input is not None
                         else price.input) / price.input
        write_weight = (price.cache_write if price.cache_write is not None
                        else price.input) / price.input
        out.cached_tokens[provider] = cached
        out.write_tokens[provider] = written
        out.billable_input_tokens[provider] = (out.prompt_tokens - cached - written
                                               + cached * cached_weight + written * write_weight)
        out.cost_usd[provider] = estimate_cost(model, out.prompt_tokens, out.output_tokens,
                                               cached_input_tokens=cached,
                                               cache_write_tokens=written) or 0.0
    return out


def per_case(value: float, cases: int) -> float:
    return value / max(cases, 1)


def bill_columns(b: Bill | None, cases: int) -> tuple[str, ...]:
    """The shared columns of a table row: per case, then cost per 1,000 cases."""
    if b is None:
        return ("-",) * (4 + 2 * len(BILLING_PROVIDERS))
    return (
        f"{per_case(b.requests, cases):.1f}",
        f"{per_case(b.prompt_chars, cases):,.0f}",
        f"{per_case(b.prompt_tokens, cases):,.0f}",
        f"{per_case(b.output_tokens, cases):,.0f}",
        *(f"{per_case(b.billable_input_tokens[p], cases):,.0f}" for p in BILLING_PROVIDERS),
        *(f"{per_case(b.cost_usd[p], cases) * 1000:.3f}" for p in BILLING_PROVIDERS),
    )


BILL_HEADER = ("req/case", "prompt chars/case", "prompt tok/case", "output tok/case",
               *(f"billable in/case {p}" for p in BILLING_PROVIDERS),
               *(f"$/1k cases {m}" for m in BILLING_PROVIDERS.values()))
