"""What the model or agent under test actually did."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from referee.case import ToolCall
from referee.usage import TokenUsage


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
                for key in ("output", "response", "content", "text"):
                    if key in data:
                        data["actual_response"] = data.pop(key)
                        break
            return cls.model_validate(data)
        raise TypeError(
            f"model returned {type(value).__name__}; expected str, dict or ExecutionResult"
        )
