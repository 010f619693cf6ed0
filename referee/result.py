"""The outcome of one criterion on one case."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from referee.usage import TokenUsage

ErrorKind = Literal["judge", "evaluator"]


class CriterionResult(BaseModel):
    criterion: str
    score: float
    passed: bool
    threshold: float
    details: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None
    token_usage: TokenUsage | None = None
    # referee extensions: a skip is reported, never a silent pass; error_kind lets runners
    # tell a judge outage (JUDGE_ERROR) from a broken evaluator (EVALUATOR_ERROR).
    skipped: bool = False
    error_kind: ErrorKind | None = None

    @property
    def reason(self) -> str:
        reason = self.details.get("reason")
        if reason:
            return str(reason)
        return self.error or ""

    @property
    def explanation(self) -> str:
        """The error, else the reason, for a line that already names the criterion (a judge
        error often starts with the criterion's name itself)."""
        text = self.error or self.reason or ""
        return text.removeprefix(f"{self.criterion}: ")

    @property
    def name(self) -> str:
        return self.criterion


# Document 001 calls the per-evaluator outcome EvalResult.
EvalResult = CriterionResult
