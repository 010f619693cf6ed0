"""ExactMatchCriterion: the response is exactly the expected string. One rule for both API
surfaces: the multivon-style ``ExactMatch`` (referee.evaluators) is this criterion with
multivon's settings."""

from __future__ import annotations

from referee.case import EvalCase
from referee.criteria.base import SyncCriterion
from referee.execution import ExecutionResult
from referee.result import CriterionResult


class ExactMatchCriterion(SyncCriterion):
    """``actual.actual_response.strip()`` equals the last non-empty expected final response.

    Score 1.0 or 0.0, no partial credit. As the 10xgraph-style API writes it, only the response is
    stripped: the expected text is compared as written (in YAML, use a ``|-`` block scalar so no
    trailing newline is added). A case with no expected response is reported as skipped
    (``details["match"]`` is False) rather than compared with "".
    Not a ``CriteriaConfig`` field: instantiate it directly or look up ``"exact_match"``.
    """

    name = "exact_match"
    reads = ("actual_response",)
    description = "Evaluates exact string match of response"
    # The rule's settings, the 10xgraph-style API's here; a surface with other documented
    # defaults sets its own (multivon's ExactMatch: case-insensitive, both sides stripped).
    case_sensitive: bool = True
    strips_expected: bool = False

    def expected_text(self, case: EvalCase) -> str | None:
        """What the response must equal; None when the case says nothing."""
        return case.last_expected_response()

    def no_expectation(self, case: EvalCase) -> str:
        return "The case defines no expected final response to compare with."

    def evaluate_sync(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        expected_response = self.expected_text(expected)
        actual_response = (actual.actual_response or "").strip()
        if expected_response is None:
            skipped = self._skipped(self.no_expectation(expected))
            skipped.details["match"] = False
            return skipped
        if self.strips_expected:
            expected_response = expected_response.strip()
        if self.case_sensitive:
            is_match = actual_response == expected_response
        else:
            is_match = actual_response.casefold() == expected_response.casefold()
        if is_match:
            reason = "The response matches the expected response exactly."
        else:
            reason = f"Expected {expected_response[:200]!r}, got {actual_response[:200]!r}."
        return self._result(1.0 if is_match else 0.0, {
            "match": is_match,
            "reason": reason,
            "actual_length": len(actual_response),
            "expected_length": len(expected_response),
        })
