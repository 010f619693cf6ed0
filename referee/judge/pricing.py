"""Token prices: an estimate of what judge calls cost, extendable by users."""

from __future__ import annotations

import re
import threading

from referee.usage import TokenUsage

# USD per million tokens (input, output): public list prices at the time of writing.
# An estimate only; register your own negotiated or newer prices with set_price().
_PRICES: dict[str, tuple[float, float]] = {
    "claude-haiku-4-5": (1.00, 5.00),
    "claude-sonnet-4-5": (3.00, 15.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gemini-2.5-flash": (0.30, 2.50),
    "gemini-2.5-pro": (1.25, 10.00),
}
_lock = threading.Lock()
# Dated snapshots ("claude-haiku-4-5-20251001", "gpt-4o-2024-08-06") share their family's price.
_DATE_SUFFIX = re.compile(r"(?:-\d{8}|-\d{4}-\d{2}-\d{2}|@\d{8})$")


def set_price(model: str, input_per_mtok: float, output_per_mtok: float) -> None:
    """Register (or replace) the USD price per million input and output tokens of a model."""
    if input_per_mtok < 0 or output_per_mtok < 0:
        raise ValueError("prices must not be negative")
    with _lock:
        _PRICES[model.strip().lower()] = (float(input_per_mtok), float(output_per_mtok))


def price_of(model: str) -> tuple[float, float] | None:
    name = model.strip().lower()
    if "/" in name:
        name = name.rsplit("/", 1)[-1]
    with _lock:
        if name in _PRICES:
            return _PRICES[name]
        return _PRICES.get(_DATE_SUFFIX.sub("", name))


def estimate_cost(model: str, input_tokens: int, output_tokens: int) -> float | None:
    """Estimated USD cost, or None when the model has no registered price."""
    price = price_of(model)
    if price is None:
        return None
    return (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000


def usage_for(model: str, input_tokens: int, output_tokens: int, *,
              cached: bool = False) -> TokenUsage:
    """Usage of one reply. A cached reply spent nothing in this run, so it counts zero tokens."""
    if cached:
        return TokenUsage(requests=0, cached_requests=1,
                          cost_usd=0.0 if price_of(model) is not None else None)
    return TokenUsage(input_tokens=input_tokens, output_tokens=output_tokens, requests=1,
                      cost_usd=estimate_cost(model, input_tokens, output_tokens))
