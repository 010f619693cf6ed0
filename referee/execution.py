"""What the model or agent under test actually did."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from referee.case import ToolCall
from referee.usage import TokenUsage


# The keys a model's dict may carry its response under, preferred first.
RESPONSE_KEYS = ("actual_response", "output", "response", "content", "text")


class TurnResult(BaseModel):
    """One turn of a multi-turn run."""

    user_content: str = ""
    response: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    node_visits: list[str] = Field(default_factory=list)


class ExecutionResult(BaseModel):
    actual_response: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    node_visits: list[str] = Field(default_factory=list)
    turns: list[TurnResult] = Field(default_factory=list)
    latency_s: float | None = None
    token_usage: TokenUsage | None = None
    error: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def coerce(cls, value: Any) -> "ExecutionResult":
        """Accept what a model function may return: a str, a dict or an ExecutionResult."""
        if isinstance(value, ExecutionResult):
            return value
        if isinstance(value, str):
            return cls(actual_response=value)
        if isinstance(value, dict):
            data = dict(value)
            if "actual_response" not in data:
                key = next((k for k in RESPONSE_KEYS[1:] if k in data), None)
                if key is None:
                    # Scoring an empty response instead would call a broken model merely wrong.
                    found = ", ".join(repr(k) for k in list(data)[:10]) or "none"
                    raise ValueError(
                        f"model returned a dict with no response key (its keys: {found}); "
                        f"expected one of {', '.join(RESPONSE_KEYS)}")
                data["actual_response"] = data.pop(key)
            return cls.model_validate(data)
        raise TypeError(
            f"model returned {type(value).__name__}; expected str, dict or ExecutionResult"
        )
