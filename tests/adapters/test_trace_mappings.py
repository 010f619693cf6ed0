"""Trace formats map completely: turns, ids, results, redaction, usage, logs, and what a trace
cannot carry (skipped with its reason, never failed)."""

from __future__ import annotations

import json

from otlp_builders import (
    EXACT_TOOLS_AND_NODES,
    any_value,
    current_genai_trace,
    export,
    messages_json,
    span,
    write_export,
)

from referee.adapters import TRACE_NOTES_KEY, read_traces, score_traces
from referee.case import EvalCase, Invocation, ToolCall
from referee.config import CriteriaConfig, CriterionConfig, EvalConfig, MatchType
from referee.execution import UNRECORDED_KEY
from referee.report.model import CaseStatus


def test_two_top_level_agent_spans_in_one_trace_are_two_turns(tmp_path):
    trace = "e" * 32
    turns = []
    for n, (user, city) in enumerate((("Weather in Paris?", "Paris"), ("And Rome?", "Rome"))):
        base = n * 100
        agent, chat, tool = f"{n}a".ljust(16, "0"), f"{n}b".ljust(16, "0"), f"{n}c".ljust(16, "0")
        turns += [
            span(trace, agent, "invoke_agent weather", base, end=base + 50,
                 gen_ai__operation__name="invoke_agent", gen_ai__agent__name="weather",
                 gen_ai__conversation__id="conv-9",
                 gen_ai__input__messages=messages_json(
                     {"role": "user", "parts": [{"type": "text", "content": user}]}),
                 gen_ai__output__messages=messages_json({"role": "assistant", "parts": [
                     {"type": "text", "content": f"{city}: sun"}]})),
            span(trace, tool, "execute_tool get_weather", base + 5, parent=agent,
                 gen_ai__operation__name="execute_tool", gen_ai__tool__name="get_weather",
                 gen_ai__tool__call__id=f"c{n}", gen_ai__tool__call__arguments=json.dumps(
                     {"city": city}),
                 gen_ai__tool__call__result=json.dumps({"city": city, "sky": "sun"})),
            span(trace, chat, "chat m", base + 1, parent=agent, gen_ai__operation__name="chat",
                 gen_ai__usage__prompt_tokens=10, gen_ai__usage__completion_tokens=2),
        ]
    (run,) = read_traces(write_export(tmp_path / "two.json", *turns))

    assert run.user_turns == ["Weather in Paris?", "And Rome?"]
    execution = run.execution
    assert [t.response for t in execution.turns] == ["Paris: sun", "Rome: sun"]
    assert [t.node_visits for t in execution.turns] == [["weather"], ["weather"]]
    # A JSON-text result is read like the arguments; the deprecated token names still count.
    assert execution.tool_calls[0].result == {"city": "Paris", "sky": "sun"}
    assert (execution.token_usage.input_tokens, execution.token_usage.output_tokens) == (20, 4)


def test_agent_spans_sent_the_same_user_message_are_one_turn(tmp_path):
    # A handoff: triage and orders run one after the other, both on the user's one message.
    trace = "d" * 32
    question = {"role": "user", "parts": [{"type": "text", "content": "Where is order 1001?"}]}
    spans = []
    for n, (agent, reply) in enumerate((("triage", {"type": "tool_call", "id": "h1",
                                                      "name": "transfer_to_orders",
                                                      "arguments": {}}),
                                         ("orders", {"type": "text",
                                                     "content": "Order 1001 shipped."}))):
        agent_span, chat = f"{n}a".ljust(16, "0"), f"{n}b".ljust(16, "0")
        spans += [
            span(trace, agent_span, f"invoke_agent {agent}", n * 100, end=n * 100 + 50,
                 gen_ai__operation__name="invoke_agent", gen_ai__agent__name=agent,
                 gen_ai__conversation__id="conv-h"),
            span(trace, chat, "chat m", n * 100 + 1, parent=agent_span,
                 gen_ai__operation__name="chat",
                 gen_ai__input__messages=messages_json(question),
                 gen_ai__output__messages=messages_json({"role": "assistant",
                                                         "parts": [reply]})),
        ]
    (run,) = read_traces(write_export(tmp_path / "handoff.json", *spans))

    assert run.user_turns == ["Where is order 1001?"]
    assert run.execution.turns == []
    assert run.execution.actual_response == "Order 1001 shipped."
    assert run.execution.node_visits == ["triage", "orders"]


def test_agent_nodes_of_a_langgraph_run_are_steps_of_one_turn(tmp_path):
    # The prebuilt ReAct agent's "agent" node is an OpenInference AGENT span, once per tool
    # round; with the messages hidden (TraceConfig hide_inputs) only the graph says so.
    trace = "c" * 32
    graph = "1" * 16

    def node(span_id: str, name: str, start: int, kind: str = "CHAIN", **attrs):
        return span(trace, span_id, name, start, end=start + 9, parent=graph,
                    openinference__span__kind=kind, session__id="s-7",
                    metadata=json.dumps({"langgraph_node": name, "langgraph_step": start}),
                    **attrs)

    spans = [
        span(trace, graph, "LangGraph", 0, end=100, openinference__span__kind="CHAIN",
             session__id="s-7", input__value="__REDACTED__",
             output__value="Refunded 25.00 for order 1001."),
        node("2" * 16, "agent", 10, "AGENT"),
        node("3" * 16, "tools", 20),
        span(trace, "4" * 16, "lookup_order", 21, parent="3" * 16,
             openinference__span__kind="TOOL", tool__name="lookup_order",
             input__value=json.dumps({"order_id": "1001"}), output__value="25.00"),
        node("5" * 16, "agent", 30, "AGENT"),
    ]
    (run,) = read_traces(write_export(tmp_path / "graph.json", *spans))

    assert run.execution.turns == []
    assert run.execution.actual_response == "Refunded 25.00 for order 1001."
    assert run.execution.node_visits == ["agent", "tools", "agent"]
    assert [(c.name, c.args, c.result) for c in run.execution.tool_calls] == [
        ("lookup_order", {"order_id": "1001"}, "25.00")]


def test_openinference_tool_id_redaction_and_cached_tokens(tmp_path):
    trace = "f" * 32
    spans = [
        span(trace, "1" * 16, "agent", 0, end=50, openinference__span__kind="AGENT",
             agent__name="helper", session__id="s-1", input__value="__REDACTED__"),
        span(trace, "2" * 16, "llm", 1, parent="1" * 16, openinference__span__kind="LLM",
             llm__token_count__prompt=40, llm__token_count__completion=5,
             llm__token_count__prompt_details__cache_read=32,
             llm__output_messages__0__message__role="assistant",
             llm__output_messages__0__message__content="__REDACTED__"),
        span(trace, "3" * 16, "lookup", 2, parent="1" * 16, openinference__span__kind="TOOL",
             tool__name="lookup", tool__id="call-7", input__value='{"q": "x"}',
             output__value="__REDACTED__"),
    ]
    (run,) = read_traces(write_export(tmp_path / "oi.json", *spans))

    (call,) = run.execution.tool_calls
    assert (call.call_id, call.args, call.result) == ("call-7", {"q": "x"}, None)
    assert run.execution.actual_response == ""
    assert run.execution.token_usage.cached_input_tokens == 32
    notes = run.execution.metadata[TRACE_NOTES_KEY]
    assert any("result of 'lookup' was redacted" in n for n in notes)
    assert set(run.execution.metadata[UNRECORDED_KEY]) == {"actual_response", "tool_results"}


def test_a_format_without_nodes_skips_node_order_with_the_reason(tmp_path):
    messages = [{"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "c1", "type": "function",
                     "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
                {"role": "tool", "tool_call_id": "c1", "content": '{"sky": "sun"}'},
                {"role": "assistant", "content": "Sunny."}]
    traces = tmp_path / "runs.json"
    traces.write_text(json.dumps([{"eval_id": "paris", "messages": messages}]), encoding="utf-8")
    case = EvalCase.multi_turn([Invocation(
        user_content="Weather in Paris?", expected_node_order=["weather"],
        expected_tool_trajectory=[ToolCall(name="get_weather", args={"city": "Paris"})])],
        eval_id="paris")

    report = score_traces(traces, cases=[case], config=EXACT_TOOLS_AND_NODES, save=False,
                          verbose=False)

    (result,) = report.cases
    assert result.status == CaseStatus.PASSED, result.criterion_results
    by_name = {r.criterion: r for r in result.criterion_results}
    assert by_name["tool_trajectory_avg_score"].passed
    assert by_name["node_order_score"].skipped
    assert "names its agent" in by_name["node_order_score"].details["reason"]
    assert result.execution.tool_calls[0].result == {"sky": "sun"}


def test_named_assistant_messages_are_node_visits_and_each_user_message_a_turn():
    from referee.adapters import execution_from_messages

    execution = execution_from_messages([
        {"role": "user", "content": "Refund order 5?"},
        {"role": "assistant", "name": "triage", "content": "Passing you to refunds."},
        {"role": "assistant", "name": "refunds", "content": "", "tool_calls": [
            {"id": "r1", "type": "function",
             "function": {"name": "refund", "arguments": '{"order": 5}'}}]},
        {"role": "tool", "tool_call_id": "r1", "content": "done"},
        {"role": "assistant", "name": "refunds", "content": "Refunded."},
        {"role": "user", "content": "Thanks"},
        {"role": "assistant", "name": "triage", "content": "Bye."},
    ])

    assert [t.user_content for t in execution.turns] == ["Refund order 5?", "Thanks"]
    assert [t.node_visits for t in execution.turns] == [["triage", "refunds"], ["triage"]]
    assert UNRECORDED_KEY not in execution.metadata


def test_genai_events_in_a_logs_file_or_the_same_file_give_the_content(tmp_path):
    trace, chat = "9" * 32, "1" * 16
    spans = export(span(trace, chat, "chat gpt", 0, gen_ai__operation__name="chat",
                        gen_ai__system="openai", gen_ai__conversation__id="c-3",
                        gen_ai__usage__input_tokens=5, gen_ai__usage__output_tokens=1))

    def event(name: str, body: dict) -> dict:
        return {"timeUnixNano": "1", "traceId": trace, "spanId": trace[:8] + chat[:8],
                "body": any_value(body),
                "attributes": [{"key": "event.name", "value": {"stringValue": name}}]}

    logs = {"resourceLogs": [{"scopeLogs": [{"logRecords": [
        event("gen_ai.user.message", {"content": "Weather?"}),
        event("gen_ai.choice", {"index": 0, "finish_reason": "tool_calls", "message": {
            "tool_calls": [{"id": "t1", "type": "function", "function": {
                "name": "get_weather", "arguments": '{"city": "Oslo"}'}}]}}),
    ]}]}]}
    (tmp_path / "spans.json").write_text(json.dumps(spans), encoding="utf-8")
    (tmp_path / "logs.json").write_text(json.dumps(logs), encoding="utf-8")
    (tmp_path / "both.jsonl").write_text(json.dumps(spans) + "\n" + json.dumps(logs) + "\n",
                                         encoding="utf-8")

    (alone,) = read_traces(tmp_path / "spans.json")
    (with_logs,) = read_traces(tmp_path / "spans.json", logs=tmp_path / "logs.json")
    (both,) = read_traces(tmp_path / "both.jsonl")

    assert any("record no message content" in n
               for n in alone.execution.metadata[TRACE_NOTES_KEY])
    assert set(alone.execution.metadata[UNRECORDED_KEY]) == {"actual_response", "tool_calls",
                                                             "node_visits"}
    for run in (with_logs, both):
        assert run.user_turns == ["Weather?"]
        assert [(c.name, c.args, c.call_id) for c in run.execution.tool_calls] == [
            ("get_weather", {"city": "Oslo"}, "t1")]
        assert TRACE_NOTES_KEY not in run.execution.metadata


def test_a_handoff_span_is_no_tool_call_and_a_workflow_span_no_node(tmp_path):
    trace = "7" * 32
    spans = [
        span(trace, "1" * 16, "Agent workflow", 0, end=90, openinference__span__kind="AGENT",
             session__id="s-7"),
        span(trace, "2" * 16, "triage", 1, end=20, parent="1" * 16,
             openinference__span__kind="AGENT", agent__name="triage"),
        span(trace, "3" * 16, "handoff to billing", 5, parent="2" * 16,
             openinference__span__kind="TOOL", input__value="triage", output__value="billing"),
        span(trace, "4" * 16, "billing", 21, end=80, parent="1" * 16,
             openinference__span__kind="AGENT", agent__name="billing"),
        span(trace, "5" * 16, "mystery", 30, parent="4" * 16, openinference__span__kind="TOOL"),
    ]
    (run,) = read_traces(write_export(tmp_path / "handoff.json", *spans))

    assert run.execution.tool_calls == []
    assert run.execution.node_visits == ["triage", "billing"]
    # A nameless TOOL span that is no handoff is said, not silently dropped.
    (note,) = run.execution.metadata[TRACE_NOTES_KEY]
    assert "'mystery'" in note and "without tool.name" in note
    assert current_genai_trace  # the shared builders stay importable from here


def test_unknown_arguments_skip_an_argument_check_and_keep_the_name_check(tmp_path):
    trace = current_genai_trace("c" * 32, conversation="weather-1", with_arguments=False)
    trace[1]["attributes"] = [a for a in trace[1]["attributes"]  # no model call to borrow from
                              if a["key"] != "gen_ai.output.messages"]
    traces = write_export(tmp_path / "optin.json", *trace)
    case = EvalCase.single_turn("Weather in Paris?", eval_id="weather-1",
                                expected_tool_trajectory=[ToolCall(name="get_weather",
                                                                   args={"city": "Paris"})])

    def scored(check_args: bool) -> dict:
        config = EvalConfig(criteria=CriteriaConfig(trajectory=CriterionConfig.trajectory(
            match_type=MatchType.EXACT, check_args=check_args)))
        (result,) = score_traces(traces, cases=[case], config=config, save=False,
                                 verbose=False).cases
        (trajectory,) = result.criterion_results
        return {"status": result.status, "skipped": trajectory.skipped,
                "passed": trajectory.passed, "reason": trajectory.details["reason"]}

    with_args, names_only = scored(True), scored(False)
    assert (with_args["status"], with_args["skipped"]) == (CaseStatus.SKIPPED, True)
    assert "tool arguments are not recorded" in with_args["reason"]
    assert (names_only["status"], names_only["passed"]) == (CaseStatus.PASSED, True)


def v1_36_trace_without_arguments(path):
    """A v1.36-style run with content capture off (the default): the execute_tool span has no
    arguments attribute (that version had none), and the model's gen_ai.choice event names the
    call (id, name) without its arguments."""
    trace, agent, chat, tool = "5" * 32, "1" * 16, "2" * 16, "3" * 16
    spans = export(
        span(trace, agent, "invoke_agent weather", 0, end=50,
             gen_ai__operation__name="invoke_agent", gen_ai__agent__name="weather",
             gen_ai__conversation__id="weather-1"),
        span(trace, chat, "chat gpt", 1, end=5, parent=agent, gen_ai__operation__name="chat",
             gen_ai__system="openai"),
        span(trace, tool, "execute_tool get_weather", 6, end=9, parent=agent,
             gen_ai__operation__name="execute_tool", gen_ai__tool__name="get_weather",
             gen_ai__tool__call__id="t1"))
    logs = {"resourceLogs": [{"scopeLogs": [{"logRecords": [
        {"traceId": trace, "spanId": trace[:8] + chat[:8], "eventName": "gen_ai.choice",
         "body": any_value({"index": 0, "finish_reason": "tool_calls", "message": {
             "role": "assistant", "tool_calls": [{"id": "t1", "type": "function",
                                                  "function": {"name": "get_weather"}}]}})},
    ]}]}]}
    path.write_text(json.dumps(spans) + "\n" + json.dumps(logs) + "\n", encoding="utf-8")
    return path


def test_tool_arguments_no_span_or_model_call_records_read_as_not_recorded(tmp_path):
    (run,) = read_traces(v1_36_trace_without_arguments(tmp_path / "v136.jsonl"))

    (call,) = run.execution.tool_calls
    assert (call.name, call.call_id, call.args) == ("get_weather", "t1", None)
    assert run.execution.model_dump(mode="json")["tool_calls"][0]["args"] is None
    assert any("arguments of 'get_weather' are not recorded" in note
               for note in run.execution.metadata[TRACE_NOTES_KEY])
    assert "tool_args" in run.execution.metadata[UNRECORDED_KEY]


def test_unrecorded_arguments_pass_an_expectation_of_any_arguments(tmp_path):
    traces = v1_36_trace_without_arguments(tmp_path / "v136.jsonl")
    config = EvalConfig(criteria=CriteriaConfig(trajectory=CriterionConfig.trajectory(
        match_type=MatchType.EXACT, check_args=True)))

    def scored(args: dict):
        case = EvalCase.single_turn("Weather?", eval_id="weather-1", expected_tool_trajectory=[
            ToolCall(name="get_weather", args=args)])
        (result,) = score_traces(traces, cases=[case], config=config, save=False,
                                 verbose=False).cases
        return result.status, result.criterion_results[0]

    status, any_args = scored({})
    assert (status, any_args.passed, any_args.skipped) == (CaseStatus.PASSED, True, False)
    status, paris = scored({"city": "Paris"})
    assert (status, paris.skipped) == (CaseStatus.SKIPPED, True)
    assert "some tool arguments are not recorded" in paris.details["reason"]


def test_tool_arguments_on_the_models_choice_event_content_are_read(tmp_path):
    # Azure AI Inference's tracing (v1.36-era conventions): each event's body is JSON text in
    # the span event's gen_ai.event.content; the execute_tool span has no arguments.
    trace, agent, chat = "4" * 32, "1" * 16, "2" * 16
    call = {"id": "t9", "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": "Oslo"})}}
    spans = [
        span(trace, agent, "invoke_agent weather", 0, end=50,
             gen_ai__operation__name="invoke_agent", gen_ai__agent__name="weather"),
        span(trace, chat, "chat gpt", 1, end=5, parent=agent, gen_ai__operation__name="chat",
             events=[("gen_ai.user.message", {"gen_ai.event.content": json.dumps(
                         {"role": "user", "content": "Weather in Oslo?"})}),
                     ("gen_ai.choice", {"gen_ai.event.content": json.dumps(
                         {"message": {"tool_calls": [call]}, "finish_reason": "tool_calls",
                          "index": 0})})]),
        span(trace, "3" * 16, "execute_tool get_weather", 6, end=9, parent=agent,
             gen_ai__operation__name="execute_tool", gen_ai__tool__name="get_weather",
             gen_ai__tool__call__id="t9", gen_ai__tool__call__result="sunny"),
    ]
    (run,) = read_traces(write_export(tmp_path / "azure.json", *spans))

    assert run.user_turns == ["Weather in Oslo?"]
    assert [(c.name, c.args, c.result) for c in run.execution.tool_calls] == [
        ("get_weather", {"city": "Oslo"}, "sunny")]
    assert TRACE_NOTES_KEY not in run.execution.metadata


def test_tool_spans_without_ids_take_the_model_call_with_their_arguments(tmp_path):
    trace = "6" * 32
    calls = [{"tool_call": {"id": f"c{n}", "function": {
        "name": "lookup", "arguments": json.dumps({"order": n})}}} for n in (1, 2)]
    llm_attrs = {"openinference__span__kind": "LLM",
                 "llm__output_messages__0__message__role": "assistant"}
    for n, call in enumerate(calls):
        prefix = f"llm__output_messages__0__message__tool_calls__{n}__tool_call__"
        llm_attrs[prefix + "id"] = call["tool_call"]["id"]
        llm_attrs[prefix + "function__name"] = "lookup"
        llm_attrs[prefix + "function__arguments"] = call["tool_call"]["function"]["arguments"]
    spans = [
        span(trace, "1" * 16, "agent", 0, end=50, openinference__span__kind="AGENT",
             agent__name="desk"),
        span(trace, "2" * 16, "response", 1, parent="1" * 16, **llm_attrs),
        # The tools ran in the other order than the model listed them.
        span(trace, "3" * 16, "lookup", 2, parent="1" * 16, openinference__span__kind="TOOL",
             tool__name="lookup", input__value='{"order": 2}', output__value="two"),
        span(trace, "4" * 16, "lookup", 3, parent="1" * 16, openinference__span__kind="TOOL",
             tool__name="lookup", input__value='{"order": 1}', output__value="one"),
    ]
    (run,) = read_traces(write_export(tmp_path / "ids.json", *spans))

    assert [(c.args, c.call_id, c.result) for c in run.execution.tool_calls] == [
        ({"order": 2}, "c2", "two"), ({"order": 1}, "c1", "one")]


def test_an_agent_inside_a_tool_span_is_that_calls_inner_run(tmp_path):
    """GenAI conventions: an ``execute_tool`` span whose tool runs an agent (an agent used as a
    tool) holds that agent's ``invoke_agent`` span and its tool spans, to any depth."""
    trace = "f" * 32

    def tool(span_id: str, name: str, start: int, end: int, parent: str, call_id: str,
             arguments: dict, result: str) -> dict:
        return span(trace, span_id, f"execute_tool {name}", start, end=end, parent=parent,
                    gen_ai__operation__name="execute_tool", gen_ai__tool__name=name,
                    gen_ai__tool__call__id=call_id,
                    gen_ai__tool__call__arguments=json.dumps(arguments),
                    gen_ai__tool__call__result=result)

    def agent(span_id: str, name: str, start: int, end: int, parent: str = "") -> dict:
        return span(trace, span_id, f"invoke_agent {name}", start, end=end, parent=parent,
                    gen_ai__operation__name="invoke_agent", gen_ai__agent__name=name)

    spans = [
        agent("a1", "orchestrator", 0, 100),
        tool("t1", "ask_researcher", 10, 60, "a1", "c1", {"input": "42?"}, "it is 42"),
        agent("a2", "researcher", 11, 59, parent="t1"),
        tool("t2", "search", 12, 20, "a2", "c2", {"q": "42"}, json.dumps({"hits": 1})),
        tool("t3", "ask_checker", 21, 50, "a2", "c3", {"input": "42"}, "checked"),
        agent("a3", "checker", 22, 49, parent="t3"),
        tool("t4", "verify", 23, 30, "a3", "c4", {"claim": "42"}, "verified"),
        tool("t5", "write", 70, 80, "a1", "c5", {"text": "42"}, "written"),
    ]
    (run,) = read_traces(write_export(tmp_path / "nested.json", *spans))

    execution = run.execution
    assert execution.node_visits == ["orchestrator"]
    assert [c.name for c in execution.tool_calls] == ["ask_researcher", "write"]
    research = execution.tool_calls[0]
    assert (research.nested_node_visits, [c.name for c in research.nested_calls]) == (
        ["researcher"], ["search", "ask_checker"])
    search, checker = research.nested_calls
    assert (search.args, search.result, search.call_id) == ({"q": "42"}, {"hits": 1}, "c2")
    assert checker.nested_node_visits == ["checker"]
    assert [(c.name, c.args, c.result, c.call_id) for c in checker.nested_calls] == [
        ("verify", {"claim": "42"}, "verified", "c4")]
