"""Token accounting shared by judge calls, criteria, cases and runs."""

from __future__ import annotations

from pydantic import BaseModel, computed_field


class TokenUsage(BaseModel):
    """Tokens, requests and cost. ``cache_read_tokens``/``cache_creation_tokens`` are 10xgraph's
    prompt-cache counts (of the input tokens, not on top of them); usages add with ``+`` and
    ``sum()``."""

    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    cached_requests: int = 0
    cost_usd: float | None = None
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0

    @computed_field  # type: ignore[prop-decorator]  # serialised, as 10xgraph's to_dict has it
    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, int]:
        """10xgraph's plain-dict form, with the total."""
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cache_read_tokens": self.cache_read_tokens,
                "cache_creation_tokens": self.cache_creation_tokens,
                "total_tokens": self.total_tokens}

    def __add__(self, other: "TokenUsage | int | None") -> "TokenUsage":
        if other is None or (type(other) is int and other == 0):  # sum() starts from 0
            return self.model_copy()
        if not isinstance(other, TokenUsage):
            return NotImplemented
        if self.cost_usd is None and other.cost_usd is None:
            cost = None
        else:
            cost = (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return TokenUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            requests=self.requests + other.requests,
            cached_requests=self.cached_requests + other.cached_requests,
            cost_usd=cost,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_creation_tokens=self.cache_creation_tokens + other.cache_creation_tokens,
        )

    __radd__ = __add__

    @classmethod
    def total(cls, usages: "list[TokenUsage | None]") -> "TokenUsage | None":
        present = [u for u in usages if u is not None]
        if not present:
            return None
        out = cls()
        for u in present:
            out = out + u
        return out
