"""Token accounting shared by judge calls, criteria, cases and runs."""

from __future__ import annotations

from pydantic import BaseModel


class TokenUsage(BaseModel):
    """Tokens and requests spent, with the input split the way providers bill it.

    ``input_tokens`` counts every prompt token, whatever its rate. Of those,
    ``cached_input_tokens`` were read from the provider's prompt cache (billed at the cached
    rate) and ``cache_write_tokens`` were written to it (Anthropic bills them above the input
    rate); the rest are plain input. ``cached_requests`` are replies served by referee's own
    reply cache, which cost nothing.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    cached_requests: int = 0
    cost_usd: float | None = None
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def uncached_input_tokens(self) -> int:
        """Input tokens billed at the plain input rate."""
        return max(self.input_tokens - self.cached_input_tokens - self.cache_write_tokens, 0)

    def describe(self) -> str:
        """One line for reports: requests, tokens by kind, and cost when known."""
        text = (f"{self.requests} request(s) ({self.cached_requests} from the reply cache), "
                f"{self.input_tokens} input")
        if self.cached_input_tokens or self.cache_write_tokens:
            text += (f" ({self.cached_input_tokens} prompt-cached, "
                     f"{self.cache_write_tokens} written to the prompt cache)")
        text += f" + {self.output_tokens} output tokens"
        if self.cost_usd is not None:
            text += f", ${self.cost_usd:.4f}"
        return text

    def __add__(self, other: "TokenUsage | None") -> "TokenUsage":
        if other is None:
            return self.model_copy()
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
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
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
