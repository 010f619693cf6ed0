from referee import EvalCase, ExecutionResult, Invocation, ToolCall


def test_single_turn_becomes_one_turn_conversation():
    case = EvalCase(input="hi", expected_output="hello")
    assert len(case.conversation) == 1
    assert case.conversation[0].user_text == "hi"
    assert case.conversation[0].expected_final_response == "hello"
    assert case.last_expected_response() == "hello"


def test_eval_id_is_stable_across_round_trip():
    case = EvalCase(input="hi", expected_output="hello", context=["a", "b"])
    again = EvalCase.model_validate(case.model_dump())
    assert again.eval_id == case.eval_id
    assert EvalCase(input="other").eval_id != case.eval_id


def test_toolcall_arguments_alias_and_nested_hashing():
    call = ToolCall(name="search", arguments={"q": ["a", {"b": [1, 2]}]})
    assert call.args == {"q": ["a", {"b": [1, 2]}]}
    same = ToolCall(name="search", args={"q": ["a", {"b": [1, 2]}]})
    assert call == same and hash(call) == hash(same)
    assert len({call, same}) == 1


def test_multi_turn_views_concatenate_turns():
    case = EvalCase.multi_turn([
        Invocation(user_content="a", expected_tool_trajectory=[ToolCall(name="x")], expected_node_order=["n1"]),
        {"user_content": "b", "expected_final_response": "done",
         "expected_tool_trajectory": [{"name": "y"}], "expected_node_order": ["n2"]},
    ])
    assert [c.name for c in case.expected_tool_trajectory] == ["x", "y"]
    assert case.expected_node_order == ["n1", "n2"]
    assert case.last_expected_response() == "done"
    assert case.input == "b"


def test_execution_result_coerce():
    assert ExecutionResult.coerce("x").actual_response == "x"
    assert ExecutionResult.coerce({"output": "y"}).actual_response == "y"
    import pytest
    with pytest.raises(TypeError, match="expected str, dict or ExecutionResult"):
        ExecutionResult.coerce(42)
