"""Evaluate a LangGraph agent with referee: node order, tool calls and results, two turns.

    pip install 'referee[langgraph]' langchain-openai
    python examples/langgraph/eval_langgraph.py

It runs offline: the graph's chat model is referee's scripted OpenAI-compatible server on
127.0.0.1, so no key and no network are needed. For your own graph, pass the compiled graph to
``LangGraphAgent``: the graph's steps become the node visits, ``AIMessage.tool_calls`` the
trajectory and ``ToolMessage``s the results; later turns start from the earlier messages.
"""

from __future__ import annotations

import re
import sys

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from referee import AgentEvaluator, EvalCase, Invocation, ToolCall
from referee.adapters import LangGraphAgent
from referee.config import CriteriaConfig, CriterionConfig, EvalConfig, MatchType
from referee.report.model import EvalReport
from referee.testing import DUMMY_API_KEY, RecordedRequest, Reply, ScriptedJudgeServer

STOCK = {"keyboard": 4, "mouse": 0}


@tool
def check_stock(item: str) -> int:
    """How many of an item are in stock."""
    return STOCK.get(item, 0)


def scripted_model(request: RecordedRequest) -> Reply | str:
    """The stand-in chat model: one stock lookup per question, then the answer."""
    item = re.findall(r"(keyboard|mouse)", request.prompt)[-1]
    if request.tool_outputs:
        return f"We have {request.tool_outputs[-1]} of the {item} in stock."
    return Reply.calling(("check_stock", {"item": item}))


def build_graph(base_url: str):
    model = ChatOpenAI(model="scripted-model", base_url=base_url, api_key=DUMMY_API_KEY,
                       max_retries=0).bind_tools([check_stock])

    def assistant(state: MessagesState) -> dict:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("assistant", assistant)
    graph.add_node("tools", ToolNode([check_stock]))
    graph.add_edge(START, "assistant")
    graph.add_conditional_edges("assistant", tools_condition)
    graph.add_edge("tools", "assistant")
    return graph.compile()


CASES = [
    EvalCase.multi_turn([
        Invocation(user_content="Is the keyboard in stock?",
                   expected_final_response="We have 4 of the keyboard in stock.",
                   expected_tool_trajectory=[ToolCall(name="check_stock",
                                                      args={"item": "keyboard"})],
                   expected_node_order=["assistant", "tools", "assistant"]),
        Invocation(user_content="And the mouse?",
                   expected_final_response="We have 0 of the mouse in stock.",
                   expected_tool_trajectory=[ToolCall(name="check_stock",
                                                      args={"item": "mouse"})],
                   expected_node_order=["assistant", "tools", "assistant"]),
    ], eval_id="stock-questions"),
]

CONFIG = EvalConfig(criteria=CriteriaConfig(
    trajectory=CriterionConfig.trajectory(match_type=MatchType.EXACT, check_args=True),
    node_order=CriterionConfig.node_order(match_type=MatchType.EXACT),
    rouge_match=CriterionConfig(threshold=0.8)))


def main(save: bool = False, verbose: bool = False) -> EvalReport:
    """The report; ``save`` stores the run under .referee/runs, ``verbose`` prints its summary."""
    with ScriptedJudgeServer(scripted_model) as server:
        agent = LangGraphAgent(build_graph(server.base_url()))
        evaluator = AgentEvaluator(agent, config=CONFIG, save=save)
        return evaluator.evaluate_sync(CASES, verbose=verbose)


if __name__ == "__main__":
    # Prints the summary and where the run is stored (`referee view` opens it).
    sys.exit(0 if main(save=True, verbose=True).failed == 0 else 1)
