"""The 10xgraph (``tenxgraph.qa.evaluation``) names and signatures referee accepts, each over
referee's one model. Written from 10xgraph's public docs and signatures; no test code copied."""

from __future__ import annotations

import json

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
