"""multivon-eval's agent evaluators under referee: ToolCallAccuracy (deterministic) and the
judged ones, driven through the real OpenAI SDK against the scripted judge server."""

from __future__ import annotations

import re

import pytest

import referee
from referee import (
    AgentMemoryEval,
    AgentStep,
    EvalCase,
    EvalStatus,
    EvalSuite,
    ExecutionResult,
    PlanQuality,
    StepFaithfulness,
    TaskCompletion,
    ToolArgumentAccuracy,
    ToolCall,
    ToolCallAccuracy,
    ToolCallNecessity,
    TrajectoryEfficiency,
)
from referee.testing.server import ScriptedJudgeServer

pytestmark = pytest.mark.usefixtures("isolated_judge")

AGENT_NAMES = ["ToolCallAccuracy", "ToolArgumentAccuracy", "PlanQuality", "TaskCompletion",
               "ToolCallNecessity", "TrajectoryEfficiency", "AgentMemoryEval", "StepFaithfulness"]
JUDGED = [ToolArgumentAccuracy, PlanQuality, TaskCompletion, ToolCallNecessity,
          TrajectoryEfficiency, AgentMemoryEval, StepFaithfulness]
ITEMWISE = [ToolArgumentAccuracy, ToolCallNecessity, StepFaithfulness]
TASK = "Find the weather in Paris and summarise it"


def weather_steps(result: str = "18C and sunny") -> list[AgentStep]:
    return [
        AgentStep("Need the current weather first",
                  [ToolCall(name="search_weather", arguments={"city": "Paris"}, result=result)],
                  "Fetched the weather"),
        AgentStep("Now summarise it",
                  [ToolCall(name="summarize", arguments={"style": "brief"},
                            result="Paris is 18C and sunny")],
                  "Paris is 18C and sunny."),
    ]


def traced(names: list[str]) -> ExecutionResult:
    return ExecutionResult(agent_trace=[AgentStep(tool_calls=[ToolCall(name=n)]) for n in names],
                           actual_response="done")


def expecting(names: list[str] | None) -> EvalCase:
    if names is None:
        return EvalCase(input=TASK)
    return EvalCase(input=TASK, expected_tool_calls=names)


async def accuracy(names_called: list[str], names_expected: list[str], **options):
    return await ToolCallAccuracy(**options).evaluate(traced(names_called),
                                                      expecting(names_expected))


@pytest.mark.parametrize("name", AGENT_NAMES)
def test_agent_evaluators_import_from_the_top_level_and_evaluators(name):
    import referee.evaluators as evaluators

    assert getattr(referee, name) is getattr(evaluators, name)
    assert name in dir(referee) and name in evaluators.__all__


def test_names_and_defaults_are_multivons():
    expected = {ToolCallAccuracy: "tool_call_accuracy",
                ToolArgumentAccuracy: "tool_argument_accuracy", PlanQuality: "plan_quality",
                TaskCompletion: "task_completion", ToolCallNecessity: "tool_call_necessity",
                TrajectoryEfficiency: "trajectory_efficiency", AgentMemoryEval: "agent_memory",
                StepFaithfulness: "step_faithfulness"}
    for cls, name in expected.items():
        evaluator = cls()
        assert evaluator.name == name and evaluator.threshold == 0.7
        assert evaluator.uses_llm_judge is (cls is not ToolCallAccuracy)
    for cls in ITEMWISE:
        assert cls().max_items == 8 and cls(max_items=3).max_items == 3
    assert ToolCallAccuracy(True, 0.5).require_order is True
    assert ToolCallAccuracy(True, 0.5).threshold == 0.5


# --- ToolCallAccuracy -------------------------------------------------------------------------

async def test_unordered_scores_the_fraction_of_expected_tools_called():
    full = await accuracy(["search_weather", "summarize"], ["search_weather", "summarize"])
    assert (full.score, full.passed) == (1.0, True)
    partial = await accuracy(["search_weather", "translate"], ["search_weather", "summarize"])
    assert (partial.score, partial.passed) == (0.5, False)
    assert "Missing tools: ['summarize']" in partial.reason
    assert "Unexpected tools: ['translate']" in partial.reason
    assert partial.details["missing"] == ["summarize"]
    assert partial.details["unexpected"] == ["translate"]


async def test_extra_tools_are_reported_and_only_penalised_in_strict_mode():
    lenient = await accuracy(["lookup_order", "refund_order"], ["lookup_order"])
    assert lenient.score == 1.0 and "refund_order" in lenient.reason
    strict = await accuracy(["lookup_order", "refund_order"], ["lookup_order"],
                            penalize_unexpected=True)
    assert (strict.score, strict.passed) == (0.5, False)
    assert "strict mode" in strict.reason
    clean = await accuracy(["lookup_order"], ["lookup_order"], penalize_unexpected=True)
    assert clean.score == 1.0
    ordered = await accuracy(["lookup_order", "refund_order", "audit"], ["lookup_order"],
                             require_order=True, penalize_unexpected=True)
    assert ordered.score == pytest.approx(1 / 3)


async def test_ordered_mode_allows_extra_calls_and_costs_a_reordering():
    around = await accuracy(["check_cache", "search_weather", "log", "summarize"],
                            ["search_weather", "summarize"], require_order=True)
    assert around.score == 1.0
    swapped = await accuracy(["summarize", "search_weather"], ["search_weather", "summarize"],
                             require_order=True)
    assert swapped.score == 0.5 and not swapped.passed
    # One of the two is in order, the other was called but out of order (not missing).
    assert len(swapped.details["out_of_order"]) == 1 and "Called out of order" in swapped.reason
    assert swapped.details["missing"] == []
    # The longest order-preserving match: a and c are still in order when b is missing.
    gap = await accuracy(["a", "c"], ["a", "b", "c"], require_order=True)
    assert gap.score == pytest.approx(2 / 3) and gap.details["missing"] == ["b"]
    unordered_swap = await accuracy(["summarize", "search_weather"],
                                    ["search_weather", "summarize"])
    assert unordered_swap.score == 1.0


async def test_an_empty_expectation_asserts_that_no_tool_is_called():
    none_called = await ToolCallAccuracy().evaluate(ExecutionResult(agent_trace=[]),
                                                    expecting([]))
    assert (none_called.score, none_called.passed, none_called.skipped) == (1.0, True, False)
    called = await ToolCallAccuracy().evaluate(traced(["refund_order"]), expecting([]))
    assert (called.score, called.passed) == (0.0, False)
    assert "refund_order" in called.reason


async def test_skips_without_an_expectation_or_a_trace_and_fails_an_observed_empty_trace():
    no_expectation = await ToolCallAccuracy().evaluate(traced(["search"]), expecting(None))
    assert no_expectation.skipped and "expected_tool_calls" in no_expectation.reason
    no_trace = await ToolCallAccuracy().evaluate(ExecutionResult(actual_response="done"),
                                                 expecting(["search"]))
    assert no_trace.skipped and "agent trace" in no_trace.reason
    # Observed and empty is a measurement: the expected tool was not called.
    observed = await ToolCallAccuracy().evaluate(
        ExecutionResult(agent_trace=[AgentStep(thought="I can answer directly")]),
        expecting(["search"]))
    assert (observed.score, observed.skipped) == (0.0, False)
    empty = await ToolCallAccuracy().evaluate(ExecutionResult(agent_trace=[]),
                                              expecting(["search"]))
    assert (empty.score, empty.skipped) == (0.0, False)


async def test_runs_recorded_by_adapters_are_traces_too():
    # Tool calls without AgentSteps (referee's adapters and trace readers record these).
    run = ExecutionResult(tool_calls=[ToolCall(name="search_weather")], actual_response="x")
    assert (await ToolCallAccuracy().evaluate(run, expecting(["search_weather"]))).score == 1.0
    # Node visits without tool calls: an agent was observed and called nothing.
    graph = ExecutionResult(node_visits=["agent"], actual_response="x")
    result = await ToolCallAccuracy().evaluate(graph, expecting(["search_weather"]))
    assert (result.score, result.skipped) == (0.0, False)


def test_tool_call_accuracy_in_a_suite_with_a_model_that_returns_its_steps():
    def agent(question: str) -> dict:
        tool = "get_weather" if "weather" in question else "get_news"
        return {"output": "ok", "agent_trace": [
            {"thought": "look it up", "tool_calls": [{"name": tool, "arguments": {"q": question}}]}]}

    suite = EvalSuite("agent").add_cases([
        EvalCase(input="weather in Paris", expected_tool_calls=["get_weather"], case_id="good"),
        EvalCase(input="news today", expected_tool_calls=["get_weather"], case_id="bad"),
        EvalCase(input="hello", case_id="untested")])
    report = suite.add_evaluator(ToolCallAccuracy()).run(agent, verbose=False, save=False)
    statuses = {c.eval_id: c.status for c in report.case_results}
    assert statuses == {"good": EvalStatus.PASSED, "bad": EvalStatus.FAILED,
                        "untested": EvalStatus.SKIPPED}


# --- judged evaluators ------------------------------------------------------------------------

@pytest.fixture
def server():
    with ScriptedJudgeServer(reply="Yes") as srv:
        yield srv


def question_of(request) -> str:
    return re.search(r"^Question: (.*)$", request.prompt, re.MULTILINE).group(1)


def answer(server, rules: dict[str, str]) -> None:
    """Reply per question: the first fragment found in a request's question wins, else Yes."""
    def responder(request):
        question = question_of(request)
        return next((reply for fragment, reply in rules.items() if fragment in question), "Yes")
    server.set_reply(responder)


def weather_run(result: str = "18C and sunny") -> ExecutionResult:
    return ExecutionResult(agent_trace=weather_steps(result), actual_response="Paris: 18C, sunny")


async def test_tool_argument_accuracy_asks_once_per_call_over_one_shared_prefix(server):
    answer(server, {"tool call 1 (search_weather)": "No"})
    evaluator = ToolArgumentAccuracy(judge=server.judge_config())
    result = await evaluator.evaluate(weather_run(), EvalCase(input=TASK))
    assert (result.score, result.passed) == (0.5, False)
    questions = sorted(question_of(r) for r in server.requests)
    assert len(questions) == 2
    assert "tool call 1 (search_weather)" in questions[0]
    assert "tool call 2 (summarize)" in questions[1]
    prompt = server.requests[0].prompt
    assert TASK in prompt and '{"city": "Paris"}' in prompt and "18C and sunny" in prompt
    # Everything but the question is the same bytes: one cacheable prefix for the case.
    prefixes = {r.prompt.split("Question:")[0] for r in server.requests}
    assert len(prefixes) == 1
    assert result.details["measured_items"] == 2 and result.details["answered"] == 2


async def test_full_tool_results_reach_the_judge(server):
    long_result = "prefix " * 200 + "CRITICAL TAIL"
    await ToolCallNecessity(judge=server.judge_config()).evaluate(
        weather_run(long_result), EvalCase(input=TASK))
    assert all("CRITICAL TAIL" in r.prompt for r in server.requests)


@pytest.mark.parametrize("cls", [ToolArgumentAccuracy, ToolCallNecessity])
async def test_per_call_evaluators_skip_without_trace_or_tool_calls(server, cls):
    evaluator = cls(judge=server.judge_config())
    for run in (ExecutionResult(actual_response="done"), ExecutionResult(agent_trace=[]),
                ExecutionResult(agent_trace=[AgentStep(output="direct answer")])):
        result = await evaluator.evaluate(run, EvalCase(input=TASK))
        assert result.skipped and not result.passed
    assert server.request_count == 0


async def test_tool_call_necessity_scores_redundant_calls(server):
    answer(server, {"tool call 2": "No"})
    steps = [AgentStep(tool_calls=[ToolCall(name="lookup", arguments={"id": 1}, result="found")]),
             AgentStep(tool_calls=[ToolCall(name="lookup", arguments={"id": 1}, result="found")])]
    result = await ToolCallNecessity(judge=server.judge_config()).evaluate(
        ExecutionResult(agent_trace=steps, actual_response="found"), EvalCase(input="Find 1"))
    assert result.score == 0.5 and server.request_count == 2


async def test_step_faithfulness_judges_every_step_tools_or_not(server):
    answer(server, {"step 2 ": "No"})
    result = await StepFaithfulness(judge=server.judge_config()).evaluate(
        weather_run(), EvalCase(input=TASK))
    assert (result.score, result.passed) == (0.5, False)
    server.reset_record()
    thought_only = ExecutionResult(agent_trace=[AgentStep(thought="Answer directly")],
                                   actual_response="It is sunny")
    single = await StepFaithfulness(judge=server.judge_config()).evaluate(
        thought_only, EvalCase(input=TASK))
    assert single.score == 1.0 and server.request_count == 1
    skipped = await StepFaithfulness(judge=server.judge_config()).evaluate(
        ExecutionResult(agent_trace=[]), EvalCase(input=TASK))
    assert skipped.skipped


@pytest.mark.parametrize("cls", ITEMWISE)
async def test_a_trace_over_max_items_is_skipped_whole(server, cls):
    steps = [AgentStep(output=f"step-{i}", tool_calls=[ToolCall("lookup", {"id": i}, "found")])
             for i in range(9)]
    run = ExecutionResult(agent_trace=steps)
    skipped = await cls(judge=server.judge_config()).evaluate(run, EvalCase(input=TASK))
    assert skipped.skipped and not skipped.passed
    assert (skipped.details["requested_items"], skipped.details["measured_items"],
            skipped.details["max_items"]) == (9, 0, 8)
    assert "max_items=8" in skipped.reason and server.request_count == 0
    full = await cls(judge=server.judge_config(), max_items=9).evaluate(run, EvalCase(input=TASK))
    assert full.score == 1.0 and server.request_count == 9


@pytest.mark.parametrize("cls", ITEMWISE)
@pytest.mark.parametrize("limit", [0, -1, True, 1.5, None, "8"])
def test_invalid_max_items_is_refused(cls, limit):
    with pytest.raises(ValueError, match="max_items must be a positive integer"):
        cls(max_items=limit)


async def test_plan_quality_asks_five_questions_and_skips_without_steps(server):
    answer(server, {"redundant or unnecessary": "Yes", "logical order": "No"})
    result = await PlanQuality(judge=server.judge_config()).evaluate(weather_run(),
                                                                     EvalCase(input=TASK))
    assert server.request_count == 5
    assert result.score == pytest.approx(3 / 5)
    assert "Step 2" in server.requests[0].prompt
    for run in (ExecutionResult(actual_response="x"), ExecutionResult(agent_trace=[])):
        assert (await PlanQuality(judge=server.judge_config()).evaluate(
            run, EvalCase(input=TASK))).skipped
    assert server.request_count == 5


async def test_task_completion_is_judged_with_or_without_a_trace(server):
    answer(server, {"fail to complete": "No"})
    bare = await TaskCompletion(judge=server.judge_config()).evaluate(
        ExecutionResult(actual_response="Paris is sunny"), EvalCase(input=TASK))
    assert bare.score == 1.0 and server.request_count == 4
    assert "AGENT TRACE" not in server.requests[0].prompt
    server.reset_record()
    answer(server, {"fail to complete": "Yes"})
    traced_result = await TaskCompletion(judge=server.judge_config()).evaluate(
        weather_run(), EvalCase(input=TASK))
    assert traced_result.score == 0.75
    assert "AGENT TRACE" in server.requests[0].prompt


async def test_trajectory_efficiency_without_suspected_failures_asks_three(server):
    result = await TrajectoryEfficiency(judge=server.judge_config()).evaluate(
        weather_run(), EvalCase(input=TASK))
    # "the same tool called more than once with identical arguments?" Yes counts against.
    assert result.score == pytest.approx(2 / 3)
    assert server.request_count == 3 and "recovery" not in result.details


@pytest.mark.parametrize("recovered, expected_score, note", [
    ("No", pytest.approx(2 / 3 - 0.2), "did not recover"),
    ("Yes", pytest.approx(2 / 3), "recovered from 1"),
    ("Not sure", pytest.approx(2 / 3), "UNKNOWN"),
])
async def test_trajectory_efficiency_penalises_an_unrecovered_tool_error(
        server, recovered, expected_score, note):
    answer(server, {"word 'error'": recovered, "identical arguments": "No",
                    "proportionate": "No"})
    result = await TrajectoryEfficiency(judge=server.judge_config(), threshold=0.5).evaluate(
        weather_run("Error: timeout"), EvalCase(input=TASK))
    assert server.request_count == 4
    assert result.score == expected_score
    assert note in result.reason and result.details["suspected_failures"] == 1
    assert result.passed is (result.score >= 0.5)
    assert result.token_usage.requests == 4


async def test_a_panel_votes_on_the_recovery_question_too(server):
    """Two of three judges say the agent did not recover: the panel's penalty applies."""
    def responder(request):
        question = question_of(request)
        if "word 'error'" in question:
            return "Yes" if request.model == "judge-a" else "No"
        return "No" if ("identical arguments" in question or "proportionate" in question) else "Yes"
    server.set_reply(responder)
    panel = [server.judge_config(model=m) for m in ("judge-a", "judge-b", "judge-c")]
    result = await TrajectoryEfficiency(judge=panel, threshold=0.5).evaluate(
        weather_run("Error: timeout"), EvalCase(input=TASK))
    assert server.request_count == 3 * 4
    assert result.details["recovery"]["judges"] == {
        "openai/judge-a": "yes", "openai/judge-b": "no", "openai/judge-c": "no"}
    assert result.score == pytest.approx(2 / 3 - 0.2) and "did not recover" in result.reason
    assert result.token_usage.requests == 12


async def test_agent_memory_needs_context_and_checks_the_reference(server):
    skipped = await AgentMemoryEval(judge=server.judge_config()).evaluate(
        ExecutionResult(actual_response="x"), EvalCase(input="Units?"))
    assert skipped.skipped and "context" in skipped.reason and server.request_count == 0
    case = EvalCase(input="Which units do I like?", context="User prefers metric units.")
    await AgentMemoryEval(judge=server.judge_config()).evaluate(
        ExecutionResult(actual_response="Metric."), case)
    assert server.request_count == 3
    server.reset_record()
    answer(server, {"reference answer": "No", "does not contain": "No"})
    with_reference = EvalCase(input="Which units do I like?", context="User prefers metric units.",
                              expected_output="metric units, REFERENCE TAIL")
    result = await AgentMemoryEval(judge=server.judge_config()).evaluate(
        ExecutionResult(actual_response="Imperial."), with_reference)
    assert server.request_count == 4 and result.score == 0.75
    assert any("REFERENCE TAIL" in r.prompt for r in server.requests)


async def test_a_hedged_verdict_leaves_the_denominator(server):
    answer(server, {"tool call 2": "I cannot say yes or no."})
    result = await ToolArgumentAccuracy(judge=server.judge_config()).evaluate(
        weather_run(), EvalCase(input=TASK))
    assert (result.score, result.details["answered"], result.details["unknown"]) == (1.0, 1, 1)
    assert "UNKNOWN" in result.reason


@pytest.mark.parametrize("cls", JUDGED)
def test_unreadable_judge_is_a_judge_error_in_a_suite(server, cls):
    server.set_reply("Maybe")
    case = EvalCase(input=TASK, context="earlier: the user lives in Paris", case_id="c1")
    suite = EvalSuite("agents").add_cases([case]).add_evaluator(cls(judge=server.judge_config()))
    report = suite.run(lambda _: {"output": "sunny", "agent_trace": weather_steps()},
                       verbose=False, save=False)
    assert report.case_results[0].status == EvalStatus.JUDGE_ERROR
    assert report.evaluated == 0 and report.errors == 1


@pytest.mark.parametrize("cls", JUDGED)
async def test_the_given_judge_is_the_one_asked(server, cls):
    evaluator = cls(judge=server.judge_config(model="agent-judge-model"))
    case = EvalCase(input=TASK, context="earlier: the user lives in Paris")
    result = await evaluator.evaluate(weather_run(), case)
    assert not result.skipped and result.details["judge_model"] == "agent-judge-model"
    assert {r.model for r in server.requests} == {"agent-judge-model"}


async def test_batched_item_questions_go_in_one_request(server):
    server.set_reply('{"answers": {"1": "yes", "2": "no"}}')
    result = await ToolCallNecessity(judge=server.judge_config(), batch=True).evaluate(
        weather_run(), EvalCase(input=TASK))
    assert server.request_count == 1 and result.score == 0.5
    assert "tool call 2 (summarize)" in server.requests[0].prompt


def test_tool_call_by_position_as_multivons_dataclass():
    call = ToolCall("lookup", {"id": 1}, "found")
    assert (call.name, call.arguments, call.result) == ("lookup", {"id": 1}, "found")
    with pytest.raises(TypeError, match="at most 3 positional"):
        ToolCall("lookup", {}, None, "extra")
    with pytest.raises(TypeError, match="twice"):
        ToolCall("lookup", {"id": 1}, arguments={"id": 2})


def test_a_trace_recorded_with_the_case_is_kept_and_round_trips():
    case = EvalCase(input=TASK, agent_trace=weather_steps())
    assert case.agent_trace == weather_steps()
    assert EvalCase.model_validate(case.model_dump(mode="json")).agent_trace == weather_steps()
    assert EvalCase(input=TASK).agent_trace is None
    assert EvalCase(input=TASK, agent_trace=[]).agent_trace == []
    with pytest.raises(ValueError, match="agent_trace must be a list of AgentStep"):
        EvalCase(input=TASK, agent_trace="search_weather")


def test_a_trace_recorded_with_the_case_is_scored_when_the_run_records_none():
    # multivon's offline style: the case carries the trace, the model function only answers.
    case = EvalCase(input=TASK, expected_tool_calls=["search_weather", "summarize"],
                    agent_trace=weather_steps())
    report = EvalSuite("offline").add_cases([case]).add_evaluator(ToolCallAccuracy()).run(
        lambda _: "Paris is 18C and sunny.", verbose=False, save=False)
    assert report.case_results[0].results[0].score == 1.0
    # What the run itself did beats what was recorded with the case.
    report = EvalSuite("live").add_cases([case]).add_evaluator(ToolCallAccuracy()).run(
        lambda _: {"output": "sunny", "agent_trace": [
            AgentStep(tool_calls=[ToolCall(name="search_weather")])]},
        verbose=False, save=False)
    result = report.case_results[0].results[0]
    assert result.score == 0.5 and result.details["missing"] == ["summarize"]


async def test_a_judged_evaluator_reads_the_trace_recorded_with_the_case(server):
    case = EvalCase(input=TASK, agent_trace=weather_steps())
    result = await ToolArgumentAccuracy(judge=server.judge_config()).evaluate(
        ExecutionResult(actual_response="Paris: 18C, sunny"), case)
    assert result.details["measured_items"] == 2 and server.request_count == 2
    assert '{"city": "Paris"}' in server.requests[0].prompt


def test_a_recorded_trace_is_scored_through_run_on_cases():
    case = EvalCase(input=TASK, expected_tool_calls=["search_weather", "summarize"])
    report = EvalSuite("recorded").add_cases([case]).add_evaluator(ToolCallAccuracy()) \
        .run_on_cases([(case, ExecutionResult(agent_trace=weather_steps()))], verbose=False,
                      save=False)
    result = report.case_results[0]
    assert result.status == EvalStatus.PASSED and result.results[0].score == 1.0


async def test_every_trace_evaluator_of_a_case_shares_one_prompt_prefix(server):
    judge = server.judge_config()
    case = EvalCase(input=TASK)
    for evaluator in (ToolArgumentAccuracy(judge=judge), ToolCallNecessity(judge=judge),
                      StepFaithfulness(judge=judge), PlanQuality(judge=judge),
                      TaskCompletion(judge=judge), TrajectoryEfficiency(judge=judge)):
        await evaluator.evaluate(weather_run(), case)
    assert server.request_count == 2 + 2 + 2 + 5 + 4 + 3
    assert len({(r.system, r.prompt.split("Question:")[0]) for r in server.requests}) == 1
