"""Recorded OTLP/JSON spans: GenAI conventions (current and pre-1.37) and OpenInference."""

from __future__ import annotations

import json

from otlp_builders import EXACT_TOOLS_AND_NODES, current_genai_trace, span, write_export

from referee.adapters import TRACE_NOTES_KEY, read_traces, score_traces
from referee.report.model import CaseStatus


def test_current_genai_spans_give_tools_nodes_usage_and_turns(tmp_path):
    traces = write_export(tmp_path / "otel.json",
                          *current_genai_trace("a" * 32, user="Weather in Paris?", city="Paris"),
                          *current_genai_trace("b" * 32, user="And in Rome?", city="Rome"))
    (run,) = read_traces(traces)  # one gen_ai.conversation.id: one run of two turns

    execution = run.execution
    assert run.run_id == "conv-1"
    assert run.user_turns == ["Weather in Paris?", "And in Rome?"]
    assert [(c.name, c.args, c.result) for c in execution.tool_calls] == [
        ("get_weather", {"city": "Paris"}, "sunny in Paris"),
        ("get_weather", {"city": "Rome"}, "sunny in Rome")]
    assert execution.node_visits == ["weather_agent", "weather_agent"]
    assert [t.response for t in execution.turns] == ["It is sunny in Paris.",
                                                     "It is sunny in Rome."]
    # Usage is the model calls' (two per turn), not added again from the agent span.
    usage = execution.token_usage
    assert (usage.input_tokens, usage.output_tokens, usage.requests) == (100, 24, 4)
    assert TRACE_NOTES_KEY not in execution.metadata


def test_missing_opt_in_attributes_come_from_the_models_call_or_are_noted(tmp_path):
    trace = current_genai_trace("c" * 32, with_arguments=False)
    # Drop the model's own record of the call too: nothing says what the arguments were.
    no_model_call = current_genai_trace("d" * 32, conversation="conv-2", with_arguments=False)
    no_model_call[1]["attributes"] = [a for a in no_model_call[1]["attributes"]
                                      if a["key"] != "gen_ai.output.messages"]
    traces = write_export(tmp_path / "optin.json", *trace, *no_model_call)
    from_model, unknown = read_traces(traces)

    assert from_model.execution.tool_calls[0].args == {"city": "Paris"}  # the model's call
    assert unknown.execution.tool_calls[0].args is None  # not recorded, not "no arguments"
    notes = unknown.execution.metadata[TRACE_NOTES_KEY]
    assert any("gen_ai.tool.call.arguments not recorded (an opt-in attribute)" in n
               and "'execute_tool get_weather'" in n and "optin.json" in n for n in notes)
    assert any("gen_ai.tool.call.result not recorded" in n for n in notes)


def test_pre_1_37_genai_spans_read_too(tmp_path):
    """gen_ai.system, flattened gen_ai.prompt/completion, prompt/completion token names and an
    execute_tool span with no arguments (that version had none)."""
    t = "e" * 32
    traces = write_export(
        tmp_path / "old.json",
        span(t, "11", "invoke_agent planner", 0, end=50, gen_ai__operation__name="invoke_agent",
             gen_ai__agent__name="planner", gen_ai__system="openai"),
        span(t, "12", "chat gpt-4o", 1, end=5, parent="11", gen_ai__operation__name="chat",
             gen_ai__system="openai", gen_ai__usage__prompt_tokens=11,
             gen_ai__usage__completion_tokens=2,
             **{"gen_ai__prompt__0__role": "user", "gen_ai__prompt__0__content": "Book Lisbon",
                "gen_ai__completion__0__role": "assistant",
                "gen_ai__completion__0__tool_calls__0__id": "old-1",
                "gen_ai__completion__0__tool_calls__0__name": "book",
                "gen_ai__completion__0__tool_calls__0__arguments": '{"city": "Lisbon"}'}),
        span(t, "13", "execute_tool book", 6, end=8, parent="11",
             gen_ai__operation__name="execute_tool", gen_ai__tool__name="book",
             gen_ai__tool__call__id="old-1"),
        span(t, "14", "chat gpt-4o", 9, end=12, parent="11", gen_ai__operation__name="chat",
             gen_ai__usage__prompt_tokens=15, gen_ai__usage__completion_tokens=4,
             **{"gen_ai__prompt__0__role": "user", "gen_ai__prompt__0__content": "Book Lisbon",
                "gen_ai__prompt__1__role": "tool", "gen_ai__prompt__1__tool_call_id": "old-1",
                "gen_ai__prompt__1__content": "booked #42",
                "gen_ai__completion__0__role": "assistant",
                "gen_ai__completion__0__content": "Booked: #42."}))
    (run,) = read_traces(traces)
    execution = run.execution
    assert run.run_id == t  # no conversation id: the trace id
    assert run.user_turns == ["Book Lisbon"]
    assert [(c.name, c.args, c.result) for c in execution.tool_calls] == [
        ("book", {"city": "Lisbon"}, "booked #42")]
    assert execution.node_visits == ["planner"]
    assert execution.actual_response == "Booked: #42."
    assert (execution.token_usage.input_tokens, execution.token_usage.output_tokens) == (26, 6)
    assert TRACE_NOTES_KEY not in execution.metadata


def test_openinference_spans_read(tmp_path):
    t = "f" * 32
    traces = write_export(
        tmp_path / "phoenix.json",
        span(t, "21", "support_agent", 0, end=40, openinference__span__kind="AGENT",
             session__id="session-9", input__value="Refund order 7",
             output__value="Refund issued for order 7."),
        span(t, "22", "ChatCompletion", 1, end=5, parent="21", openinference__span__kind="LLM",
             llm__token_count__prompt=40, llm__token_count__completion=9,
             **{"llm__input_messages__0__message__role": "user",
                "llm__input_messages__0__message__content": "Refund order 7",
                "llm__output_messages__0__message__role": "assistant",
                "llm__output_messages__0__message__tool_calls__0__tool_call__id": "oi-1",
                "llm__output_messages__0__message__tool_calls__0__tool_call__function__name":
                    "refund",
                "llm__output_messages__0__message__tool_calls__0__tool_call__function__arguments":
                    '{"order": 7}'}),
        span(t, "23", "refund", 6, end=9, parent="21", openinference__span__kind="TOOL",
             tool__name="refund", input__value='{"order": 7}', output__value="ok",
             input__mime_type="application/json"),
        span(t, "24", "ChatCompletion", 10, end=14, parent="21",
             openinference__span__kind="LLM", llm__token_count__prompt=55,
             llm__token_count__completion=8,
             **{"llm__output_messages__0__message__role": "assistant",
                "llm__output_messages__0__message__content": "Refund issued for order 7."}))
    (run,) = read_traces(traces)
    execution = run.execution
    assert run.run_id == "session-9"
    assert [(c.name, c.args, c.result) for c in execution.tool_calls] == [
        ("refund", {"order": 7}, "ok")]
    assert execution.node_visits == ["support_agent"]
    assert execution.actual_response == "Refund issued for order 7."
    assert (execution.token_usage.input_tokens, execution.token_usage.requests) == (95, 2)


def test_a_broken_span_fails_its_own_run_in_one_line(tmp_path):
    good = current_genai_trace("a" * 32, conversation="fine")
    nameless = current_genai_trace("9" * 32, conversation="nameless")
    nameless[2]["attributes"] = [a for a in nameless[2]["attributes"]
                                 if a["key"] != "gen_ai.tool.name"]
    nameless[2]["name"] = "execute_tool"
    bad_count = current_genai_trace("8" * 32, conversation="bad-count")
    bad_count[3]["attributes"].append({"key": "gen_ai.usage.input_tokens",
                                       "value": {"intValue": "many"}})
    traces = write_export(tmp_path / "mixed.json", *good, *nameless, *bad_count)

    report = score_traces(traces, config=EXACT_TOOLS_AND_NODES, save=False, verbose=False)
    by_id = {c.eval_id: c for c in report.cases}
    assert by_id["fine"].status == CaseStatus.FAILED  # scored: no expectations, visits made
    assert by_id["nameless"].status == by_id["bad-count"].status == CaseStatus.MODEL_ERROR
    assert by_id["nameless"].error == (
        f"{traces}: resourceSpans[0].scopeSpans[0].spans[6] (span 99999999" "33333333 "
        f"'execute_tool'): field 'attributes.gen_ai.tool.name': missing (expected the tool's "
        f"name (gen_ai.tool.name or tool.name))")
    assert by_id["bad-count"].error == (
        f"{traces}: resourceSpans[0].scopeSpans[0].spans[11] (span 88888888" "44444444 "
        f"'chat gpt-4o'): field 'attributes.gen_ai.usage.input_tokens.intValue': got 'many' "
        f"(expected an integer)")


def test_an_openinference_tool_input_that_is_not_json_is_noted(tmp_path):
    t = "7" * 32
    traces = write_export(
        tmp_path / "text_tool.json",
        span(t, "31", "search", 0, end=3, openinference__span__kind="TOOL", tool__name="search",
             input__value="cheap flights to Lisbon", output__value="3 results"))
    (run,) = read_traces(traces)
    (call,) = run.execution.tool_calls
    assert (call.name, call.args, call.result) == ("search", None, "3 results")  # unknown
    assert "input.value is not a JSON object" in run.execution.metadata[TRACE_NOTES_KEY][0]


def test_model_only_spans_with_content_events_give_the_trajectory(tmp_path):
    """Only the model was instrumented (no execute_tool spans), with the early GenAI convention
    of prompt/completion JSON in span events: the model's tool calls are the trajectory."""
    t = "6" * 32
    call = {"id": "ev-1", "type": "function",
            "function": {"name": "convert", "arguments": '{"amount": 5, "to": "EUR"}'}}
    traces = write_export(
        tmp_path / "events.json",
        span(t, "41", "chat gpt-4", 0, end=4, gen_ai__system="openai",
             gen_ai__operation__name="chat",
             events=[("gen_ai.content.prompt", {"gen_ai.prompt": json.dumps(
                         [{"role": "user", "content": "5 USD in EUR?"}])}),
                     ("gen_ai.content.completion", {"gen_ai.completion": json.dumps(
                         [{"role": "assistant", "content": None, "tool_calls": [call]}])})]),
        span(t, "42", "chat gpt-4", 5, end=9, gen_ai__operation__name="chat",
             events=[("gen_ai.content.prompt", {"gen_ai.prompt": json.dumps(
                         [{"role": "user", "content": "5 USD in EUR?"},
                          {"role": "assistant", "tool_calls": [call]},
                          {"role": "tool", "tool_call_id": "ev-1", "content": "4.61"}])}),
                     ("gen_ai.content.completion", {"gen_ai.completion": json.dumps(
                         [{"role": "assistant", "content": "That is 4.61 EUR."}])})]))
    (run,) = read_traces(traces)
    assert run.user_turns == ["5 USD in EUR?"]
    assert [(c.name, c.args, c.result, c.call_id) for c in run.execution.tool_calls] == [
        ("convert", {"amount": 5, "to": "EUR"}, "4.61", "ev-1")]
    assert run.execution.actual_response == "That is 4.61 EUR."
    assert run.execution.node_visits == []
