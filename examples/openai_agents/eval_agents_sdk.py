"""Evaluate an OpenAI Agents SDK agent with referee: tool calls, handoffs, two turns.

    pip install 'referee[openai-agents]'
    python examples/openai_agents/eval_agents_sdk.py

It runs offline: the agents' model is referee's scripted OpenAI-compatible server on
127.0.0.1, so no key and no network are needed. To evaluate the real agent, build it with your
own model (drop ``model=``) and keep the rest: ``OpenAIAgentsAgent`` turns each ``Runner.run``
into the trajectory (tool calls, results), node order (the agents that held control) and usage
that referee scores, and carries ``to_input_list()`` from one turn to the next.
"""

from __future__ import annotations

import re
import sys

from agents import Agent, OpenAIResponsesModel, RunConfig, function_tool
from openai import AsyncOpenAI

from referee import AgentEvaluator, EvalCase, Invocation, ToolCall
from referee.adapters import OpenAIAgentsAgent
from referee.config import CriteriaConfig, CriterionConfig, EvalConfig, MatchType
from referee.report.model import EvalReport
from referee.testing import DUMMY_API_KEY, RecordedRequest, Reply, ScriptedJudgeServer

ORDERS = {"1001": "shipped", "1002": "being packed"}


@function_tool
def lookup_order(order_id: str) -> str:
    """The status of an order."""
    return ORDERS.get(order_id, "unknown")


def scripted_model(request: RecordedRequest) -> Reply | str:
    """What the stand-in model answers: triage hands off, orders looks the order up once."""
    if "You route" in (request.system or ""):
        return Reply.calling(("transfer_to_orders", {}))
    statuses = [out for out in request.tool_outputs if out in ORDERS.values()]
    order_id = re.findall(r"\d{4}", request.prompt)[-1]
    if statuses:
        return f"Order {order_id} is {statuses[-1]}."
    return Reply.calling(("lookup_order", {"order_id": order_id}))


def build_agent(client: AsyncOpenAI) -> Agent:
    model = OpenAIResponsesModel("scripted-model", client)
    orders = Agent(name="orders", instructions="You answer order questions.",
                   tools=[lookup_order], model=model)
    return Agent(name="triage", instructions="You route customers.", handoffs=[orders],
                 model=model)


CASES = [
    EvalCase.multi_turn([
        Invocation(user_content="Where is order 1001?",
                   expected_final_response="Order 1001 is shipped.",
                   expected_tool_trajectory=[ToolCall(name="lookup_order",
                                                      args={"order_id": "1001"})],
                   expected_node_order=["triage", "orders"]),
        Invocation(user_content="And order 1002?",
                   expected_final_response="Order 1002 is being packed.",
                   expected_tool_trajectory=[ToolCall(name="lookup_order",
                                                      args={"order_id": "1002"})],
                   expected_node_order=["triage", "orders"]),
    ], eval_id="two-orders"),
]

CONFIG = EvalConfig(criteria=CriteriaConfig(
    trajectory=CriterionConfig.trajectory(match_type=MatchType.EXACT, check_args=True),
    node_order=CriterionConfig.node_order(match_type=MatchType.EXACT),
    rouge_match=CriterionConfig(threshold=0.8)))


def main(save: bool = False, verbose: bool = False) -> EvalReport:
    """The report; ``save`` stores the run under .referee/runs, ``verbose`` prints its summary."""
    with ScriptedJudgeServer(scripted_model) as server:
        client = AsyncOpenAI(base_url=server.base_url(), api_key=DUMMY_API_KEY)
        # tracing_disabled: the SDK would otherwise send traces to OpenAI.
        agent = OpenAIAgentsAgent(build_agent(client), run_config=RunConfig(tracing_disabled=True))
        evaluator = AgentEvaluator(agent, config=CONFIG, save=save)
        return evaluator.evaluate_sync(CASES, verbose=verbose)


if __name__ == "__main__":
    # Prints the summary and where the run is stored (`referee view` opens it).
    sys.exit(0 if main(save=True, verbose=True).failed == 0 else 1)
