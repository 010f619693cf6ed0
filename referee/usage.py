"""Token accounting shared by judge calls, criteria, cases and runs."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import AliasChoices, BaseModel, Field, computed_field


class TokenUsage(BaseModel):
    """Tokens and requests spent, with the input split the way providers bill it.

    ``input_tokens`` counts every prompt token, whatever its rate. Of those,
    ``cached_input_tokens`` were read from the provider's prompt cache (billed at the cached
    rate) and ``cache_write_tokens`` were written to it (Anthropic bills them above the input
    rate); the rest are plain input. 10xgraph's ``cache_read_tokens`` and
    ``cache_creation_tokens`` are the same two counts under its names. ``cached_requests`` are
    replies served by referee's own reply cache, which cost nothing. Usages add with ``+`` and
    ``sum()``.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    cached_requests: int = 0
    cost_usd: float | None = None
    # 10xgraph spells these cache_read_tokens / cache_creation_tokens; both names are accepted
    # on input and readable as properties, but stored (and serialised) once.
    cached_input_tokens: int = Field(
        default=0, validation_alias=AliasChoices("cached_input_tokens", "cache_read_tokens"))
    cache_write_tokens: int = Field(
        default=0, validation_alias=AliasChoices("cache_write_tokens", "cache_creation_tokens"))
    # Requests sent through a provider's batch API (billed at its batch price), and what that
    # price saved against the same requests online: cost_usd + batch_savings_usd is the
    # online bill.
    batch_requests: int = 0
    batch_savings_usd: float = 0.0

    @computed_field  # type: ignore[prop-decorator]  # serialised, as 10xgraph's to_dict has it
    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def cache_read_tokens(self) -> int:
        """10xgraph's name for ``cached_input_tokens``."""
        return self.cached_input_tokens

    @property
    def cache_creation_tokens(self) -> int:
        """10xgraph's name for ``cache_write_tokens``."""
        return self.cache_write_tokens

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
        if self.batch_requests:
            text += f"; {self.batch_requests} by batch API"
            if self.online_cost_usd is not None:
                text += f" (online: ${self.online_cost_usd:.4f})"
        return text

    @property
    def online_cost_usd(self) -> float | None:
        """What these requests would have cost online (batch requests at the online price)."""
        return None if self.cost_usd is None else self.cost_usd + self.batch_savings_usd

    def to_dict(self) -> dict[str, int]:
        """10xgraph's plain-dict form, with the total."""
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cache_read_tokens": self.cache_read_tokens,
                "cache_creation_tokens": self.cache_creation_tokens,
                "total_tokens": self.total_tokens}

    def __add__(self, other: TokenUsage | int | None) -> TokenUsage:
        if other is None or (type(other) is int and other == 0):  # sum() starts from 0
            return self.model_copy()
        if not isinstance(other, TokenUsage):
            return NotImplemented
        return TokenUsage.total([self, other])  # type: ignore[return-value]

    __radd__ = __add__

    @classmethod
    def total(cls, usages: Iterable[TokenUsage | None]) -> TokenUsage | None:
        present = [u for u in usages if u is not None]
        if not present:
            return None
        # One model for the sum, where adding pairwise built one per term (a case sums the
        # usage of every judge reply it got).
        costs = [u.cost_usd for u in present if u.cost_usd is not None]
        return cls(input_tokens=sum(u.input_tokens for u in present),
                   output_tokens=sum(u.output_tokens for u in present),
                   requests=sum(u.requests for u in present),
                   cached_requests=sum(u.cached_requests for u in present),
                   cost_usd=sum(costs) if costs else None,
                   cached_input_tokens=sum(u.cached_input_tokens for u in present),
                   cache_write_tokens=sum(u.cache_write_tokens for u in present),
                   batch_requests=sum(u.batch_requests for u in present),
                   batch_savings_usd=sum(u.batch_savings_usd for u in present))
