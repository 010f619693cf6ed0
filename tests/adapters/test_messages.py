"""Recorded OpenAI-style message lists (and LangChain exports) scored without re-running."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from referee import EvalCase, ToolCall
from referee.adapters import (
    RECORDED_MODEL_ID,
    TRACE_NOTES_KEY,
    execution_from_messages,
    read_traces,
    score_traces,
)
from referee.config import CriteriaConfig, CriterionConfig, EvalConfig, MatchType
from referee.criteria.keywords import ContainsKeywordsCriterion
from referee.errors import InputError
from referee.report.model import CaseStatus

WEATHER_RUN = [
    {"role": "system", "content": "You are a weather bot."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21C"},
    {"role": "assistant", "content": "Sunny and 21C in Paris."},
    {"role": "user", "content": "And tomorrow?"},
    {"role": "assistant", "content": [{"type": "text", "text": "Rain tomorrow."}]},
]


def test_each_user_message_starts_a_turn_and_tool_messages_give_results():
    execution = execution_from_messages(WEATHER_RUN)

    assert [t.user_content for t in execution.turns] == ["Weather in Paris?", "And tomorrow?"]
    assert [t.response for t in execution.turns] == ["Sunny and 21C in Paris.", "Rain tomorrow."]
    assert execution.actual_response == "Rain tomorrow."
    assert execution.tool_calls == [ToolCall(name="get_weather", args={"city": "Paris"},
                                             result="sunny, 21C", call_id="call_1")]
    assert execution.turns[1].tool_calls == []
    assert TRACE_NOTES_KEY not in execution.metadata


def test_langchain_exports_read_like_openai_messages():
    exported = [  # messages_to_dict() and model_dump() shapes, as LangGraph users save them
        {"type": "human", "data": {"content": "Weather in Oslo?", "type": "human"}},
        {"type": "ai", "content": "", "tool_calls": [
            {"name": "get_weather", "args": {"city": "Oslo"}, "id": "c9", "type": "tool_call"}],
         "usage_metadata": {"input_tokens": 12, "output_tokens": 3, "total_tokens": 15}},
        {"type": "tool", "content": "snow", "tool_call_id": "c9"},
        {"type": "ai", "content": "Snow in Oslo.",
         "usage_metadata": {"input_tokens": 20, "output_tokens": 4, "total_tokens": 24}},
    ]
    execution = execution_from_messages(exported)

    assert execution.actual_response == "Snow in Oslo."
    assert [(c.name, c.args, c.result) for c in execution.tool_calls] == [
        ("get_weather", {"city": "Oslo"}, "snow")]
    assert (execution.token_usage.input_tokens, execution.token_usage.output_tokens) == (32, 7)


def test_what_the_messages_leave_out_is_noted_not_guessed():
    execution = execution_from_messages([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "tool_calls": [
            {"id": "a", "function": {"name": "search", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "zzz", "content": "orphan"},
    ])
    notes = execution.metadata[TRACE_NOTES_KEY]
    assert execution.tool_calls[0].result is None
    assert any("call id 'zzz'" in n and "messages[2]" in n for n in notes)
    assert any("'search' (id a) has no recorded result" in n for n in notes)


def test_bad_arguments_name_the_field():
    with pytest.raises(InputError) as caught:
        execution_from_messages([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "tool_calls": [
                {"id": "a", "function": {"name": "search", "arguments": "{city: Paris"}}]}],
            where="run.jsonl:4")
    assert str(caught.value).startswith(
        "run.jsonl:4: field 'messages[1].tool_calls[0].function.arguments': not valid JSON")


def _write_jsonl(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_a_bad_record_fails_its_own_case_only(tmp_path):
    traces = _write_jsonl(tmp_path / "runs.jsonl", [
        {"id": "good", "messages": WEATHER_RUN[:5]},
        {"id": "bad", "messages": [{"role": "robot", "content": "beep"}]},
    ])
    report = score_traces(traces, criteria=[ContainsKeywordsCriterion(
        config=CriterionConfig(threshold=1.0, keywords=["Paris"]))], save=False, verbose=False)

    assert report.model_id == RECORDED_MODEL_ID == "recorded"
    good, bad = report.cases
    assert good.status == CaseStatus.PASSED
    assert good.case.input == "Weather in Paris?"  # the record is its own case
    assert bad.status == CaseStatus.MODEL_ERROR
    assert bad.error == (f"{traces}:2: field 'messages[0].role': unknown role 'robot' "
                         f"(expected user, assistant, tool or system)")


def test_runs_pair_with_a_case_file_by_id_and_missing_ones_are_errors(tmp_path):
    traces = _write_jsonl(tmp_path / "runs.jsonl", [
        {"eval_id": "paris", "messages": WEATHER_RUN[1:5]},
        {"eval_id": "stray", "messages": WEATHER_RUN[1:5]},
    ])
    cases = [
        EvalCase.single_turn("Weather in Paris?", eval_id="paris", expected_tool_trajectory=[
            ToolCall(name="get_weather", args={"city": "Paris"})]),
        EvalCase.single_turn("Weather in Rome?", eval_id="rome", expected_tool_trajectory=[
            ToolCall(name="get_weather", args={"city": "Rome"})]),
    ]
    config = EvalConfig(criteria=CriteriaConfig(trajectory=CriterionConfig.trajectory(
        match_type=MatchType.EXACT, check_args=True)))
    notes: list[str] = []
    report = score_traces(traces, cases=cases, config=config, save=False, verbose=False,
                          on_note=notes.extend)

    paris, rome = report.cases
    assert paris.status == CaseStatus.PASSED
    assert rome.status == CaseStatus.MODEL_ERROR
    assert rome.error == f"no recorded run with id 'rome' in {traces}"
    assert notes == [f"{traces}:2: recorded run 'stray' matches no case id; not scored"]


def test_a_record_can_carry_its_own_expectations(tmp_path):
    traces = tmp_path / "recorded_cases.json"
    traces.write_text(json.dumps([{
        "eval_id": "multi", "messages": WEATHER_RUN,
        "conversation": [
            {"user_content": "Weather in Paris?", "expected_tool_trajectory": [
                {"name": "get_weather", "args": {"city": "Paris"}}]},
            {"user_content": "And tomorrow?"}],
    }]), encoding="utf-8")
    config = EvalConfig(criteria=CriteriaConfig(trajectory=CriterionConfig.trajectory(
        match_type=MatchType.EXACT, check_args=True)))
    (case,) = score_traces(traces, config=config, save=False, verbose=False).cases
    assert case.status == CaseStatus.PASSED
    assert case.eval_id == "multi"
    assert len(case.execution.turns) == 2


def test_duplicate_ids_and_unreadable_files_are_one_line_errors(tmp_path):
    traces = _write_jsonl(tmp_path / "dup.jsonl", [
        {"id": "x", "messages": WEATHER_RUN}, {"id": "x", "messages": WEATHER_RUN}])
    with pytest.raises(InputError, match=r"dup.jsonl:2: a second recorded run with id 'x' "
                                         r"\(the first is at .*dup.jsonl:1\)"):
        score_traces(traces, cases=[EvalCase(input="q", eval_id="x")], save=False,
                     verbose=False)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"messages": []}\n{"messages": [}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"broken.jsonl:2: not valid JSON"):
        read_traces(broken)
    other = tmp_path / "other.json"
    other.write_text('{"rows": []}', encoding="utf-8")
    with pytest.raises(InputError, match="neither OpenAI-style message lists nor OTLP/JSON"):
        read_traces(other)


def test_a_registered_trace_reader_reads_its_own_format(tmp_path):
    from referee.adapters import RecordedRun, register_trace_reader
    from referee.adapters._base import TRACE_READERS
    from referee.execution import ExecutionResult

    class CsvLikeReader:
        name = "answers"

        def sniff(self, records):
            return isinstance(records[0], dict) and "answer" in records[0]

        def read(self, records, source):
            return [RecordedRun(str(value["id"]), ExecutionResult(actual_response=value["answer"]),
                                f"{source}:{line}", user_turns=[value["question"]])
                    for line, value in records]

    with pytest.raises(TypeError, match="is not a TraceReader"):
        register_trace_reader(object())
    reader = register_trace_reader(CsvLikeReader())
    try:
        traces = _write_jsonl(tmp_path / "answers.jsonl", [
            {"id": 1, "question": "2+2?", "answer": "4"}, {"id": 2, "question": "3+3?",
                                                           "answer": "6"}])
        runs = read_traces(traces)
        assert [(r.run_id, r.where, r.execution.actual_response) for r in runs] == [
            ("1", f"{traces}:1", "4"), ("2", f"{traces}:2", "6")]
        report = score_traces(runs, criteria=[ContainsKeywordsCriterion(
            config=CriterionConfig(threshold=1.0, keywords=["4"]))], save=False, verbose=False)
        assert [c.status for c in report.cases] == [CaseStatus.PASSED, CaseStatus.FAILED]
        assert report.cases[0].case.input == "2+2?"
    finally:
        TRACE_READERS.remove(reader)


def test_a_record_with_no_messages_is_an_error_not_a_pass(tmp_path):
    # Scored as it was, an empty recording passed every check that expects no tool calls.
    traces = _write_jsonl(tmp_path / "runs.jsonl", [
        {"id": "good", "messages": WEATHER_RUN[4:5]}, {"id": "empty", "messages": []},
        {"id": "system-only", "messages": WEATHER_RUN[:1]}])
    good, empty, system_only = score_traces(traces, save=False, verbose=False).cases
    assert good.status == CaseStatus.PASSED
    for case, line in ((empty, 2), (system_only, 3)):
        assert case.status == CaseStatus.MODEL_ERROR
        assert case.error == (f"{traces}:{line}: field 'messages': no user, assistant or tool "
                              f"message (expected a recorded conversation)")
    bare = tmp_path / "bare.json"
    bare.write_text("[]", encoding="utf-8")
    (only,) = score_traces(bare, save=False, verbose=False).cases
    assert only.status == CaseStatus.MODEL_ERROR


def test_a_trace_file_with_a_byte_order_mark_reads_as_case_files_do(tmp_path):
    traces = tmp_path / "runs.jsonl"
    traces.write_bytes(b"\xef\xbb\xbf" + "".join(
        json.dumps({"id": i, "messages": WEATHER_RUN[:5]}) + "\n" for i in "ab").encode())
    assert [run.run_id for run in read_traces(traces)] == ["a", "b"]


def test_numbers_and_nesting_python_cannot_hold_name_the_line(tmp_path):
    long = tmp_path / "long.jsonl"
    long.write_text(json.dumps({"id": "a", "messages": WEATHER_RUN}) + "\n"
                    + '{"id": "b", "n": ' + "9" * 5000 + ', "messages": []}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"long.jsonl:2: a number longer than 4300 digits"):
        read_traces(long)
    whole = tmp_path / "long.json"
    whole.write_text('[{"id": "a",\n "n": ' + "9" * 5000 + "}]", encoding="utf-8")
    with pytest.raises(InputError, match=r"long.json:2: a number longer than 4300 digits"):
        read_traces(whole)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(InputError, match=r"deep.json: nested too deeply to read"):
        read_traces(deep)


def test_a_lone_surrogate_in_a_record_without_an_id_is_scored(tmp_path):
    # The case's content-derived id hashed UTF-8 and failed on the surrogate with a codec error.
    traces = _write_jsonl(tmp_path / "runs.jsonl", [
        {"messages": [{"role": "user", "content": "cut \ud83d"},
                      {"role": "assistant", "content": "fine"}]}])
    (case,) = score_traces(traces, save=False, verbose=False).cases
    assert case.status == CaseStatus.PASSED
    assert case.eval_id.startswith("case-")
