"""The OpenAI Agents SDK, run for real against the scripted server, scored by referee."""

from __future__ import annotations

import re

import pytest

agents = pytest.importorskip("agents")

from openai import AsyncOpenAI  # noqa: E402

from referee import AgentEvaluator, EvalCase, Invocation, ToolCall  # noqa: E402
from referee.adapters import OpenAIAgentsAgent, execution_from_run_result  # noqa: E402
from referee.config import CriteriaConfig, CriterionConfig, EvalConfig, MatchType  # noqa: E402
from referee.report.model import CaseStatus  # noqa: E402
from referee.testing import DUMMY_API_KEY, RecordedRequest, Reply, ScriptedJudgeServer  # noqa: E402

NO_TRACING = agents.RunConfig(tracing_disabled=True)  # the SDK would otherwise export to OpenAI


def billing_desk(request: RecordedRequest) -> Reply | str:
    """Triage hands off to billing; billing looks the invoice up once, then answers."""
    if "You triage" in (request.system or ""):
        return Reply.calling(("transfer_to_billing", {}))
    looked_up = [out for out in request.tool_outputs if "paid" in out]  # not the handoff's
    if looked_up:
        return f"Your invoice: {looked_up[-1]}."
    invoice = re.findall(r"INV-\d+", request.prompt)[-1]
    return Reply.calling(("lookup_invoice", {"invoice": invoice}))


@pytest.fixture
def server():
    with ScriptedJudgeServer(billing_desk) as srv:
        yield srv


def build_agents(server: ScriptedJudgeServer, api: str) -> agents.Agent:
    client = AsyncOpenAI(base_url=server.base_url(), api_key=DUMMY_API_KEY)
    model = (agents.OpenAIResponsesModel("scripted", client) if api == "responses"
             else agents.OpenAIChatCompletionsModel("scripted", client))

    @agents.function_tool
    def lookup_invoice(invoice: str) -> str:
        """Look an invoice up."""
        return f"{invoice} is paid"

    billing = agents.Agent(name="billing", instructions="You handle billing",
                           tools=[lookup_invoice], model=model)
    return agents.Agent(name="triage", instructions="You triage", handoffs=[billing], model=model)


@pytest.mark.parametrize("api", ["responses", "chat_completions"])
async def test_run_result_becomes_the_trajectory_referee_scores(server, api):
    triage = build_agents(server, api)
    result = await agents.Runner.run(triage, "Is INV-7 paid?", run_config=NO_TRACING)

    execution = execution_from_run_result(result)

    assert execution.node_visits == ["triage", "billing"]  # the handoff is a node visit
    assert [(c.name, c.args, c.result) for c in execution.tool_calls] == [
        ("lookup_invoice", {"invoice": "INV-7"}, "INV-7 is paid")]
    assert execution.tool_calls[0].call_id
    assert execution.actual_response == "Your invoice: INV-7 is paid."
    assert execution.token_usage is not None and execution.token_usage.requests == 3
    expected_path = "/v1/responses" if api == "responses" else "/v1/chat/completions"
    assert {r.path for r in server.requests} == {expected_path}


def _config(node_match: MatchType = MatchType.EXACT) -> EvalConfig:
    return EvalConfig(criteria=CriteriaConfig(
        trajectory=CriterionConfig.trajectory(match_type=MatchType.EXACT, check_args=True),
        node_order=CriterionConfig.node_order(match_type=node_match)))


def _two_turn_case(second_nodes: list[str]) -> EvalCase:
    return EvalCase.multi_turn([
        Invocation(user_content="Is INV-7 paid?",
                   expected_tool_trajectory=[ToolCall(name="lookup_invoice",
                                                      args={"invoice": "INV-7"})],
                   expected_node_order=["triage", "billing"]),
        Invocation(user_content="And INV-8?",
                   expected_tool_trajectory=[ToolCall(name="lookup_invoice",
                                                      args={"invoice": "INV-8"})],
                   expected_node_order=second_nodes),
    ])


async def test_agent_evaluator_scores_a_multi_turn_agents_sdk_run(server):
    agent = OpenAIAgentsAgent(build_agents(server, "responses"), run_config=NO_TRACING)
    evaluator = AgentEvaluator(agent, config=_config(), save=False)
    good = _two_turn_case(["triage", "billing"])
    wrong_nodes = _two_turn_case(["billing"])

    report = await evaluator.evaluate([good, wrong_nodes], verbose=False, parallel=False)

    passed, failed = report.cases
    assert passed.status == CaseStatus.PASSED, passed.criterion_results
    assert [t.node_visits for t in passed.execution.turns] == [["triage", "billing"]] * 2
    assert failed.status == CaseStatus.FAILED
    assert {r.criterion: r.passed for r in failed.criterion_results} == {
        "tool_trajectory_avg_score": True, "node_order_score": False}
    # The second turn continued from to_input_list(): its first request carries turn one.
    second_turn = [r for r in server.requests if "And INV-8?" in r.prompt][0]
    assert "Is INV-7 paid?" in second_turn.prompt
    assert "INV-7 is paid" in str(second_turn.body["input"])


def test_a_later_turn_without_its_first_is_refused():
    from referee.execution import TurnResult

    agent = OpenAIAgentsAgent(agents.Agent(name="solo"))
    with pytest.raises(RuntimeError, match="turn 2 of a conversation"):
        import asyncio

        asyncio.run(agent("hello again", [TurnResult(user_content="hi", response="hey")]))


async def test_a_later_turn_can_continue_with_the_agent_that_ended_the_last(server):
    agent = OpenAIAgentsAgent(build_agents(server, "responses"), run_config=NO_TRACING,
                              continue_with_last_agent=True)
    evaluator = AgentEvaluator(agent, config=_config(), save=False)

    report = await evaluator.evaluate([_two_turn_case(["billing"])], verbose=False)

    (case,) = report.cases
    assert case.status == CaseStatus.PASSED, case.criterion_results
    # Turn two went straight to billing, the agent triage had handed the customer to.
    assert [t.node_visits for t in case.execution.turns] == [["triage", "billing"], ["billing"]]


async def test_prompt_cache_reads_are_recorded(server):
    client = AsyncOpenAI(base_url=server.base_url(), api_key=DUMMY_API_KEY)

    @agents.function_tool
    def lookup_invoice(invoice: str) -> str:
        """Look an invoice up."""
        return f"{invoice} is paid"

    # A long fixed prefix: the second request of the run reads it from the prompt cache.
    billing = agents.Agent(name="billing", instructions="You handle billing. " + "Be exact. " * 900,
                           tools=[lookup_invoice],
                           model=agents.OpenAIResponsesModel("scripted", client))
    result = await agents.Runner.run(billing, "Is INV-7 paid?", run_config=NO_TRACING)

    usage = execution_from_run_result(result).token_usage
    assert usage.requests == 2
    assert 0 < usage.cached_input_tokens < usage.input_tokens
    sdk_usage = result.context_wrapper.usage
    assert usage.cached_input_tokens == sdk_usage.input_tokens_details.cached_tokens


# Agents used as tools ----------------------------------------------------------------------------

async def test_agents_used_as_tools_are_recorded_under_their_call_with_tracing_off(tmp_path):
    from agent_tool_desk import build_orchestrator, delegation_case, desk, expected_nesting, nesting

    from referee.case import flattened
    from referee.report.store import load_run

    with ScriptedJudgeServer(desk) as desk_server:
        model = agents.OpenAIResponsesModel(
            "scripted", AsyncOpenAI(base_url=desk_server.base_url(), api_key=DUMMY_API_KEY))
        orchestrator = build_orchestrator(agents, model)
        report = await AgentEvaluator(
            OpenAIAgentsAgent(orchestrator, run_config=NO_TRACING), config=_config(),
            runs_dir=tmp_path).evaluate([delegation_case()], verbose=False)

    (case,) = report.cases
    execution = case.execution
    assert case.status == CaseStatus.PASSED, case.criterion_results  # one call per agent tool
    assert nesting(execution.tool_calls) == expected_nesting()
    assert execution.node_visits == ["orchestrator"]  # an agent tool never takes control
    ids = [call.call_id for call in flattened(execution.tool_calls)]
    assert all(ids) and len(set(ids)) == len(ids) == 8  # each call its own id, to any depth
    # The inner calls are stored in cases.jsonl and read back.
    (stored,) = load_run(report.metadata["run_dir"]).cases
    assert stored.execution.tool_calls == execution.tool_calls


async def test_a_handoff_inside_an_agent_tool_is_a_visit_of_its_inner_run():
    from agent_tool_desk import SUPPORT_NESTING, build_support, nesting, support_desk

    class OwnHooks(agents.AgentHooks):
        def __init__(self) -> None:
            self.ended: list[tuple[str, str, str]] = []

        async def on_tool_end(self, context, agent, tool, result) -> None:
            self.ended.append((agent.name, tool.name, result))

    own = OwnHooks()
    with ScriptedJudgeServer(support_desk) as desk_server:
        model = agents.OpenAIResponsesModel(
            "scripted", AsyncOpenAI(base_url=desk_server.base_url(), api_key=DUMMY_API_KEY))
        adapter = OpenAIAgentsAgent(build_support(agents, model, own), run_config=NO_TRACING)
        execution = await adapter("Refund me 5", [])
        # Outside the adapter, the agents run as before and nothing is recorded.
        plain = await agents.Runner.run(adapter.agent, "Refund me 5", run_config=NO_TRACING)

    assert nesting(execution.tool_calls) == SUPPORT_NESTING
    assert execution.node_visits == ["orchestrator"]
    assert own.ended == [("refunds", "refund", "refunded 5")] * 2  # the user's hooks still run
    assert nesting(execution_from_run_result(plain).tool_calls) == [
        (*SUPPORT_NESTING[0][:3], [], [])]


async def test_a_run_started_by_the_user_records_agent_tools_within_recording_agent_tools():
    from agent_tool_desk import build_orchestrator, desk, expected_nesting, nesting

    from referee.adapters import recording_agent_tools

    with ScriptedJudgeServer(desk) as desk_server:
        model = agents.OpenAIResponsesModel(
            "scripted", AsyncOpenAI(base_url=desk_server.base_url(), api_key=DUMMY_API_KEY))
        orchestrator = build_orchestrator(agents, model)
        with recording_agent_tools(orchestrator) as agent_tool_runs:
            result = await agents.Runner.run(orchestrator, "Are INV-7 and INV-8 paid?",
                                             run_config=NO_TRACING)

    execution = execution_from_run_result(result, agent_tool_runs)

    assert nesting(execution.tool_calls) == expected_nesting()
