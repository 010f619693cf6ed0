"""Issue 10, item 6: no silent input loss.

A misspelt or unknown key in any data or config model is an error that names the key and the
nearest valid one; the single-turn shorthand carries every expectation ``single_turn`` takes;
a CSV column that maps to no field is an error (``metadata.KEY`` columns are metadata). Each
check feeds the hostile input and asserts on the error, or on the score the kept input gives.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from referee import (
    AgentEvaluator,
    CriterionConfig,
    EvalCase,
    EvalConfig,
    ExecutionResult,
    Invocation,
    JudgeConfig,
    MatchType,
    Rubric,
    ToolCall,
    TurnResult,
    UserSimulatorConfig,
)
from referee.config import CriteriaConfig
from referee.errors import InputError
from referee.evalset import EvalSet
from referee.report.model import CaseStatus

TYPOS = [
    (EvalCase, {"input": "q", "expected_ouput": "a"}, "expected_ouput", "expected_output"),
    (EvalCase, {"input": "q", "expected_tool_trajectroy": []}, "expected_tool_trajectroy",
     "expected_tool_trajectory"),
    (Invocation, {"user_content": "q", "expected_final_respones": "a"}, "expected_final_respones",
     "expected_final_response"),
    (ToolCall, {"name": "search", "arg": {"q": 1}}, "arg", "args"),
    (ExecutionResult, {"actual_response": "a", "tool_cals": []}, "tool_cals", "tool_calls"),
    (TurnResult, {"respone": "a"}, "respone", "response"),
    (CriterionConfig, {"num_sampls": 3}, "num_sampls", "num_samples"),
    (CriteriaConfig, {"trajectroy": {}}, "trajectroy", "trajectory"),
    (EvalConfig, {"max_concurrancy": 3}, "max_concurrancy", "max_concurrency"),
    (JudgeConfig, {"modle": "gpt-4o-mini"}, "modle", "model"),
    (UserSimulatorConfig, {"max_turn": 3}, "max_turn", "max_turns"),
    (Rubric, {"rubric_id": "r", "content": "c", "wieght": 2}, "wieght", "weight"),
]


@pytest.mark.parametrize("model, data, key, nearest", TYPOS,
                         ids=[f"{m.__name__}.{k}" for m, _, k, _ in TYPOS])
def test_an_unknown_field_names_itself_and_the_nearest_valid_one(model, data, key, nearest):
    with pytest.raises(ValidationError) as info:
        model(**data)
    message = str(info.value)
    assert f"unknown {model.__name__} field {key!r} (did you mean {nearest!r}?)" in message
    with pytest.raises(ValidationError, match=f"did you mean {nearest!r}"):
        model.model_validate(data)


def test_the_issue_example_no_longer_drops_the_trajectory():
    with pytest.raises(ValidationError, match="unknown EvalCase field 'bogus_field'"):
        EvalCase(input="refund?", expected_output="done",
                 expected_tool_trajectory=[ToolCall(name="refund")], bogus_field=3)
    case = EvalCase(input="refund?", expected_output="done",
                    expected_tool_trajectory=[ToolCall(name="refund")])
    config = EvalConfig(criteria=CriteriaConfig(trajectory=CriterionConfig.trajectory(
        threshold=1.0, match_type=MatchType.EXACT)))
    # An agent that calls no tool must fail against the kept expectation, not pass against [].
    result = AgentEvaluator(lambda _: "done", config=config, save=False).evaluate_case_sync(case)
    assert result.status == CaseStatus.FAILED
    assert result.criterion_results[0].score == 0.0


@pytest.mark.parametrize("shorthand, field", [
    ({"expected_tool_trajectory": [ToolCall(name="lookup", args={"id": 1})]},
     "expected_tool_trajectory"),
    ({"expected_tools": [ToolCall(name="lookup", args={"id": 1})]}, "expected_tool_trajectory"),
    ({"expected_node_order": ["router", "lookup"]}, "expected_node_order"),
    ({"expected_intermediate_responses": ["checking"]}, "expected_intermediate_responses"),
])
def test_the_single_turn_shorthand_carries_every_expectation(shorthand, field):
    case = EvalCase(input="Where is order 1?", expected_output="Shipped.", eval_id="o1", **shorthand)
    same = EvalCase.single_turn(input="Where is order 1?", expected_output="Shipped.",
                                eval_id="o1", **shorthand)
    assert case == same
    value = next(iter(shorthand.values()))
    assert getattr(case.conversation[0], field) == value
    assert case.conversation[0].user_text == "Where is order 1?"
    assert case.conversation[0].expected_final_response == "Shipped."


def test_the_shorthand_is_refused_where_it_cannot_apply():
    with pytest.raises(ValidationError, match="belongs on a turn when the case has a conversation"):
        EvalCase(conversation=[Invocation(user_content="a")],
                 expected_tool_trajectory=[ToolCall(name="x")])
    with pytest.raises(ValidationError, match="needs the turn it expects: give 'input'"):
        EvalCase(expected_node_order=["router"])


def test_a_model_returning_a_misspelt_key_is_a_model_error_naming_it():
    result = AgentEvaluator(lambda _: {"output": "ok", "tool_cals": [{"name": "x"}]},
                            save=False).evaluate_case_sync(EvalCase(input="q"))
    assert result.status == CaseStatus.MODEL_ERROR
    assert "unknown ExecutionResult field 'tool_cals' (did you mean 'tool_calls'?)" in result.error


def test_case_files_name_the_unknown_key_its_line_and_the_nearest(tmp_path):
    path = tmp_path / "cases.json"
    path.write_text('{"eval_cases": [\n  {"input": "a"},\n  {"input": "b",\n'
                    '   "conversation": [{"user_content": "b", "expected_node_ordr": ["n"]}]}\n]}\n')
    with pytest.raises(InputError) as info:
        EvalSet.load(path)
    text = str(info.value)
    assert text.startswith(f"{path}:4: field 'eval_cases[1].conversation[0].expected_node_ordr'")
    assert "unknown turn field (did you mean 'expected_node_order'?)" in text


def test_a_csv_column_that_maps_to_no_field_is_an_error(tmp_path):
    path = tmp_path / "cases.csv"
    path.write_text("input,expected_outptu,priority\nq,a,high\n")
    with pytest.raises(InputError) as info:
        EvalSet.load(path)
    text = str(info.value)
    assert text.startswith(f"{path}:1: column 'expected_outptu' maps to no case field "
                           "(did you mean 'expected_output'?)")
    assert "metadata.KEY for a metadata entry" in text and "expected_node_order" in text
    path.write_text("input,priority\nq,high\n")
    with pytest.raises(InputError, match="column 'priority' maps to no case field"):
        EvalSet.load(path)


def test_metadata_columns_take_an_explicit_prefix(tmp_path):
    path = tmp_path / "cases.csv"
    path.write_text('input,metadata.priority,metadata.owner,metadata\nq,high,ops,"{""a"": 1}"\n')
    case = EvalSet.load(path).eval_cases[0]
    assert case.metadata == {"priority": "high", "owner": "ops", "a": 1}
    path.write_text("input,metadata.\nq,x\n")
    with pytest.raises(InputError, match="column 'metadata.' maps to no case field"):
        EvalSet.load(path)


def test_camel_case_keys_are_read_not_rejected():
    case = EvalCase.model_validate({"input": "q", "expectedOutput": "a", "evalId": "c"})
    assert (case.expected_output, case.eval_id) == ("a", "c")
