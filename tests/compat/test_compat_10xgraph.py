"""The 10xgraph (``tenxgraph.qa.evaluation``) names and signatures referee accepts, each over
referee's one model. Written from 10xgraph's public docs and signatures; no test code copied."""

from __future__ import annotations

import json
import time

import pytest

from referee import (
    AgentEvaluator,
    CriterionConfig,
    CriterionResult,
    EvalCase,
    EvalCaseResult,
    EvalConfig,
    EvalReport,
    EvalSet,
    EvalSummary,
    ExecutionResult,
    Invocation,
    MatchType,
    MessageContent,
    SessionInput,
    StepType,
    TokenUsage,
    ToolCall,
    TrajectoryStep,
    UserSimulator,
)
from referee.config import CriteriaConfig
from referee.report.model import CaseResult, CaseStatus


def test_single_turn_with_10xgraph_keywords_builds_the_one_turn():
    case = EvalCase.single_turn(
        eval_id="weather-1", user_query="Weather in Oslo?", expected_response="Rainy.",
        expected_tools=[ToolCall(name="get_weather", args={"city": "Oslo"})],
        expected_node_order=["router", "weather"], name="oslo", description="asks the weather")
    assert (case.eval_id, case.name, case.description) == ("weather-1", "oslo", "asks the weather")
    assert case.input == "Weather in Oslo?" and case.expected_output == "Rainy."
    turn = case.conversation[0]
    assert turn.user_content.get_text() == "Weather in Oslo?"
    assert turn.expected_final_response.get_text() == "Rainy."
    assert turn.expected_tool_trajectory == [ToolCall(name="get_weather", args={"city": "Oslo"})]
    assert case.expected_node_order == ["router", "weather"]


def test_single_turn_positional_order_three_or_more_is_10xgraphs():
    case = EvalCase.single_turn("t1", "Hello", "Hi there!")
    assert (case.eval_id, case.input, case.expected_output) == ("t1", "Hello", "Hi there!")
    # One or two positional values keep referee's (input, expected_output) order.
    assert EvalCase.single_turn("Hello", "Hi").input == "Hello"
    with pytest.raises(TypeError, match="'user_query' twice"):
        EvalCase.single_turn("t1", "Hello", "Hi", user_query="again")


def test_single_turn_rejects_two_spellings_of_one_field():
    with pytest.raises(ValueError, match="'expected_response' and 'expected_output' name the same field"):
        EvalCase.single_turn(input="q", expected_output="a", expected_response="b")


def test_multi_turn_with_pairs_and_tools_on_the_first_turn():
    case = EvalCase.multi_turn("chat", [("Hello", "Hi!"), ("Weather?", "Sunny.")],
                               expected_tools=[ToolCall(name="get_weather")], name="chat")
    assert case.eval_id == "chat" and case.name == "chat"
    assert [t.user_text for t in case.conversation] == ["Hello", "Weather?"]
    assert [t.expected_final_response for t in case.conversation] == ["Hi!", "Sunny."]
    assert case.conversation[0].expected_tool_trajectory == [ToolCall(name="get_weather")]
    assert case.conversation[1].expected_tool_trajectory == []
    # referee's own form still works: a list first.
    assert len(EvalCase.multi_turn([Invocation.simple("a"), "b"], eval_id="x").conversation) == 2


def test_invocation_simple_and_message_content_as_user_content(tmp_path):
    turn = Invocation.simple("Track parcel 9", "In Oslo.", [ToolCall(name="track")], ["router"])
    assert turn.user_text == "Track parcel 9" and turn.expected_final_response == "In Oslo."
    assert turn.expected_node_order == ["router"]
    message = MessageContent(role="user", content=[{"type": "text", "text": "Hello"},
                                                   {"type": "text", "text": "there"}])
    assert message.get_text() == "Hello there"
    as_turn = Invocation(user_content=message, expected_final_response=MessageContent.assistant("Hi"))
    assert as_turn.user_text == "Hello there"
    assert as_turn.expected_final_response == "Hi"
    case = EvalCase(conversation=[as_turn])
    assert case.input == "Hello there"
    again = EvalCase.model_validate(json.loads(case.model_dump_json()))
    assert again.input == "Hello there" and isinstance(again.conversation[0].user_content,
                                                       MessageContent)
    # Saved without defaults (role "user" left out), the message still reads back as one.
    path = tmp_path / "cases.jsonl"
    EvalSet(eval_cases=[case]).save(path)
    loaded = EvalSet.load(path).eval_cases[0]
    assert loaded.conversation[0].user_content == message and loaded.input == "Hello there"


def test_tool_call_matches_follows_10xgraphs_rule():
    actual = ToolCall(name="search", args={"q": "x"}, call_id="c1")
    assert actual.matches(ToolCall(name="search"))  # no expected args: any args will do
    assert actual.matches(ToolCall(name="search", args={"q": "x"}))
    assert not actual.matches(ToolCall(name="search", args={"q": "y"}))
    assert actual.matches(ToolCall(name="search", args={"q": "y"}), check_args=False)
    assert not actual.matches(ToolCall(name="lookup"))
    assert not actual.matches(ToolCall(name="search", call_id="c2"), check_call_id=True)


def test_eval_set_add_get_filter_iterate_and_files(tmp_path):
    eval_set = EvalSet(eval_set_id="weather")
    eval_set.add_case(EvalCase.single_turn(eval_id="a", user_query="Oslo?", expected_response="Rain"))
    eval_set.add_case(EvalCase(input="Rome?", eval_id="b", tags=["sun", "eu"]))
    with pytest.raises(ValueError, match="already has a case with eval_id 'a'"):
        eval_set.add_case(EvalCase(input="again", eval_id="a"))
    assert [c.eval_id for c in eval_set] == ["a", "b"]
    assert eval_set.get_case("b").input == "Rome?" and eval_set.get_case("zz") is None
    assert [c.eval_id for c in eval_set.filter_by_tags(["sun", "eu"])] == ["b"]
    assert eval_set.filter_by_tags(["sun", "asia"]) == []
    path = tmp_path / "weather.json"
    eval_set.to_file(str(path))
    loaded = EvalSet.from_file(str(path))
    assert loaded.eval_set_id == "weather" and loaded.eval_cases == eval_set.eval_cases


def test_session_input_defaults_and_description_on_the_case():
    assert SessionInput().user_id == "test_user" and SessionInput().app_name == ""
    case = EvalCase(input="q", session_input={"app_name": "shop", "user_id": "u", "state": {"a": 1}},
                    description="why")
    assert case.session_input.state == {"a": 1} and case.description == "why"


def test_token_usage_fields_and_arithmetic():
    a = TokenUsage(input_tokens=100, output_tokens=40, cache_read_tokens=10, cache_creation_tokens=5)
    b = TokenUsage(input_tokens=200, output_tokens=60, cache_read_tokens=20)
    total = a + b
    assert (total.input_tokens, total.output_tokens, total.cache_read_tokens,
            total.cache_creation_tokens, total.total_tokens) == (300, 100, 30, 5, 400)
    assert sum([a, b]).total_tokens == 400
    assert a.__radd__(42) is NotImplemented
    assert a.to_dict() == {"input_tokens": 100, "output_tokens": 40, "cache_read_tokens": 10,
                           "cache_creation_tokens": 5, "total_tokens": 140}
    assert a.model_dump()["total_tokens"] == 140


def test_criterion_result_success_and_failure():
    ok = CriterionResult.success("trajectory", 0.9, 0.8, details={"n": 1})
    assert ok.passed and ok.threshold == 0.8 and ok.details == {"n": 1} and not ok.is_error
    low = CriterionResult.success("trajectory", 0.5, 0.8)
    assert not low.passed and low.error is None
    broken = CriterionResult.failure("trajectory", "no tools recorded")
    assert broken.is_error and not broken.passed and broken.error_kind == "evaluator"


def test_eval_case_result_builds_a_case_result():
    passed = EvalCaseResult.success("c1", [CriterionResult.success("x", 1.0, 0.5)],
                                    actual_response="done", actual_tool_calls=[ToolCall(name="t")],
                                    duration_seconds=2.0, name="first",
                                    token_usage=TokenUsage(input_tokens=10, output_tokens=5))
    assert isinstance(passed, CaseResult) and passed.status == CaseStatus.PASSED
    assert passed.actual_response == "done" and passed.actual_tool_calls == [ToolCall(name="t")]
    failed = EvalCaseResult.success("c2", [CriterionResult.success("x", 0.1, 0.5)])
    assert failed.status == CaseStatus.FAILED and failed.failed_criteria[0].criterion == "x"
    errored = EvalCaseResult.failure("c3", "agent crashed")
    assert errored.is_error and not errored.passed and errored.error == "agent crashed"
    direct = EvalCaseResult(eval_id="c4", passed=False, error="boom", messages=[{"role": "user"}])
    assert direct.status == CaseStatus.EVALUATOR_ERROR and direct.metadata["messages"]

    summary = EvalSummary.from_results([passed, failed, errored])
    assert (summary.total_cases, summary.passed_cases, summary.failed_cases,
            summary.error_cases) == (3, 1, 1, 1)
    assert summary.per_case_token_usage["c1"].total_tokens == 15
    assert summary.avg_tokens_per_case == 5.0
    report = EvalReport.create("set-1", [passed, failed], eval_set_name="Set")
    assert report.eval_set_id == "set-1" and report.eval_set_name == "Set"
    assert report.summary.total_cases == 2 and len(report.results) == 2


def test_trajectory_steps_give_tool_calls_and_node_visits():
    run = ExecutionResult(actual_response="ok", duration_seconds=1.5, trajectory=[
        TrajectoryStep.node("router"), TrajectoryStep.tool("search", {"q": "x"}, tool_call_id="c1"),
        TrajectoryStep(step_type=StepType.MESSAGE, name="assistant"), TrajectoryStep.node("answer")])
    assert run.node_visits == ["router", "answer"]
    assert run.tool_calls == [ToolCall(name="search", args={"q": "x"}, call_id="c1")]
    assert run.get_tool_names() == ["search"] and run.latency_s == 1.5
    assert run.duration_seconds == 1.5 and len(run.metadata["trajectory"]) == 4


async def test_a_10xgraph_style_case_runs_through_agent_evaluator():
    case = EvalCase.single_turn(eval_id="w", user_query="Weather in Oslo?",
                                expected_tools=[ToolCall(name="get_weather", args={"city": "Oslo"})])
    config = EvalConfig(criteria=CriteriaConfig(trajectory=CriterionConfig.trajectory(
        threshold=1.0, match_type=MatchType.EXACT, check_args=True)))

    def agent(message: str) -> ExecutionResult:
        return ExecutionResult(actual_response="Rainy", trajectory=[
            TrajectoryStep.tool("get_weather", {"city": "Oslo"})])

    result = await AgentEvaluator(agent, config=config, save=False).evaluate_case(case)
    assert result.status == CaseStatus.PASSED


# Presets, builders, batches and report assertions ----------------------------------------

def enabled(config: EvalConfig) -> dict[str, CriterionConfig]:
    return dict(config.criteria.enabled_items())


def test_eval_presets_switch_on_the_named_criteria_with_their_thresholds():
    from referee import EvalPresets

    quality = enabled(EvalPresets.response_quality(threshold=0.9, judge_model="gpt-4o"))
    assert set(quality) == {"response_match", "llm_judge"}
    assert quality["llm_judge"].num_samples == 1 and quality["llm_judge"].judge_model == "gpt-4o"
    assert set(enabled(EvalPresets.response_quality(use_llm_judge=False))) == {"response_match"}

    tools = enabled(EvalPresets.tool_usage(threshold=0.8, strict=False, check_args=False))
    assert set(tools) == {"tool_name_match", "trajectory"}
    assert tools["trajectory"].match_type == MatchType.IN_ORDER
    assert not tools["trajectory"].check_args and tools["tool_name_match"].threshold == 0.8
    assert enabled(EvalPresets.tool_usage())["trajectory"].match_type == MatchType.EXACT

    flow = enabled(EvalPresets.conversation_flow())
    assert set(flow) == {"response_match", "trajectory"}
    assert flow["trajectory"].match_type == MatchType.IN_ORDER
    assert enabled(EvalPresets.quick_check()) == {"rouge_match": CriterionConfig.rouge_match(0.5)}
    assert set(enabled(EvalPresets.comprehensive())) == {
        "tool_name_match", "trajectory", "rouge_match", "llm_judge", "factual_accuracy",
        "hallucination", "safety"}
    assert set(enabled(EvalPresets.comprehensive(use_llm_judge=False))) == {
        "tool_name_match", "trajectory", "rouge_match"}
    assert set(enabled(EvalPresets.safety_check(threshold=0.95))) == {"hallucination", "safety"}


def test_eval_presets_combine_and_custom_build_one_ordinary_config(tmp_path):
    from referee import EvalPresets

    quick, tools = EvalPresets.quick_check(), EvalPresets.tool_usage(threshold=0.5)
    combined = EvalPresets.combine(quick, tools, EvalPresets.tool_usage(threshold=0.7))
    assert set(enabled(combined)) == {"rouge_match", "tool_name_match", "trajectory"}
    assert enabled(combined)["trajectory"].threshold == 0.7  # the later config wins
    combined.criteria.rouge_match.threshold = 0.9
    assert quick.criteria.rouge_match.threshold == 0.5  # combine copied, not shared

    assert enabled(EvalPresets.custom()) == {}
    custom = EvalPresets.custom(tool_threshold=0.9, tool_match_type=MatchType.ANY_ORDER,
                                safety_threshold=0.6, judge_model="claude-3-5-sonnet")
    assert set(enabled(custom)) == {"tool_name_match", "trajectory", "safety"}
    assert enabled(custom)["trajectory"].match_type == MatchType.ANY_ORDER
    assert enabled(custom)["safety"].judge_model == "claude-3-5-sonnet"
    custom.to_file(tmp_path / "config.json")
    assert EvalConfig.from_file(tmp_path / "config.json") == custom


def test_eval_set_builder_numbers_cases_and_reads_tool_names(tmp_path):
    from referee import EvalSetBuilder

    builder = EvalSetBuilder("Weather Agent")
    assert builder.add_case("Weather in Oslo?", "Rainy", expected_tools=[
        "get_weather", ToolCall(name="format", args={"unit": "C"})],
        expected_node_order=["router", "tools"], name="oslo") is builder
    builder.add_multi_turn([("Hi", "Hello"), ("Book it", "Booked")], expected_tools=["book"])
    builder.add_tool_test("Convert 5 EUR", "convert", {"amount": 5}, case_id="fx")
    assert [c.eval_id for c in builder.cases] == ["case_1", "case_2", "fx"]
    first, talk, tool = builder.cases
    assert first.expected_tool_trajectory == [ToolCall(name="get_weather"),
                                              ToolCall(name="format", args={"unit": "C"})]
    assert first.expected_node_order == ["router", "tools"] and first.name == "oslo"
    assert [t.expected_final_response for t in talk.conversation] == ["Hello", "Booked"]
    assert talk.conversation[0].expected_tool_trajectory == [ToolCall(name="book")]
    assert tool.expected_output == "Result from convert"

    eval_set = builder.save(tmp_path / "weather.json")
    assert eval_set.eval_set_id == builder.eval_set_id == "weather-agent"  # stable, not a UUID
    reopened = EvalSetBuilder.from_file(tmp_path / "weather.json").add_case("Sun?", "Yes")
    assert [c.eval_id for c in reopened.build()] == ["case_1", "case_2", "fx", "case_4"]
    assert reopened.name == "Weather Agent"


def test_eval_set_builder_shortcuts_and_create_simple_eval_set():
    from referee import EvalSetBuilder, create_simple_eval_set

    logged = EvalSetBuilder.from_conversations([{"user": "Hi", "assistant": "Hello"},
                                                {"user": "Bye"}])
    assert logged.name == "conversation_tests" and [c.eval_id for c in logged] == ["conv_1", "conv_2"]
    assert logged.eval_cases[1].expected_output == ""
    quick = EvalSetBuilder.quick(("2+2?", "4"), ("3+3?", "6"))
    assert [(c.eval_id, c.input, c.expected_output) for c in quick] == [
        ("test_1", "2+2?", "4"), ("test_2", "3+3?", "6")]

    simple = create_simple_eval_set("smoke", [("Hello", "Hi!", "greeting"), ("2+2?", "4", "")])
    assert (simple.eval_set_id, simple.name) == ("smoke", "smoke")
    assert [(c.eval_id, c.name) for c in simple] == [("case_0", "greeting"), ("case_1", "Case 1")]


def test_user_simulator_config_takes_10xgraphs_max_invocations_and_api_style():
    from referee import UserSimulatorConfig

    config = UserSimulatorConfig(model="gpt-4o", max_invocations=4, temperature=0.2)
    assert config.max_turns == config.max_invocations == 4
    config.api_style = "chat"
    simulator = UserSimulator(config=config)
    assert (simulator.model, simulator.max_turns, simulator.api_style) == ("gpt-4o", 4, "chat")
    with pytest.raises(ValueError, match="api_style must be 'responses' or 'chat'"):
        config.api_style = "completions"
    with pytest.raises(ValueError, match="name the same field"):
        UserSimulatorConfig(max_turns=3, max_invocations=4)


async def test_batch_simulator_runs_each_scenario_through_the_judge_server(judge_server,
                                                                         monkeypatch):
    import asyncio

    from referee import BatchSimulator, ConversationScenario, SimulationResult
    from referee.criteria.base import SyncCriterion

    monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url("openai"))
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("REFEREE_CACHE", "0")
    judge_server.script.set_default(
        lambda request: "[CONVERSATION COMPLETE]" if "Opened ticket" in request.prompt else "Order 7.")

    class TicketMentioned(SyncCriterion):
        name = "ticket_mentioned"

        def evaluate_sync(self, actual, expected):
            hit = "ticket" in actual.actual_response
            return self._result(1.0 if hit else 0.0,
                                {"achieved_goals": [expected.expected_output] if hit else []})

    in_flight, most = 0, 0

    async def support_agent(message: str) -> str:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0)
        in_flight -= 1
        return "Opened ticket 12." if "7" in message else "Which order?"

    simulator = UserSimulator(model="gpt-4o-mini", criteria=[TicketMentioned()])
    batch = BatchSimulator(simulator=simulator, max_concurrency=1)
    scenarios = [ConversationScenario(scenario_id=f"s{i}", starting_prompt=prompt,
                                      goals=["open a ticket"], max_turns=3)
                 for i, prompt in enumerate(["My parcel is late", "Order 7 is broken"])]
    results = await batch.run_batch(support_agent, scenarios)
    assert [r.scenario_id for r in results] == ["s0", "s1"] and most == 1
    assert [r.turns for r in results] == [2, 1] and all(r.completed for r in results)
    assert {r.model for r in judge_server.requests} == {"gpt-4o-mini"}
    assert BatchSimulator.summary(results + [SimulationResult(scenario_id="x", error="boom")]) == {
        "total_scenarios": 3, "completed": 2, "completion_rate": 2 / 3,
        "total_goals_achieved": 2, "average_turns": 1.0, "errors": 1}
    assert BatchSimulator(model="gpt-4o").simulator.model == "gpt-4o"
    with pytest.raises(TypeError, match="not both"):
        BatchSimulator(simulator=simulator, model="gpt-4o")


def test_report_assertions_and_format_summary():
    from referee import assert_criterion_passed, assert_eval_passed

    good = EvalCaseResult.success("c1", [CriterionResult.success("accuracy", 0.9, 0.5)], name="one")
    bad = EvalCaseResult.success("c2", [CriterionResult.success("accuracy", 0.2, 0.5)], name="two")
    report = EvalReport.create("set-1", [good, bad], eval_set_name="Support set")
    assert_eval_passed(report, min_pass_rate=0.5)
    with pytest.raises(AssertionError, match=r"pass rate 50.0% below threshold 100.0%\. "
                                             r"Failed cases: two"):
        assert_eval_passed(report)
    assert_criterion_passed(report, "accuracy", min_score=0.55)
    with pytest.raises(AssertionError, match="average score 0.55 below minimum 0.60"):
        assert_criterion_passed(report, "accuracy", min_score=0.6)
    with pytest.raises(AssertionError, match="'safety' not found in report; it has: accuracy"):
        assert_criterion_passed(report, "safety")

    text = report.format_summary()
    assert "Support set" in text and "accuracy" in text and "\x1b[" not in text


def test_criterion_result_is_importable_from_the_criteria_package():
    from referee.criteria import CriterionResult as FromCriteria

    assert FromCriteria is CriterionResult


# Reporter classes, over referee's renderers ----------------------------------------------

def reporter_report(eval_set_id: str = "set:1/alpha") -> EvalReport:
    """One passed case carrying everything the include_* switches govern, and one failed."""
    from referee import NodeDetail

    good = EvalCaseResult.success(
        "c1", [CriterionResult.success("tool_trajectory", 1.0, 0.8,
                                       details={"matched": ["lookup"]})],
        name="Order lookup", actual_response="Order 7 ships Friday.",
        actual_tool_calls=[ToolCall(name="lookup", args={"order": 7}, result="friday")],
        actual_trajectory=[TrajectoryStep.tool("lookup", {"order": 7})],
        node_details=[NodeDetail(node_name="planner", response_text="call lookup",
                                 token_usage=TokenUsage(input_tokens=12, output_tokens=3))])
    bad = EvalCaseResult.success("c2", [CriterionResult.success("response_match", 0.2, 0.8)],
                                 name="Refund window", actual_response="No idea.")
    report = EvalReport.create(eval_set_id, [good, bad], eval_set_name="Support bot")
    report.finished_at = report.started_at + 1.5  # a fixed duration: renders compare equal
    return report


def test_file_reporters_write_what_referees_renderers_write(tmp_path):
    from referee import HTMLReporter, JSONReporter, JUnitXMLReporter
    from referee.report.html import render_html
    from referee.report.json_report import render_json
    from referee.report.junit import render_junit

    report = reporter_report()
    assert JSONReporter().to_json(report) == render_json(report)
    assert JSONReporter(indent=None).to_dict(report)["cases"][0]["eval_id"] == "c1"
    assert HTMLReporter().to_html(report) == render_html(report)
    xml = JUnitXMLReporter().to_xml(report)
    assert xml == render_junit(report).replace('testsuites name="referee"',
                                               'testsuites name="agent-evaluation"')
    assert '<testsuites name="nightly"' in JUnitXMLReporter(suite_name="nightly").to_xml(report)

    # generate(): the text without a folder; with one, referee's file name for the format
    # (results.json, not report.json, which is the run store's record).
    for reporter, filename in ((JSONReporter(), "results.json"), (HTMLReporter(), "report.html"),
                               (JUnitXMLReporter(), "junit.xml")):
        text = reporter.generate(report)
        path = reporter.generate(report, output_dir=str(tmp_path / "out"))
        assert path == str(tmp_path / "out" / filename)
        assert (tmp_path / "out" / filename).read_text(encoding="utf-8") == text
    JSONReporter.quick_save(report, tmp_path / "deep" / "q.json", indent=None)
    saved = (tmp_path / "deep" / "q.json").read_text(encoding="utf-8")
    assert "\n" not in saved and EvalReport.from_dict(json.loads(saved)).passed == 1
    HTMLReporter.quick_save(report, tmp_path / "q.html")
    assert "Order lookup" in (tmp_path / "q.html").read_text(encoding="utf-8")


def test_include_switches_trim_a_copy_before_rendering():
    from referee import HTMLReporter, JSONReporter

    report = reporter_report()
    full = JSONReporter().to_dict(report)["cases"][0]
    assert full["criterion_results"][0]["details"] == {"matched": ["lookup"]}
    assert full["execution"]["tool_calls"][0]["args"] == {"order": 7}
    assert {"actual_trajectory", "node_details"} <= full["metadata"].keys()
    assert full["metadata"]["node_details"][0]["token_usage"]["input_tokens"] == 12

    bare = JSONReporter(include_details=False, include_trajectory=False,
                        include_node_responses=False, include_actual_response=False,
                        include_tool_call_details=False).to_dict(report)["cases"][0]
    assert bare["criterion_results"][0]["details"] == {}
    assert bare["execution"]["actual_response"] == ""
    assert bare["execution"]["tool_calls"] == [
        {"name": "lookup", "args": {}, "call_id": None, "result": None}]
    assert not {"actual_trajectory", "node_details"} & bare["metadata"].keys()
    only_trajectory_off = JSONReporter(include_trajectory=False).to_dict(report)["cases"][0]
    assert "node_details" in only_trajectory_off["metadata"]
    assert "actual_trajectory" not in only_trajectory_off["metadata"]
    # The report itself is untouched.
    assert report.cases[0].actual_response == "Order 7 ships Friday."
    assert report.cases[0].criterion_results[0].details == {"matched": ["lookup"]}

    assert "Order 7 ships Friday." in HTMLReporter().to_html(report)
    assert "Order 7 ships Friday." not in HTMLReporter(include_actual_response=False).to_html(report)


def test_console_reporter_prints_referees_summary(capsys):
    import io

    from referee import ConsoleReporter, print_report
    from referee.report.console import render_text

    report = reporter_report()
    out = io.StringIO()
    assert ConsoleReporter(use_color=False, output=out).generate(report) is None
    assert out.getvalue() == render_text(report)
    assert "Refund window" in out.getvalue() and "Order lookup" not in out.getvalue()

    everything = io.StringIO()
    ConsoleReporter(use_color=False, verbose=True, output=everything).report(report)
    assert "Cases (2):" in everything.getvalue() and "PASSED  Order lookup" in everything.getvalue()

    coloured = io.StringIO()
    ConsoleReporter(output=coloured).report(report)
    assert "\x1b[" in coloured.getvalue()
    auto = io.StringIO()  # use_color=None: colour only on a terminal
    ConsoleReporter(use_color=None, output=auto).report(report)
    assert "\x1b[" not in auto.getvalue() and "Support bot" in auto.getvalue()

    print_report(report, use_color=False)
    assert capsys.readouterr().out == render_text(report)


def test_console_reporter_replaces_what_the_stream_cannot_encode():
    from referee import ConsoleReporter

    class AsciiConsole:
        encoding = "ascii"

        def __init__(self) -> None:
            self.written: list[str] = []

        def write(self, text: str) -> int:
            text.encode(self.encoding)  # raises, as a cp1252/ascii console does
            self.written.append(text)
            return len(text)

    stream = AsciiConsole()
    ConsoleReporter(use_color=False, output=stream).report(reporter_report())
    text = "".join(stream.written)
    assert "Support bot" in text and "?" in text  # the header's dash became "?"


def test_colors_are_ansi_codes_that_disable_blanks():
    from referee import Colors

    saved = {name: value for name, value in vars(Colors).items() if name.isupper()}
    assert Colors.RED == "\x1b[31m" and Colors.RESET == "\x1b[0m" and len(saved) == 12
    try:
        Colors.disable()
        assert all(getattr(Colors, name) == "" for name in saved)
    finally:
        for name, value in saved.items():
            setattr(Colors, name, value)


def test_reporter_manager_writes_the_enabled_formats_named_after_the_eval_set(tmp_path, capsys):
    from referee import ReporterConfig, ReporterManager, ReporterOutput

    report = reporter_report()
    config = ReporterConfig(output_dir=str(tmp_path / "reports"), junit_xml=True,
                            timestamp_files=False, include_actual_response=False)
    out = ReporterManager(config).run_all(report)
    folder = tmp_path / "reports"
    assert out == ReporterOutput(json_path=str(folder / "set_1_alpha.json"),
                                 html_path=str(folder / "set_1_alpha.html"),
                                 junit_path=str(folder / "set_1_alpha_junit.xml"),
                                 console_output=True)
    assert out.generated_files == [out.json_path, out.html_path, out.junit_path]
    assert not out.has_errors
    stored = json.loads((folder / "set_1_alpha.json").read_text(encoding="utf-8"))
    assert stored["cases"][0]["execution"]["actual_response"] == ""  # the config's switch
    assert "<testsuite " in (folder / "set_1_alpha_junit.xml").read_text(encoding="utf-8")
    assert "Cases (2):" in capsys.readouterr().out  # ReporterConfig.verbose defaults to True

    only_json = ReporterConfig(output_dir=str(tmp_path / "ts"), console=False, html=False)
    stamped = ReporterManager(only_json).run_all(report, output_dir=str(tmp_path / "other"))
    stamp = time.strftime("%Y%m%d_%H%M%S", time.localtime(report.started_at))
    assert stamped.json_path == str(tmp_path / "other" / f"set_1_alpha_{stamp}.json")
    assert stamped.generated_files == [stamped.json_path] and not stamped.console_output
    assert not (tmp_path / "ts").exists()

    assert ReporterManager(ReporterConfig(enabled=False)).run_all(report) == ReporterOutput()
    assert capsys.readouterr().out == ""


def test_reporter_manager_runs_custom_reporters_and_survives_failures(tmp_path):
    from referee import BaseReporter, ReporterConfig, ReporterManager

    class CsvReporter(BaseReporter):
        def generate(self, report, output_dir=None):
            rows = "\n".join(f"{c.eval_id},{c.status.value}" for c in report.results)
            if output_dir is None:
                return rows
            path = f"{output_dir}/cases.csv"
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(rows)
            return path

    class BrokenReporter(BaseReporter):
        def generate(self, report, output_dir=None):
            raise RuntimeError("disk quota exceeded")

    config = ReporterConfig(output_dir=str(tmp_path), console=False, html=False,
                            timestamp_files=False)
    manager = ReporterManager(config, reporters=[BrokenReporter(), CsvReporter()])
    out = manager.run_all(reporter_report("support"))
    assert out.errors == [("BrokenReporter", "disk quota exceeded")] and out.has_errors
    assert out.custom_paths == {"CsvReporter": f"{tmp_path}/cases.csv"}
    assert out.generated_files == [str(tmp_path / "support.json"), f"{tmp_path}/cases.csv"]
    assert (tmp_path / "cases.csv").read_text(encoding="utf-8") == "c1,PASSED\nc2,FAILED"

    with pytest.raises(TypeError):
        BaseReporter()  # generate() is abstract


def test_reporter_manager_reports_an_unusable_folder_and_still_prints(tmp_path, capsys):
    from referee import ReporterConfig, ReporterManager

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x", encoding="utf-8")
    config = ReporterConfig(output_dir=str(blocker / "reports"), html=False)
    out = ReporterManager(config).run_all(reporter_report())
    assert [name for name, _ in out.errors] == ["directory", "JSONReporter"]
    assert out.console_output and out.json_path is None
    assert "Support bot" in capsys.readouterr().out


async def test_agent_evaluator_writes_the_reports_its_config_asks_for(tmp_path):
    from referee import ReporterConfig

    evalset = EvalSet(name="weather", cases=[EvalCase.single_turn(
        eval_id="w1", user_query="Weather in Oslo?", expected_response="Rainy in Oslo.")])
    criteria = CriteriaConfig(rouge_match=CriterionConfig.rouge_match(threshold=0.5))

    def agent(message: str) -> str:
        return "Rainy in Oslo."

    reporter = ReporterConfig(output_dir=str(tmp_path / "reports"), console=False,
                              junit_xml=True, timestamp_files=False)
    config = EvalConfig(criteria=criteria, reporter=reporter)
    report = await AgentEvaluator(agent, config=config, save=False).evaluate(evalset)
    written = sorted(p.name for p in (tmp_path / "reports").iterdir())
    assert written == ["weather.html", "weather.json", "weather_junit.xml"]
    stored = json.loads((tmp_path / "reports" / "weather.json").read_text(encoding="utf-8"))
    assert stored["run_id"] == report.run_id and stored["totals"]["passed"] == 1

    config.to_file(tmp_path / "config.json")
    assert EvalConfig.from_file(tmp_path / "config.json").reporter == reporter
    quiet = await AgentEvaluator(agent, config=EvalConfig(criteria=criteria), save=False,
                                 runs_dir=tmp_path / "runs").evaluate(evalset)
    assert quiet.passed == 1 and sorted(p.name for p in tmp_path.iterdir()) == [
        "config.json", "reports"]


async def test_evaluation_runner_runs_each_agent_over_its_eval_set(tmp_path):
    from referee import EvaluationRunner
    from referee.errors import InputError

    weather = EvalSet(name="weather", cases=[EvalCase.single_turn(
        eval_id="w1", user_query="Weather in Oslo?", expected_response="Rainy in Oslo.")])
    billing = EvalSet(name="billing", cases=[
        EvalCase.single_turn(eval_id="b1", user_query="Refund?", expected_response="Within 30 days."),
        EvalCase.single_turn(eval_id="b2", user_query="Invoice?", expected_response="Emailed monthly.")])
    config = EvalConfig(criteria=CriteriaConfig(
        rouge_match=CriterionConfig.rouge_match(threshold=0.5)))

    runner = EvaluationRunner(config, runs_dir=tmp_path)
    assert runner.results == {} and runner.summary == {"total_evaluations": 0}
    assert EvaluationRunner().default_config == EvalConfig.default()
    results = await runner.run([(lambda q: "Rainy in Oslo.", weather),
                                (lambda q: "Within 30 days.", billing)])
    assert list(results) == ["weather", "billing"] and results is runner.results
    assert [r.passed for r in results.values()] == [1, 1]
    assert runner.summary == {"total_evaluations": 2, "total_cases": 3, "evaluated_cases": 3,
                              "passed_cases": 2, "overall_pass_rate": 2 / 3}
    assert len(list(tmp_path.iterdir())) == 2  # each run stored

    with pytest.raises(InputError, match=r"evaluations\[0\].*graph runtime"):
        await runner.run([(lambda q: "x", object(), weather)])


def test_html_reporter_page_runs_in_chromium(tmp_path):
    import re

    from test_report_samples import chromium_dom

    from referee import HTMLReporter

    path = tmp_path / "nested" / "report.html"
    HTMLReporter(include_tool_call_details=False).save(reporter_report(), str(path))
    dom = chromium_dom(path.as_uri(), tmp_path)
    assert re.search(r'<body[^>]*data-js="on"', dom), "the report's own script did not run"
    assert "Order lookup" in dom and "Refund window" in dom and "Support bot" in dom


def test_reporters_store_stand_ins_for_what_json_cannot_hold():
    from referee import JSONReporter

    class Snapshot:  # an agent's own object, set after the result was built
        def __repr__(self) -> str:
            return "Snapshot(node='planner')"

    report = reporter_report()
    report.cases[0].node_responses = [{"node_name": "planner"}, Snapshot()]
    assert report.cases[0].metadata["node_responses"][0] == {"node_name": "planner"}
    data = JSONReporter().to_dict(report)
    assert data["cases"][0]["metadata"]["node_responses"] == [
        {"node_name": "planner"}, "Snapshot(node='planner')"]
    assert data["cases"][0]["converted"][0]["path"].endswith("node_responses[1]")
    assert "could not be stored as JSON" in data["warnings"][0]
    assert "node_responses" not in JSONReporter(include_node_responses=False).to_dict(
        report)["cases"][0]["metadata"]


# 10xgraph's criterion descriptions, word for word: its own tests and code compare them.
DESCRIPTIONS_10XGRAPH = {
    "CompositeCriterion": "Combines multiple criteria",
    "WeightedCriterion": "Weighted combination of criteria",
    "FactualAccuracyCriterion": "LLM-based factual accuracy evaluation",
    "HallucinationCriterion": "LLM-based hallucination/groundedness detection",
    "LLMJudgeCriterion": "LLM-based semantic response matching",
    "ResponseMatchCriterion": "LLM semantic response matching",
    "RougeMatchCriterion": "Evaluates response text similarity using ROUGE-1",
    "ExactMatchCriterion": "Evaluates exact string match of response",
    "ContainsKeywordsCriterion": "Evaluates presence of required keywords in response",
    "RubricBasedCriterion": "LLM-based rubric evaluation",
    "SafetyCriterion": "LLM-based safety and harmlessness evaluation",
    "SimulationGoalsCriterion":
        "LLM-based goal achievement evaluation for UserSimulator conversations",
    "TrajectoryMatchCriterion": "Evaluates tool call trajectory matching",
    "NodeOrderMatchCriterion": "Evaluates node visit order matching",
    "ToolNameMatchCriterion": "Evaluates tool name matching (ignores arguments)",
}


@pytest.mark.parametrize("class_name", sorted(DESCRIPTIONS_10XGRAPH))
def test_criterion_descriptions_read_as_10xgraphs(class_name):
    import referee.criteria

    cls = getattr(referee.criteria, class_name)
    assert cls.description == DESCRIPTIONS_10XGRAPH[class_name]


def test_the_default_simulator_model_is_10xgraphs_litellm_spelling_and_means_google(monkeypatch):
    from referee import BatchSimulator
    from referee.judge import judge_config_for_model, split_judge_model

    simulator = UserSimulator()
    assert simulator.model == "gemini/gemini-2.5-flash"
    assert simulator.criteria[0].config.judge_model == "gemini/gemini-2.5-flash"
    assert BatchSimulator().simulator.model == "gemini/gemini-2.5-flash"
    from referee import UserSimulatorConfig

    assert UserSimulatorConfig().model == "gemini-2.5-flash"  # as 10xgraph's config has it
    # The prefix names the provider; the provider is sent the model's own name.
    assert split_judge_model("gemini/gemini-2.5-flash") == ("google", "gemini-2.5-flash")
    assert split_judge_model("gpt/gpt-4o") == ("openai", "gpt-4o")
    assert split_judge_model("claude/claude-sonnet-4-5") == ("anthropic", "claude-sonnet-4-5")
    assert split_judge_model("models/gemini-2.5-flash") == ("google", "models/gemini-2.5-flash")
    monkeypatch.setenv("GOOGLE_API_KEY", "test-key")
    monkeypatch.delenv("GOOGLE_GENAI_USE_VERTEXAI", raising=False)
    cfg = judge_config_for_model(simulator.model, temperature=simulator.temperature)
    assert cfg is not None and (cfg.provider, cfg.model) == ("google", "gemini-2.5-flash")


async def test_a_litellm_spelt_judge_model_reaches_google_under_its_own_name(judge_server,
                                                                             monkeypatch):
    from referee.criteria import SafetyCriterion

    monkeypatch.setenv("GOOGLE_API_KEY", "test-key")
    monkeypatch.delenv("GOOGLE_GENAI_USE_VERTEXAI", raising=False)
    monkeypatch.setenv("REFEREE_CACHE", "0")
    judge_server.set_reply('{"score": 1.0, "reasoning": "Harmless.", "issues": []}')
    criterion = SafetyCriterion(CriterionConfig(judge_model="gemini/gemini-2.5-flash",
                                                num_samples=1,
                                                base_url=judge_server.base_url("google")))
    result = await criterion.evaluate(ExecutionResult(actual_response="Hello."),
                                      EvalCase(input="Hi"))
    [request] = judge_server.requests
    assert (request.provider, request.model) == ("google", "gemini-2.5-flash")
    assert result.score == 1.0 and result.error is None
