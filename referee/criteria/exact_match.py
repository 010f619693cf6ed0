"""ExactMatchCriterion: the response is exactly the expected string."""

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

    def evaluate_sync(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        expected_response = expected.last_expected_response()
        actual_response = actual.actual_response.strip()
        if expected_response is None:
            skipped = self._skipped("The case defines no expected final response to compare with.")
            skipped.details["match"] = False
            return skipped
        is_match = actual_response == expected_response
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
