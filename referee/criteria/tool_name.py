"""ToolNameMatchCriterion: were the right tools called, ignoring order and arguments."""

from __future__ import annotations

from collections import Counter

from referee.case import EvalCase, flattened
from referee.criteria.base import SyncCriterion
from referee.execution import ExecutionResult
from referee.result import CriterionResult


class ToolNameMatchCriterion(SyncCriterion):
    """Multiset comparison of tool names: matched expected names over expected names.

    Calling a tool twice satisfies two expectations of it, not more. When nothing is expected
    the score is 1.0 if no tool was called and 0.5 if some were. With ``include_nested`` (a
    referee extension) the names of calls made inside agents used as tools count too.
    """

    name = "tool_name_match_score"
    reads = ("tool_calls",)
    description = "Evaluates tool name matching (ignores arguments)"

    def evaluate_sync(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        expected_names = [c.name for c in expected.expected_tool_trajectory]
        calls = (flattened(actual.tool_calls) if self.config.include_nested
                 else actual.tool_calls)
        actual_names = [c.name for c in calls]
        details = {"expected_names": expected_names, "actual_names": actual_names}
        if not expected_names:
            if not actual_names:
                return self._result(1.0, {**details, "reason": "No tools expected and none called."})
            return self._result(0.5, {**details, "reason": (
                f"No tools expected but {len(actual_names)} called: {', '.join(actual_names)}.")})
        matched = Counter(expected_names) & Counter(actual_names)
        missing = list((Counter(expected_names) - matched).elements())
        extra = list((Counter(actual_names) - matched).elements())
        count = sum(matched.values())
        reason = f"Matched {count} of {len(expected_names)} expected tool names."
        if missing:
            reason += f" Missing: {', '.join(missing)}."
        return self._result(count / len(expected_names), {
            **details, "reason": reason, "missing": missing, "extra": extra,
        })
