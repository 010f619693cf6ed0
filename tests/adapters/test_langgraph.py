"""A real LangGraph graph (ChatOpenAI on the scripted server), scored by referee."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("langgraph")
langchain_openai = pytest.importorskip("langchain_openai")

from langchain_core.messages import SystemMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.graph import START, MessagesState, StateGraph  # noqa: E402
from langgraph.prebuilt import ToolNode, tools_condition  # noqa: E402

from referee import AgentEvaluator, EvalCase, Invocation, ToolCall  # noqa: E402
from referee.adapters import LangGraphAgent, execution_from_langgraph  # noqa: E402
from referee.config import CriteriaConfig, CriterionConfig, EvalConfig, MatchType  # noqa: E402
from referee.report.model import CaseStatus  # noqa: E402
from referee.testing import DUMMY_API_KEY, RecordedRequest, Reply, ScriptedJudgeServer  # noqa: E402


def weather_desk(request: RecordedRequest) -> Reply | str:
    if request.tool_outputs:
        return f"Forecast: {request.tool_outputs[-1]}."
    city = re.findall(r"in (\w+)\?", request.prompt)[-1]
    return Reply.calling(("get_weather", {"city": city}))


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def build_graph(server: ScriptedJudgeServer, checkpointer=None):
    model = langchain_openai.ChatOpenAI(model="scripted", base_url=server.base_url(),
                                        api_key=DUMMY_API_KEY, max_retries=0).bind_tools(
        [get_weather])

    def guard(state: MessagesState) -> dict:
        return {"messages": [SystemMessage("Answer about the weather only.")]} if not any(
            m.type == "system" for m in state["messages"]) else {}

    def agent(state: MessagesState) -> dict:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("guard", guard)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([get_weather]))
    graph.add_edge(START, "guard")
    graph.add_edge("guard", "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)


@pytest.fixture
def server():
    with ScriptedJudgeServer(weather_desk) as srv:
        yield srv


def test_a_graph_run_becomes_node_visits_tool_calls_and_results(server):
    execution = execution_from_langgraph(
        build_graph(server), {"messages": [{"role": "user", "content": "Weather in Oslo?"}]})

    assert execution.node_visits == ["guard", "agent", "tools", "agent"]
    assert [(c.name, c.args, c.result) for c in execution.tool_calls] == [
        ("get_weather", {"city": "Oslo"}, "sunny in Oslo")]
    assert execution.actual_response == "Forecast: sunny in Oslo."
    assert execution.token_usage is not None and execution.token_usage.requests == 2


async def test_agent_evaluator_scores_a_multi_turn_langgraph_run(server):
    config = EvalConfig(criteria=CriteriaConfig(
        trajectory=CriterionConfig.trajectory(match_type=MatchType.EXACT, check_args=True),
        node_order=CriterionConfig.node_order(match_type=MatchType.EXACT)))
    evaluator = AgentEvaluator(LangGraphAgent(build_graph(server)), config=config, save=False)

    def case(second_city: str) -> EvalCase:
        return EvalCase.multi_turn([
            Invocation(user_content="Weather in Oslo?",
                       expected_tool_trajectory=[ToolCall(name="get_weather",
                                                          args={"city": "Oslo"})],
                       expected_node_order=["guard", "agent", "tools", "agent"]),
            Invocation(user_content="And in Bergen?",
                       expected_tool_trajectory=[ToolCall(name="get_weather",
                                                          args={"city": second_city})],
                       expected_node_order=["guard", "agent", "tools", "agent"]),
        ])

    report = await evaluator.evaluate([case("Bergen"), case("Paris")], verbose=False,
                                      parallel=False)

    good, wrong_args = report.cases
    assert good.status == CaseStatus.PASSED, good.criterion_results
    assert [t.response for t in good.execution.turns] == [
        "Forecast: sunny in Oslo.", "Forecast: sunny in Bergen."]
    # Turn two's tool calls are its own: turn one's call is not counted twice.
    assert [c.args["city"] for c in good.execution.tool_calls] == ["Oslo", "Bergen"]
    assert wrong_args.status == CaseStatus.FAILED
    # The second turn started from the first turn's messages.
    second = [r for r in server.requests if "Bergen" in r.prompt][0]
    assert "Weather in Oslo?" in second.prompt


async def test_a_checkpointed_graph_gets_a_thread_per_case_and_per_run(server):
    from langgraph.checkpoint.memory import MemorySaver

    agent = LangGraphAgent(build_graph(server, checkpointer=MemorySaver()),
                           config={"configurable": {"thread_id": "shared"}, "tags": ["eval"]})
    evaluator = AgentEvaluator(agent, config=EvalConfig(criteria=CriteriaConfig(
        trajectory=CriterionConfig.trajectory(match_type=MatchType.EXACT, check_args=True))),
        save=False)

    def case(first: str, second: str) -> EvalCase:
        return EvalCase.multi_turn([
            Invocation(user_content=f"Weather in {first}?", expected_tool_trajectory=[
                ToolCall(name="get_weather", args={"city": first})]),
            Invocation(user_content=f"And in {second}?", expected_tool_trajectory=[
                ToolCall(name="get_weather", args={"city": second})]),
        ])

    cases = [case("Oslo", "Bergen"), case("Rome", "Milan")]
    first_run = await evaluator.evaluate(cases, verbose=False, max_concurrency=2)
    again = await evaluator.evaluate(cases, verbose=False, max_concurrency=2)

    for report in (first_run, again):
        assert [c.status for c in report.cases] == [CaseStatus.PASSED] * 2, [
            c.error or c.criterion_results for c in report.cases]
        assert [[t.user_content for t in c.execution.turns] for c in report.cases] == [
            ["Weather in Oslo?", "And in Bergen?"], ["Weather in Rome?", "And in Milan?"]]
    # The thread kept turn one for turn two; a case's thread never saw another case or run.
    bergen = [r for r in server.requests if "Bergen" in r.prompt]
    assert bergen and all("Oslo" in r.prompt and "Rome" not in r.prompt for r in bergen)
    assert all(r.prompt.count("Weather in Oslo?") == 1 for r in bergen)


def test_prompt_cache_reads_are_recorded(server):
    # A long first message: the run's second model call reads it from the prompt cache.
    question = "Weather in Oslo? " + "Answer briefly. " * 600
    execution = execution_from_langgraph(
        build_graph(server), {"messages": [{"role": "user", "content": question}]})

    usage = execution.token_usage
    assert usage.requests == 2
    assert 0 < usage.cached_input_tokens < usage.input_tokens
