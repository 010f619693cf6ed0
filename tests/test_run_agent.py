"""AgentEvaluator (document 000) and UserSimulator over the shared engine."""

from __future__ import annotations

import json

import pytest

from referee import (
    AgentEvaluator,
    ConversationScenario,
    CriterionConfig,
    EvalCase,
    EvalConfig,
    ExecutionResult,
    Invocation,
    MatchType,
    ToolCall,
    UserSimulator,
)
from referee.config import CriteriaConfig
from referee.criteria.base import SyncCriterion
from referee.errors import InputError
from referee.evalset import EvalSet
from referee.report.model import CaseStatus
from referee.testing.fake import FakeJudge

CONFIG = EvalConfig(criteria=CriteriaConfig(
    trajectory=CriterionConfig.trajectory(threshold=1.0, match_type=MatchType.EXACT),
    contains_keywords=CriterionConfig.contains_keywords(keywords=["booked"]),
))


def booking_case() -> EvalCase:
    return EvalCase.multi_turn([
        Invocation(user_content="find flights to Oslo",
                   expected_tool_trajectory=[ToolCall(name="search_flights", args={"to": "Oslo"})]),
        Invocation(user_content="book the first one", expected_final_response="booked",
                   expected_tool_trajectory=[ToolCall(name="book", args={"flight": "SK1"})]),
    ], eval_id="booking", name="booking")


def travel_agent(user_message: str, history: list) -> ExecutionResult:
    if "find" in user_message:
        return ExecutionResult(actual_response="SK1 or SK2",
                               tool_calls=[ToolCall(name="search_flights", args={"to": "Oslo"})],
                               node_visits=["router", "search"])
    assert history[0].response == "SK1 or SK2"  # the agent sees the earlier turns
    return ExecutionResult(actual_response="SK1 is booked",
                           tool_calls=[ToolCall(name="book", args={"flight": "SK1"})],
                           node_visits=["router", "book"])


async def test_multi_turn_case_runs_turn_by_turn_and_concatenates_the_trajectory():
    evaluator = AgentEvaluator(travel_agent, config=CONFIG, save=False)
    report = await evaluator.evaluate([booking_case()])
    case = report.cases[0]
    assert case.status == CaseStatus.PASSED, case.failed_criteria
    assert [t.name for t in case.execution.tool_calls] == ["search_flights", "book"]
    assert case.execution.node_visits == ["router", "search", "router", "book"]
    assert [t.user_content for t in case.execution.turns] == ["find flights to Oslo",
                                                            "book the first one"]
    assert case.actual_response == "SK1 is booked"
    stats = report.summary.criterion_stats
    assert stats["tool_trajectory_avg_score"]["pass_rate"] == 1.0
    assert stats["contains_keywords"].total == 1
    assert report.summary.total == 1 and report.summary.passed == 1


def test_sync_entry_point_one_argument_agent_and_an_eval_set_file(tmp_path):
    path = tmp_path / "cases.evalset.json"
    path.write_text(json.dumps(EvalSet(name="kw", eval_cases=[
        EvalCase(input="say booked", eval_id="a"), EvalCase(input="say nothing", eval_id="b"),
    ]).model_dump(mode="json")))
    only_keywords = EvalConfig(criteria=CriteriaConfig(
        contains_keywords=CriterionConfig.contains_keywords(keywords=["booked"])))

    async def echo(user_message: str) -> str:
        return user_message.removeprefix("say ")

    evaluator = AgentEvaluator(echo, config=only_keywords, runs_dir=tmp_path / "runs")
    report = evaluator.evaluate_sync(str(path))
    assert report.name == "kw"
    assert [c.status for c in report.cases] == [CaseStatus.PASSED, CaseStatus.FAILED]
    assert (tmp_path / "runs" / report.run_id / "report.json").is_file()
    assert report.config_used["criteria"]["contains_keywords"]["keywords"] == ["booked"]


async def test_an_agent_failure_on_a_later_turn_is_a_model_error_naming_the_turn():
    def flaky(user_message, history):
        if history:
            return ExecutionResult(error="payment service down")
        return "ok"

    result = await AgentEvaluator(flaky, config=CONFIG, save=False).evaluate_case(booking_case())
    assert result.status == CaseStatus.MODEL_ERROR
    assert result.error == "AgentError: turn 2: payment service down"


async def test_extra_criteria_and_parallel_settings():
    class ShortAnswer(SyncCriterion):
        name = "short_answer"

        def evaluate_sync(self, actual, expected):
            return self._result(1.0 if len(actual.actual_response) < 20 else 0.0)

    evaluator = AgentEvaluator(travel_agent, config=CONFIG, criteria=[ShortAnswer()], save=False)
    assert [c.name for c in evaluator.criteria][-1] == "short_answer"
    report = await evaluator.evaluate([booking_case()], parallel=True, max_concurrency=2)
    assert report.cases[0].get_criterion_result("short_answer").passed


async def test_cases_without_a_user_turn_are_rejected_up_front():
    evaluator = AgentEvaluator(travel_agent, config=CONFIG, save=False)
    with pytest.raises(InputError, match="no user turn"):
        await evaluator.evaluate([EvalCase(eval_id="empty")])
    with pytest.raises(InputError, match="cannot evaluate a int"):
        await evaluator.evaluate(3)


def test_agent_must_be_callable():
    with pytest.raises(TypeError, match="agent must be callable"):
        AgentEvaluator("not an agent")


# UserSimulator ------------------------------------------------------------------------------

class GoalsInTranscript(SyncCriterion):
    """Deterministic stand-in scorer: each goal's keyword must appear in the transcript."""

    name = "goals_in_transcript"

    def evaluate_sync(self, actual, expected):
        goals = (expected.expected_output or "").splitlines()
        hit = [g for g in goals if g.split()[-1] in actual.actual_response]
        return self._result(len(hit) / len(goals), {"achieved_goals": hit})


def refund_agent(user_message: str, history: list) -> ExecutionResult:
    if "order" in user_message:
        return ExecutionResult(actual_response="Your refund is approved.",
                               tool_calls=[ToolCall(name="refund", args={"order": 42})])
    return ExecutionResult(actual_response="Which order number?")


SCENARIO = ConversationScenario(
    scenario_id="refund", description="A customer wants a refund for order 42",
    starting_prompt="I want my money back", goals=["get the refund approved"], max_turns=5)


def scripted_user(request) -> str:
    if "Your refund is approved" in request.prompt:
        return "[CONVERSATION COMPLETE]"
    return "It is order 42."


async def test_user_simulator_drives_the_agent_through_the_judge_layer():
    fake = FakeJudge(scripted_user)
    simulator = UserSimulator(judge=fake.judge_config(), criteria=[GoalsInTranscript()])
    result = await simulator.run(refund_agent, SCENARIO)
    assert result.status == "PASSED" and result.completed
    assert [m["role"] for m in result.conversation] == ["user", "assistant"] * 2
    assert result.conversation[2]["content"] == "It is order 42."
    assert result.turns == 2
    assert result.goals_achieved == ["get the refund approved"]
    assert fake.request_count == 2  # one simulator call after each agent reply
    assert fake.requests[0].temperature == 0.7
    assert "A customer wants a refund" in fake.requests[0].prompt
    assert result.simulator_token_usage.requests == 2


async def test_user_simulator_respects_max_turns_and_stores_a_report(tmp_path):
    fake = FakeJudge("Still waiting.")
    simulator = UserSimulator(judge=fake.judge_config(), criteria=[GoalsInTranscript()],
                              max_turns=3)
    report = await simulator.evaluate(lambda m, h: "Which order number?", [SCENARIO],
                                      runs_dir=tmp_path)
    case = report.cases[0]
    assert case.status == CaseStatus.FAILED
    assert len(case.execution.turns) == 3
    assert "USER: I want my money back" in case.actual_response
    assert (tmp_path / report.run_id / "report.json").is_file()


async def test_user_simulator_without_a_provider_is_a_judge_error(monkeypatch):
    for var in ("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI"):
        monkeypatch.delenv(var, raising=False)
    simulator = UserSimulator(model="gemini-2.5-flash", criteria=[GoalsInTranscript()])
    result = await simulator.run(refund_agent, SCENARIO)
    assert result.status == "JUDGE_ERROR"
    assert "No LLM provider available for the user simulator" in result.error


async def test_default_config_without_a_judge_provider_is_a_judge_error_not_a_verdict(monkeypatch):
    for var in ("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI"):
        monkeypatch.delenv(var, raising=False)
    evaluator = AgentEvaluator(lambda message: "Paris", save=False)  # EvalConfig.default()
    report = await evaluator.evaluate([EvalCase(input="Capital of France?", expected_output="Paris")])
    case = report.cases[0]
    assert case.status == CaseStatus.JUDGE_ERROR
    judged = case.get_criterion_result("response_match_score")
    assert judged.score == 0.5 and judged.error_kind == "judge"  # document 000's fallback, flagged
    assert report.evaluated == 0 and report.errors_by_kind == {"judge_error": 1}
    assert report.summary.criterion_stats["response_match_score"].errors == 1


async def test_user_simulator_end_to_end_with_simulation_goals_through_the_sdk(judge_server,
                                                                               monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url("openai"))
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("REFEREE_CACHE", "0")  # every request must reach the server

    def respond(request) -> str:
        if "numbered list of goals" in request.prompt:
            return '{"achieved": [1], "reasoning": "The refund was approved."}'
        return scripted_user(request)

    judge_server.script.set_default(respond)
    simulator = UserSimulator(model="gpt-4o-mini")  # default criterion: SimulationGoalsCriterion
    result = await simulator.run(refund_agent, SCENARIO)
    assert result.status == "PASSED", result.error
    assert result.goals_achieved == ["get the refund approved"] and result.completed
    assert result.criterion_scores == {"simulation_goals": 1.0}
    models = {r.model for r in judge_server.requests}
    assert models == {"gpt-4o-mini"} and judge_server.request_count == 3


async def test_user_simulator_judge_also_judges_its_default_goals_criterion(monkeypatch):
    for var in ("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI"):
        monkeypatch.delenv(var, raising=False)  # the default model's provider is out of reach

    def respond(request) -> str:
        if "numbered list of goals" in request.prompt:
            return '{"achieved": [1], "reasoning": "The refund was approved."}'
        return scripted_user(request)

    fake = FakeJudge(respond)
    simulator = UserSimulator(judge=fake.judge_config())  # default criterion: simulation_goals
    result = await simulator.run(refund_agent, SCENARIO)
    assert result.status == "PASSED", result.error
    assert result.criterion_scores == {"simulation_goals": 1.0}
    assert result.criterion_details["simulation_goals"]["judge_model"] == "fake/fake-judge"
    goals_request = fake.requests[-1]
    assert fake.request_count == 3 and "numbered list of goals" in goals_request.prompt
    assert goals_request.temperature == 0.3  # the criterion's own, not the simulated user's 0.7


async def test_summary_counts_per_criterion_stats_and_judge_tokens():
    from referee.usage import TokenUsage

    class Judged(SyncCriterion):
        """Stands in for a judged criterion: a score and the tokens its judge call cost."""

        name = "judged"
        threshold = 0.5

        def evaluate_sync(self, actual, expected):
            score = 0.9 if "booked" in actual.actual_response else 0.3
            return self._result(score, token_usage=TokenUsage(
                input_tokens=100, output_tokens=10, requests=1, cost_usd=0.001))

    def agent(message: str) -> ExecutionResult:
        if message == "crash":
            return ExecutionResult(error="backend down")
        return ExecutionResult(actual_response=message)

    only_keywords = EvalConfig(criteria=CriteriaConfig(
        contains_keywords=CriterionConfig.contains_keywords(keywords=["booked"])))
    evaluator = AgentEvaluator(agent, config=only_keywords, criteria=[Judged()], save=False)
    report = await evaluator.evaluate([EvalCase(input="it is booked", eval_id="ok"),
                                       EvalCase(input="no seats left", eval_id="bad"),
                                       EvalCase(input="crash", eval_id="err")])
    summary = report.summary
    assert (summary.total, summary.passed, summary.failed, summary.error_cases) == (3, 1, 1, 1)
    assert summary.pass_rate == 0.5 and summary.error_rate == pytest.approx(1 / 3)
    keywords = summary.criterion_stats["contains_keywords"]
    assert (keywords["total"], keywords["passed"], keywords["failed"]) == (2, 1, 1)
    assert keywords["avg_score"] == 0.5 and keywords["pass_rate"] == 0.5
    judged = summary.criterion_stats["judged"]
    assert (judged.total, judged.passed, judged.failed) == (2, 1, 1)
    assert judged.avg_score == pytest.approx(0.6) and judged.pass_rate == 0.5
    usage = summary.total_token_usage
    assert (usage.input_tokens, usage.output_tokens, usage.requests) == (200, 20, 2)
    assert usage.cost_usd == pytest.approx(0.002)
    assert report.token_usage == usage
    # The same numbers under document 001's names, from the same cases.
    assert (report.total, report.passed, report.failed, report.errors) == (3, 1, 1, 1)
    assert report.pass_rate == summary.pass_rate and report.error_rate == summary.error_rate


async def test_case_context_is_entered_around_every_turn_of_its_case():
    import contextlib
    import contextvars

    session: contextvars.ContextVar[str] = contextvars.ContextVar("session", default="none")
    seen: list[tuple[str, str]] = []

    @contextlib.contextmanager
    def tagged(case: EvalCase):
        token = session.set(case.eval_id)
        try:
            yield
        finally:
            session.reset(token)

    @contextlib.asynccontextmanager
    async def tagged_async(case: EvalCase):
        with tagged(case):
            yield

    def sync_agent(message: str) -> str:  # runs on a worker thread
        seen.append((message, session.get()))
        return "ok"

    async def async_agent(message: str) -> str:
        seen.append((message, session.get()))
        return "ok"

    cases = [EvalCase.multi_turn([Invocation(user_content="a1"), Invocation(user_content="a2")],
                                 eval_id="case-a"),
             EvalCase.single_turn("b1", eval_id="case-b")]
    for agent, context in ((sync_agent, tagged), (async_agent, tagged_async)):
        seen.clear()
        evaluator = AgentEvaluator(agent, config=EvalConfig(criteria=CriteriaConfig()),
                                   save=False, case_context=context)
        await evaluator.evaluate(cases, verbose=False)
        assert sorted(seen) == [("a1", "case-a"), ("a2", "case-a"), ("b1", "case-b")]
    assert session.get() == "none"


async def test_judge_replies_without_a_usable_score_are_a_judge_error_not_a_zero(judge_server,
                                                                                 monkeypatch):
    """A reply whose score is nested ({"response": {"score": "1.0"}}) or out of range is no
    score: every sample fails, the criterion is "All LLM samples failed", the case JUDGE_ERROR."""
    monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url("openai"))
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("REFEREE_CACHE", "0")
    replies = iter([json.dumps({"response": {"score": "1.0", "reasoning": "nested"}}),
                    json.dumps({"score": 4, "reasoning": "a 1-5 scale"})])
    judge_server.script.set_default(lambda request: next(replies))
    config = EvalConfig(criteria=CriteriaConfig(response_match=CriterionConfig.response_match(
        judge_model="gpt-4o-mini", num_samples=2)))
    evaluator = AgentEvaluator(lambda message: "Paris", config=config, save=False)
    report = await evaluator.evaluate([EvalCase(input="Capital of France?",
                                                expected_output="Paris")])
    [case] = report.cases
    assert case.status == CaseStatus.JUDGE_ERROR
    judged = case.get_criterion_result("response_match_score")
    assert judged.error == "All LLM samples failed" and judged.error_kind == "judge"
    assert sorted(s["raw_reply"] for s in judged.details["sample_replies"]) == sorted(
        [json.dumps({"response": {"score": "1.0", "reasoning": "nested"}}),
         json.dumps({"score": 4, "reasoning": "a 1-5 scale"})])
    assert report.errors_by_kind == {"judge_error": 1}
