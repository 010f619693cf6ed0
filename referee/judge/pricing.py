"""Token prices: an estimate of what judge calls cost, each kind of token at its own rate.

Extend or replace the built-in list prices with ``set_price()``, or load a litellm-format price
file with ``load_prices(path)`` (or ``REFEREE_PRICE_FILE=path``), instead of editing code.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from referee.usage import TokenUsage


class Price(NamedTuple):
    """USD per million tokens. Cached rates of None mean "billed as plain input"."""

    input: float
    output: float
    cached_input: float | None = None   # read from the provider's prompt cache
    cache_write: float | None = None    # written to it (Anthropic charges a premium)


# Public list prices, standard tier, prompts up to 200k tokens; checked 2026-12-01.
# Anthropic: docs.anthropic.com "Pricing" (5-minute cache writes at 1.25x input, hits at 0.1x);
#   Opus/Sonnet 4.6 from the same table as quoted by deploybase.ai (March 2026).
# OpenAI: the API pricing page (developers.openai.com/api/docs/pricing), "Cached input" column;
#   OpenAI charges no premium for writing to its cache.
# Google: ai.google.dev Gemini API pricing, "Context caching" column (implicit cache hits are
#   billed at that rate); gemini-3 rates as quoted by morphllm.com from the same page.
_BUILTIN: dict[str, Price] = {
    # Anthropic
    "claude-opus-4-6": Price(5.00, 25.00, 0.50, 6.25),
    "claude-opus-4-5": Price(5.00, 25.00, 0.50, 6.25),
    "claude-opus-4-1": Price(15.00, 75.00, 1.50, 18.75),
    "claude-opus-4": Price(15.00, 75.00, 1.50, 18.75),
    "claude-sonnet-4-6": Price(3.00, 15.00, 0.30, 3.75),
    "claude-sonnet-4-5": Price(3.00, 15.00, 0.30, 3.75),
    "claude-sonnet-4": Price(3.00, 15.00, 0.30, 3.75),
    "claude-3-7-sonnet": Price(3.00, 15.00, 0.30, 3.75),
    "claude-haiku-4-5": Price(1.00, 5.00, 0.10, 1.25),
    "claude-3-5-haiku": Price(0.80, 4.00, 0.08, 1.00),
    "claude-3-haiku": Price(0.25, 1.25, 0.03, 0.30),
    # OpenAI
    "gpt-5.1": Price(1.25, 10.00, 0.125),
    "gpt-5": Price(1.25, 10.00, 0.125),
    "gpt-5-mini": Price(0.25, 2.00, 0.025),
    "gpt-5-nano": Price(0.05, 0.40, 0.005),
    "gpt-4.1": Price(2.00, 8.00, 0.50),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.025),
    "gpt-4o": Price(2.50, 10.00, 1.25),
    "gpt-4o-mini": Price(0.15, 0.60, 0.075),
    "o3": Price(2.00, 8.00, 0.50),
    "o4-mini": Price(1.10, 4.40, 0.275),
    # Google
    "gemini-3-pro-preview": Price(2.00, 12.00, 0.20),
    "gemini-3-flash": Price(0.50, 3.00, 0.05),
    "gemini-2.5-pro": Price(1.25, 10.00, 0.125),
    "gemini-2.5-flash": Price(0.30, 2.50, 0.03),
    "gemini-2.5-flash-lite": Price(0.10, 0.40, 0.01),
}
_PRICES: dict[str, Price] = dict(_BUILTIN)
_lock = threading.Lock()
_env_file_loaded: str | None = None
# Dated snapshots ("claude-haiku-4-5-20251001", "gpt-4o-2024-08-06") share their family's price.
_DATE_SUFFIX = re.compile(r"(?:-\d{8}|-\d{4}-\d{2}-\d{2}|@\d{8})$")


def _model_key(model: str) -> str:
    name = model.strip().lower()
    return name.rsplit("/", 1)[-1] if "/" in name else name


def set_price(model: str, input_per_mtok: float, output_per_mtok: float, *,
              cached_input_per_mtok: float | None = None,
              cache_write_per_mtok: float | None = None) -> None:
    """Register (or replace) a model's USD prices per million tokens.

    Cached rates left out are billed as plain input.
    """
    rates = (input_per_mtok, output_per_mtok, cached_input_per_mtok, cache_write_per_mtok)
    if any(rate is not None and not 0 <= rate < math.inf for rate in rates):  # NaN fails too
        raise ValueError(f"prices must be finite and not negative, got {rates}")
    price = Price(float(input_per_mtok), float(output_per_mtok),
                  None if cached_input_per_mtok is None else float(cached_input_per_mtok),
                  None if cache_write_per_mtok is None else float(cache_write_per_mtok))
    with _lock:
        _PRICES[_model_key(model)] = price


_LITELLM_FIELDS = {
    "input_cost_per_token": "input",
    "output_cost_per_token": "output",
    "cache_read_input_token_cost": "cached_input",
    "cache_creation_input_token_cost": "cache_write",
}


def load_prices(source: str | os.PathLike[str] | Mapping[str, Any]) -> int:
    """Register every priced model of a litellm-format price file (or its parsed mapping).

    Each entry maps a model name (a ``provider/`` prefix is dropped) to per-token USD costs:
    ``input_cost_per_token``, ``output_cost_per_token`` and, where the provider caches,
    ``cache_read_input_token_cost`` and ``cache_creation_input_token_cost``. Entries without
    an input or output cost (embeddings, images, litellm's ``sample_spec``) are skipped.
    Returns how many models were registered.
    """
    where = "price mapping"
    if isinstance(source, Mapping):
        data: Any = source
    else:
        where = str(source)
        try:
            data = json.loads(Path(source).read_text(encoding="utf-8-sig"))
        except OSError as exc:
            raise ValueError(f"{where}: cannot read the price file: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise ValueError(f"{where}: invalid JSON: {exc}") from None
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: expected a JSON object of model name -> prices")
    loaded: dict[str, Price] = {}
    for model, entry in data.items():
        if model == "sample_spec" or not isinstance(entry, Mapping):
            continue
        if "input_cost_per_token" not in entry or "output_cost_per_token" not in entry:
            continue
        rates: dict[str, float | None] = {"cached_input": None, "cache_write": None}
        for field, name in _LITELLM_FIELDS.items():
            value = entry.get(field)
            if value is None:
                continue
            if (isinstance(value, bool) or not isinstance(value, (int, float))
                    or not 0 <= value < math.inf):  # NaN fails this too
                raise ValueError(f"{where}: field '{model}.{field}': expected a finite, "
                                 f"non-negative number of USD per token, got {value!r}")
            rates[name] = float(value) * 1_000_000
        loaded[_model_key(str(model))] = Price(rates["input"], rates["output"],  # type: ignore[arg-type]
                                               rates["cached_input"], rates["cache_write"])
    with _lock:
        _PRICES.update(loaded)
    return len(loaded)


def load_env_price_file() -> None:
    """Load REFEREE_PRICE_FILE once per distinct value. A run calls this before its first
    case: a bad file is then one error up front, not the first judged case's error followed by
    cases silently priced from the built-in table."""
    global _env_file_loaded
    path = os.environ.get("REFEREE_PRICE_FILE", "").strip()
    if not path or path == _env_file_loaded:
        return
    try:
        load_prices(path)
    except ValueError as exc:
        raise ValueError(f"environment variable REFEREE_PRICE_FILE: {exc}") from None
    _env_file_loaded = path


def price_of(model: str) -> Price | None:
    load_env_price_file()
    name = _model_key(model)
    with _lock:
        if name in _PRICES:
            return _PRICES[name]
        return _PRICES.get(_DATE_SUFFIX.sub("", name))


def estimate_cost(model: str, input_tokens: int, output_tokens: int, *,
                  cached_input_tokens: int = 0, cache_write_tokens: int = 0) -> float | None:
    """Estimated USD cost, each kind of token at its rate; None when the model has no price.

    ``input_tokens`` counts every prompt token, the cached and cache-written ones included.
    """
    price = price_of(model)
    if price is None:
        return None
    plain = max(input_tokens - cached_input_tokens - cache_write_tokens, 0)
    cached_rate = price.input if price.cached_input is None else price.cached_input
    write_rate = price.input if price.cache_write is None else price.cache_write
    return (plain * price.input + cached_input_tokens * cached_rate
            + cache_write_tokens * write_rate + output_tokens * price.output) / 1_000_000


# What each provider's batch API charges, as a share of its online price, for every kind of
# token (prompt-cache reads and writes included): OpenAI Batch API, Anthropic Message Batches
# and Gemini batch mode are each billed at half the standard rates (their pricing pages,
# checked 2026-12-01).
BATCH_PRICE_FACTOR: dict[str, float] = {"openai": 0.5, "anthropic": 0.5, "google": 0.5}


def batch_price_factor(provider: str) -> float:
    """The share of the online price a batch request of ``provider`` is billed (1.0: none
    known)."""
    return BATCH_PRICE_FACTOR.get(provider, 1.0)


def usage_for(model: str, input_tokens: int, output_tokens: int, *, cached: bool = False,
              cached_input_tokens: int = 0, cache_write_tokens: int = 0,
              batch_provider: str | None = None) -> TokenUsage:
    """Usage of one reply. A cached reply spent nothing in this run, so it counts zero tokens.

    ``batch_provider``: the reply came through that provider's batch API, billed at its batch
    price; the usage keeps what the same request would have cost online."""
    if cached:
        return TokenUsage(requests=0, cached_requests=1,
                          cost_usd=0.0 if price_of(model) is not None else None)
    online = estimate_cost(model, input_tokens, output_tokens,
                           cached_input_tokens=cached_input_tokens,
                           cache_write_tokens=cache_write_tokens)
    batch: dict[str, Any] = {}
    if batch_provider is not None:
        cost = None if online is None else online * batch_price_factor(batch_provider)
        batch = {"batch_requests": 1, "cost_usd": cost,
                 "batch_savings_usd": 0.0 if online is None or cost is None else online - cost}
    return TokenUsage(input_tokens=input_tokens, output_tokens=output_tokens, requests=1,
                      cached_input_tokens=cached_input_tokens,
                      cache_write_tokens=cache_write_tokens,
                      **{"cost_usd": online, **batch})
