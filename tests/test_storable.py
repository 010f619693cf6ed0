"""referee.storable: the stand-ins for values JSON cannot hold, and the fast path."""

from __future__ import annotations

import math

import pytest

from referee import EvalCase, ExecutionResult
from referee.case import Invocation, ToolCall
from referee.report.model import CaseResult, CaseStatus
from referee.result import CriterionResult
from referee.storable import make_storable


def _case(**fields) -> CaseResult:
    return CaseResult(eval_id="x", status=CaseStatus.PASSED, **fields)


@pytest.mark.parametrize("result, path, stored_as", [
    (_case(execution=ExecutionResult(tool_calls=[ToolCall(name="t", args={"a": [math.nan]})])),
     "execution.tool_calls[0].args.a[0]", '"NaN"'),
    (_case(execution=ExecutionResult(latency_s=math.inf)), "execution.latency_s", "null"),
    (_case(criterion_results=[CriterionResult(criterion="c", score=1, passed=True,
                                              threshold=math.nan)]),
     "criterion_results[0].threshold", "0.0"),
    (_case(case=EvalCase(conversation=[Invocation(user_content={"x": -math.inf})])),
     "case.conversation[0].user_content.x", '"-Infinity"'),
    (_case(metadata={"when": {1, 2}, "raw": bytearray(b"\xfe")}), "metadata.raw", "base64"),
])
def test_each_unstorable_value_is_found_wherever_it_is(result, path, stored_as) -> None:
    stored, converted = make_storable(result)
    assert [(c.path, c.stored_as) for c in converted] == [(path, stored_as)]
    assert stored is not result
    CaseResult.model_validate_json(stored.model_dump_json())  # it round-trips


def test_a_storable_case_is_returned_as_is() -> None:
    result = _case(execution=ExecutionResult(actual_response="NaN", metadata={"k": "Infinity"}),
                   metadata={"ok": [1, 2.5, None, "x"]})
    stored, converted = make_storable(result)
    assert stored is result and converted == []


def test_values_pydantic_can_store_are_left_to_pydantic() -> None:
    import datetime

    when = datetime.datetime(2026, 1, 2, 3, 4, 5)
    result = _case(metadata={"when": when, "tags": {"a"}, "blob": b"\xff"})
    stored, converted = make_storable(result)
    assert [c.path for c in converted] == ["metadata.blob"]
    assert stored.metadata["when"] == "2026-01-02T03:04:05" and stored.metadata["tags"] == ["a"]
