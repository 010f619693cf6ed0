"""The outcome of one criterion on one case."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field

from referee._strict import StrictModel, move_alias
from referee.redact import RedactedText
from referee.usage import TokenUsage

ErrorKind = Literal["judge", "evaluator"]


_ERROR_REASON_LABELS = {"judge": "judge unavailable", "evaluator": "evaluator error"}
_SKIP_MARK = "[skipped]"


class CriterionResult(StrictModel):
    """One criterion's verdict on one case.

    multivon's ``EvalResult(evaluator=, score=, passed=, reason=, metadata=)`` builds the same
    model: ``evaluator`` is ``criterion``, ``reason`` and ``metadata`` land in ``details``.
    """

    _input_aliases = frozenset({"evaluator", "reason", "metadata"})

    criterion: str
    score: float
    passed: bool
    threshold: float = 0.0
    details: dict[str, Any] = Field(default_factory=dict)
    error: RedactedText | None = None
    token_usage: TokenUsage | None = None
    # referee extensions: a skip is reported, never a silent pass; error_kind lets runners
    # tell a judge outage (JUDGE_ERROR) from a broken evaluator (EVALUATOR_ERROR).
    skipped: bool = False
    error_kind: ErrorKind | None = None

    def __init__(self, *positional: Any, **fields: Any) -> None:
        # multivon's EvalResult is a dataclass: EvalResult("name", 0.9, True, "reason", {...}).
        if positional:
            names = ("evaluator" if "criterion" not in fields else "criterion", "score", "passed",
                     "reason", "metadata")
            if len(positional) > len(names):
                raise TypeError(f"{type(self).__name__} takes at most {len(names)} positional "
                                "arguments (evaluator, score, passed, reason, metadata)")
            for key, value in zip(names, positional):
                if key in fields:
                    raise TypeError(f"{type(self).__name__} got {key!r} twice")
                fields[key] = value
        super().__init__(**fields)

    @classmethod
    def _normalise_input(cls, data: dict[str, Any]) -> dict[str, Any]:
        move_alias(data, "evaluator", "criterion")
        if "metadata" in data:
            details = data.get("details") or {}
            data["details"] = {**(data.pop("metadata") or {}), **details}
        if "reason" in data:
            reason = data.pop("reason")
            if reason:
                data["details"] = {**(data.get("details") or {}), "reason": reason}
        return data

    @classmethod
    def success(cls, criterion: str, score: float, threshold: float,
                details: dict[str, Any] | None = None,
                token_usage: TokenUsage | None = None) -> CriterionResult:
        """10xgraph: a scored result that passes when ``score >= threshold``."""
        return cls(criterion=criterion, score=score, passed=score >= threshold,
                   threshold=threshold, details=details or {}, token_usage=token_usage)

    @classmethod
    def failure(cls, criterion: str, error: str, threshold: float = 0.0) -> CriterionResult:
        """10xgraph: the criterion could not score the case (an evaluator error)."""
        return cls(criterion=criterion, score=0.0, passed=False, threshold=threshold,
                   error=error, error_kind="evaluator")

    @property
    def evaluator(self) -> str:
        return self.criterion

    @property
    def metadata(self) -> dict[str, Any]:
        return self.details

    @property
    def reason(self) -> str:
        """The criterion's reason; for an error, the error marked as multivon marks it
        (``[judge unavailable: ...]``, ``[evaluator error: ...]``); for a skip, the reason after
        multivon's ``[skipped]`` mark, which multivon's users filter on."""
        reason = self.details.get("reason")
        if reason:
            reason = str(reason)
            if self.skipped and not reason.startswith(_SKIP_MARK):
                return f"{_SKIP_MARK} {reason}"
            return reason
        if self.error and self.error_kind in _ERROR_REASON_LABELS:
            return f"[{_ERROR_REASON_LABELS[self.error_kind]}: {self.error}]"
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

    @property
    def is_judge_error(self) -> bool:
        """The judge could not give a verdict (an outage, or 10xgraph's 0.5 fallback)."""
        return self.error_kind == "judge" or bool(self.details.get("judge_unavailable"))

    @property
    def is_error(self) -> bool:
        """The criterion could not be scored: a judge outage or a broken evaluator."""
        return self.error is not None or self.error_kind is not None or self.is_judge_error

    @property
    def is_scored(self) -> bool:
        """A quality verdict: neither skipped (nor disabled) nor errored. Only these count
        towards a criterion's mean and pass rate."""
        return not self.skipped and not self.is_error


def unique_labels(names: Sequence[str]) -> list[str]:
    """One label per criterion of a run: the name, and ``name#2``, ``name#3`` for later namesakes.

    Two ``Contains`` checks in one suite are two results; keyed by bare name they would collapse
    into one row of criterion_stats and one JUnit test.
    """
    taken = set(names)
    seen: dict[str, int] = {}
    labels: list[str] = []
    for name in names:
        n = seen.get(name, 0) + 1
        seen[name] = n
        label = name
        while n > 1 and (label := f"{name}#{n}") in taken:
            n += 1
            seen[name] = n
        taken.add(label)
        labels.append(label)
    return labels


# The multivon-style API calls the per-evaluator outcome EvalResult.
EvalResult = CriterionResult
