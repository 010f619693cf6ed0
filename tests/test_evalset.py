"""EvalSet loading and saving: .evalset.json / .json, .jsonl, .yaml, .csv, and their errors."""

import json

import pytest

from referee import EvalCase, EvalSet, InputError, Invocation, ToolCall


def sample_set() -> EvalSet:
    return EvalSet(
        eval_set_id="support",
        name="Support bot",
        description="Refund questions",
        eval_cases=[
            EvalCase(input="Can I get a refund?", expected_output="Yes, within 7 days.",
                     context=["Refunds: 7 days.", "Shipping: 3 days."], tags=["refund", "smoke"],
                     metadata={"priority": "high", "nested": {"k": [1, 2]}}, name="refund"),
            EvalCase.single_turn("Book a table", "Booked.", context="Open 9-5",
                                 expected_tool_trajectory=[ToolCall(name="book", args={
                                     "when": {"day": "mon", "slots": [1, 2]}})],
                                 expected_node_order=["router", "booking"]),
            EvalCase.multi_turn([
                Invocation(user_content="hi", expected_final_response="hello"),
                Invocation(user_content="cancel order 5", expected_final_response="Cancelled.",
                           expected_tool_trajectory=[ToolCall(name="cancel", args={"id": 5})]),
            ], eval_id="multi-1"),
        ],
    )


@pytest.mark.parametrize("filename", ["cases.evalset.json", "cases.json", "cases.jsonl",
                                      "cases.yaml", "cases.yml", "cases.csv"])
def test_round_trip_keeps_every_case(tmp_path, filename):
    original = sample_set()
    path = tmp_path / filename
    original.save(path)
    loaded = EvalSet.load(path)
    assert loaded.eval_cases == original.eval_cases
    assert [c.eval_id for c in loaded.eval_cases] == [c.eval_id for c in original.eval_cases]
    assert loaded.eval_cases[1].expected_tool_trajectory[0].args["when"]["slots"] == [1, 2]
    if filename.endswith((".json", ".yaml", ".yml")):
        assert (loaded.eval_set_id, loaded.name, loaded.description) == (
            "support", "Support bot", "Refund questions")
    else:
        assert loaded.eval_set_id == "cases"


def test_json_list_of_cases_and_derived_id(tmp_path):
    path = tmp_path / "smoke.evalset.json"
    path.write_text(json.dumps([{"input": "a", "expected_output": "b"},
                                {"conversation": [{"user_content": "c",
                                                   "expected_final_response": "d"}]}]))
    loaded = EvalSet.load(path)
    assert loaded.eval_set_id == "smoke" and loaded.name == "smoke"
    assert [c.input for c in loaded.eval_cases] == ["a", "c"]
    assert loaded.eval_cases[1].expected_output == "d"
    assert len(loaded) == 2


def test_single_turn_shorthand_is_written_compactly(tmp_path):
    path = tmp_path / "cases.jsonl"
    EvalSet(eval_cases=[EvalCase(input="a", expected_output="b")]).save(path)
    line = json.loads(path.read_text().splitlines()[0])
    assert set(line) == {"input", "expected_output", "eval_id"}


def test_jsonl_skips_blank_lines_and_reports_line_of_bad_field(tmp_path):
    path = tmp_path / "cases.jsonl"
    lines = ['{"input": "a"}', "", '{"input": "b"}', '{"input": "c"}', "", "",
             '{"input": "d", "expected_output": 42}']
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as info:
        EvalSet.load(path)
    assert str(info.value) == f"{path}:7: field 'expected_output': Input should be a valid string"
    assert (info.value.line, info.value.field) == (7, "expected_output")


def test_jsonl_lines_end_at_newline_only(tmp_path):
    """JSON writers leave U+2028, U+2029 and U+0085 raw inside strings; they are no line end."""
    path = tmp_path / "cases.jsonl"
    odd = "one\u2028two\u2029three\x85four\x0bfive"
    path.write_text(json.dumps({"input": odd}, ensure_ascii=False) + "\r\n"
                    + json.dumps({"input": "b"}) + "\n", encoding="utf-8")
    assert [case.input for case in EvalSet.load(path).eval_cases] == [odd, "b"]


def test_jsonl_invalid_json_names_line(tmp_path):
    path = tmp_path / "cases.jsonl"
    path.write_text('{"input": "a"}\n{"input": "b",}\n')
    with pytest.raises(InputError, match=r"cases\.jsonl:2: invalid JSON"):
        EvalSet.load(path)


def test_json_error_names_path_and_line(tmp_path):
    path = tmp_path / "cases.json"
    path.write_text('{"eval_cases": [\n  {"input": "a"},\n  {"input": "b",\n   "tags": "x"}\n]}\n')
    with pytest.raises(InputError) as info:
        EvalSet.load(path)
    assert str(info.value) == f"{path}:4: field 'eval_cases[1].tags': Input should be a valid list"


def test_json_syntax_error_names_line(tmp_path):
    path = tmp_path / "cases.json"
    path.write_text('[\n{"input": "a"}\n{"input": "b"}\n]')
    with pytest.raises(InputError, match=r"cases\.json:3: invalid JSON: Expecting ','"):
        EvalSet.load(path)


def test_union_field_error_lists_alternatives(tmp_path):
    path = tmp_path / "cases.jsonl"
    path.write_text('{"input": "a", "context": 5}\n')
    with pytest.raises(InputError, match=r":1: field 'context': Input should be a valid string "
                                         r"or a valid list"):
        EvalSet.load(path)


def test_nested_error_path_in_yaml_has_line(tmp_path):
    path = tmp_path / "cases.yaml"
    path.write_text(
        "name: demo\n"
        "eval_cases:\n"
        "  - input: a\n"
        "  - conversation:\n"
        "      - user_content: hi\n"
        "        expected_tool_trajectory:\n"
        "          - name: search\n"
        "          - args: {q: 1}\n")
    with pytest.raises(InputError) as info:
        EvalSet.load(path)
    message = str(info.value)
    assert message.startswith(f"{path}:8: field "
                              "'eval_cases[1].conversation[0].expected_tool_trajectory[1].name'")
    assert message.endswith("Field required")


def test_yaml_syntax_error_names_line(tmp_path):
    path = tmp_path / "cases.yaml"
    path.write_text("- input: a\n- input: [unclosed\n")
    with pytest.raises(InputError, match=r"cases\.yaml:\d+: invalid YAML"):
        EvalSet.load(path)


def test_unknown_case_key_is_an_error_not_silently_dropped(tmp_path):
    path = tmp_path / "cases.jsonl"
    path.write_text('{"input": "a", "expected_ouput": "b"}\n')
    with pytest.raises(InputError) as info:
        EvalSet.load(path)
    assert ("field 'expected_ouput': unknown case field (did you mean 'expected_output'?) "
            "(put extra data under 'metadata')") in str(info.value)
    assert "expected_output" in str(info.value)


def test_unknown_tool_call_key_is_an_error(tmp_path):
    path = tmp_path / "cases.json"
    path.write_text(json.dumps([{"conversation": [{"user_content": "x",
                                                   "expected_tool_trajectory": [{"tool": "s"}]}]}]))
    with pytest.raises(InputError, match=r"field '\[0\]\.conversation\[0\]\.expected_tool_trajectory"
                                         r"\[0\]\.tool': unknown tool call field"):
        EvalSet.load(path)


def test_top_level_shape_errors(tmp_path):
    path = tmp_path / "cases.json"
    path.write_text("42")
    with pytest.raises(InputError, match="expected an EvalSet object with 'eval_cases' or a list"):
        EvalSet.load(path)
    path.write_text('{"name": "x"}')
    with pytest.raises(InputError, match="field 'eval_cases': missing or not a list"):
        EvalSet.load(path)
    path.write_text('{"name": "x", "eval_cases": [], "owner": "me"}')
    with pytest.raises(InputError, match="unknown key 'owner'"):
        EvalSet.load(path)
    path.write_text('["just a string"]')
    with pytest.raises(InputError, match=r"field '\[0\]': Input should be a valid dictionary"):
        EvalSet.load(path)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    with pytest.raises(InputError, match="empty document"):
        EvalSet.load(empty)


def test_header_fields_must_be_strings(tmp_path):
    path = tmp_path / "cases.yaml"
    path.write_text("name: [a]\neval_cases: []\n")
    with pytest.raises(InputError, match=r"cases\.yaml:1: field 'name': should be a string"):
        EvalSet.load(path)


def test_duplicate_eval_ids_are_rejected_with_both_positions(tmp_path):
    path = tmp_path / "cases.jsonl"
    path.write_text('{"input": "a", "eval_id": "x"}\n{"input": "b", "eval_id": "x"}\n')
    with pytest.raises(InputError, match=r"cases\.jsonl:2: field 'eval_id': repeats eval_id 'x' "
                                         r"first used at line 1"):
        EvalSet.load(path)
    with pytest.raises(ValueError, match="repeats eval_id"):
        EvalSet(eval_cases=[EvalCase(input="same"), EvalCase(input="same")])


def test_missing_and_unsupported_files(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        EvalSet.load(tmp_path / "nope.jsonl")
    other = tmp_path / "cases.txt"
    other.write_text("x")
    with pytest.raises(InputError, match=r"unsupported case file type '\.txt' \(expected "):
        EvalSet.load(other)
    binary = tmp_path / "cases.json"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(InputError, match="not UTF-8"):
        EvalSet.load(binary)


# CSV ----------------------------------------------------------------------------------------


def test_csv_columns_map_to_case_fields(tmp_path):
    path = tmp_path / "cases.csv"
    path.write_text(
        "input,expected_output,context,tags,metadata.priority,expected_tool_trajectory,expected_node_order\n"
        'Refund?,Yes,"[""Refunds: 7 days"", ""Shipping""]","refund, smoke",high,"lookup, refund",router\n'
        '"multi\nline question",ok,[1] Footnote text,,,,\n'
        "\n"
        "plain,,,,,,\n")
    loaded = EvalSet.load(path)
    first, second, third = loaded.eval_cases
    assert first.context == ["Refunds: 7 days", "Shipping"]
    assert first.tags == ["refund", "smoke"]
    assert first.metadata == {"priority": "high"}
    assert [c.name for c in first.expected_tool_trajectory] == ["lookup", "refund"]
    assert first.expected_node_order == ["router"]
    assert first.expected_output == "Yes"
    assert second.input == "multi\nline question"
    assert second.context == "[1] Footnote text"
    assert third.expected_output is None and third.context is None


def test_csv_errors_name_the_row_line(tmp_path):
    path = tmp_path / "cases.csv"
    path.write_text('input,expected_tool_trajectory\na,\n"b\nc",\nd,"[{""name"": 3}]"\n')
    with pytest.raises(InputError) as info:
        EvalSet.load(path)
    assert str(info.value) == (f"{path}:5: field 'conversation[0].expected_tool_trajectory[0].name': "
                               "Input should be a valid string")


def test_csv_shape_errors(tmp_path):
    path = tmp_path / "cases.csv"
    path.write_text("question,answer\nq,a\n")
    with pytest.raises(InputError, match=r"cases\.csv:1: no 'input' column"):
        EvalSet.load(path)
    path.write_text("input,input\nq,a\n")
    with pytest.raises(InputError, match="column 'input' appears twice"):
        EvalSet.load(path)
    path.write_text("input,expected_output\nq,a,extra\n")
    with pytest.raises(InputError, match=r"cases\.csv:2: 3 cells but the header names 2 columns"):
        EvalSet.load(path)
    path.write_text('input,metadata\nq,"[1]"\n')
    with pytest.raises(InputError, match=r":2: field 'metadata': is a list \(expected a JSON object\)"):
        EvalSet.load(path)
    path.write_text('input,conversation\nq,"[{"\n')
    with pytest.raises(InputError, match=r":2: field 'conversation': invalid JSON"):
        EvalSet.load(path)
    path.write_text("")
    with pytest.raises(InputError, match="empty file"):
        EvalSet.load(path)


def test_csv_with_excel_bom_and_crlf(tmp_path):
    path = tmp_path / "cases.csv"
    path.write_bytes("\ufeffinput,expected_output\r\nq,a\r\n".encode("utf-8"))
    assert EvalSet.load(path).eval_cases[0].expected_output == "a"


def test_cases_key_is_accepted_in_documents(tmp_path):
    path = tmp_path / "cases.yaml"
    path.write_text("name: short\ncases:\n  - input: a\n")
    loaded = EvalSet.load(path)
    assert loaded.name == "short" and loaded.eval_cases[0].input == "a"


def test_eval_set_defaults_and_from_cases():
    named = EvalSet.from_cases([{"input": "a"}, EvalCase(input="b")], name="My Set!")
    assert named.eval_set_id == "my-set" and len(named) == 2
    assert named.cases[1].input == "b"
    assert EvalSet().eval_set_id == "evalset"


def test_a_case_with_nothing_to_ask_is_an_error(tmp_path):
    path = tmp_path / "cases.csv"
    path.write_text("input,expected_output\nq,a\n,orphan answer\n")
    with pytest.raises(InputError, match=r"cases\.csv:3: field 'input': the case has nothing to ask"):
        EvalSet.load(path)
    path = tmp_path / "cases.json"
    path.write_text('{"eval_cases": [{"tags": ["x"]}]}')
    with pytest.raises(InputError, match=r"field 'eval_cases\[0\]\.input'.*expected an 'input' or"):
        EvalSet.load(path)


def test_yaml_escaped_surrogate_pair_loads_as_its_character(tmp_path):
    # PyYAML reads "\ud83d\ude00" as two surrogates; JSON joins them. Both must give the emoji.
    yaml_file = tmp_path / "emoji.yaml"
    yaml_file.write_text('- eval_id: a\n  input: "smile \\ud83d\\ude00"\n', encoding="utf-8")
    json_file = tmp_path / "emoji.json"
    json_file.write_text('[{"eval_id": "a", "input": "smile \\ud83d\\ude00"}]', encoding="utf-8")
    for path in (yaml_file, json_file):
        case = EvalSet.load(path).eval_cases[0]
        assert case.input == "smile \U0001F600"
        assert case.conversation[0].user_content == "smile \U0001F600"


def test_yaml_merge_keys_still_override(tmp_path):
    # Repeated keys are refused, but a merged mapping's keys may be overridden, as YAML means.
    path = tmp_path / "merge.yaml"
    path.write_text("- &base {eval_id: a, input: q, tags: [x]}\n- <<: *base\n  eval_id: b\n",
                    encoding="utf-8")
    first, second = EvalSet.load(path).eval_cases
    assert (second.eval_id, second.input, second.tags) == ("b", "q", ["x"])


def test_yaml_keys_that_only_read_alike_are_not_repeats(tmp_path):
    # 1 and "1" are an int key and a str key, ~ and "~" a null and a str: two keys each.
    path = tmp_path / "keys.yaml"
    path.write_text('- eval_id: a\n  input: q\n  metadata: {m: {1: int, "1": str, ~: n, "~": s}}\n',
                    encoding="utf-8")
    [case] = EvalSet.load(path).eval_cases
    assert case.metadata["m"] == {1: "int", "1": "str", None: "n", "~": "s"}
    path.write_text('- eval_id: a\n  input: q\n  metadata: {"k": 1, k: 2}\n', encoding="utf-8")
    with pytest.raises(InputError, match="appears twice"):
        EvalSet.load(path)
