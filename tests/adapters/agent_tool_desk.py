"""An Agents SDK orchestrator that delegates to agents used as tools, and its scripted model.

The orchestrator asks a researcher agent (``as_tool``) about two invoices at once (parallel
calls); each researcher looks its invoice up (a dict result), then asks a checker agent, itself
a tool of the researcher, which verifies it: agent tools inside agent tools, run in parallel.
"""

from __future__ import annotations

import re
from typing import Any

from referee import EvalCase, Invocation, ToolCall
from referee.testing import RecordedRequest, Reply

INVOICES = ("INV-7", "INV-8")
ANSWER = "Summary: INV-7 is paid and verified; INV-8 is paid and verified."


def desk(request: RecordedRequest) -> Reply | str:
    system = request.system or ""
    outputs = request.tool_outputs
    if "You orchestrate" in system:
        if not outputs:
            return Reply.calling(*(("ask_researcher", {"input": f"Check {i}"})
                                   for i in INVOICES))
        return ANSWER
    invoice = re.findall(r"INV-\d+", request.prompt)[0]
    if "You research" in system:
        if not outputs:
            return Reply.calling(("lookup_invoice", {"invoice": invoice}))
        if len(outputs) == 1:
            return Reply.calling(("ask_checker", {"input": invoice}))
        return f"{invoice} is paid and verified"
    if not outputs:  # the checker
        return Reply.calling(("verify", {"invoice": invoice}))
    return f"{invoice} verified"


def build_orchestrator(agents: Any, model: Any) -> Any:
    @agents.function_tool
    def lookup_invoice(invoice: str) -> dict:
        """Look an invoice up."""
        return {"invoice": invoice, "status": "paid"}

    @agents.function_tool
    def verify(invoice: str) -> str:
        """Verify an invoice."""
        return f"{invoice} checks out"

    checker = agents.Agent(name="checker", instructions="You check invoices.", tools=[verify],
                           model=model)
    researcher = agents.Agent(
        name="researcher", instructions="You research invoices.", model=model,
        tools=[lookup_invoice, checker.as_tool(tool_name="ask_checker",
                                               tool_description="Ask the checker.")])
    return agents.Agent(
        name="orchestrator", instructions="You orchestrate.", model=model,
        tools=[researcher.as_tool(tool_name="ask_researcher",
                                  tool_description="Ask the researcher.")])


def expected_nesting() -> list[tuple[Any, ...]]:
    """(name, args, result, nested visits, nested calls) of the orchestrator's calls."""
    def research(invoice: str) -> tuple[Any, ...]:
        return ("ask_researcher", {"input": f"Check {invoice}"},
                f"{invoice} is paid and verified", ["researcher"], [
                    ("lookup_invoice", {"invoice": invoice},
                     {"invoice": invoice, "status": "paid"}, [], []),
                    ("ask_checker", {"input": invoice}, f"{invoice} verified", ["checker"], [
                        ("verify", {"invoice": invoice}, f"{invoice} checks out", [], [])])])

    return [research(invoice) for invoice in INVOICES]


def nesting(calls: list[ToolCall]) -> list[tuple[Any, ...]]:
    return [(c.name, c.args, c.result, c.nested_node_visits, nesting(c.nested_calls))
            for c in calls]


def delegation_case() -> EvalCase:
    """Expects the orchestrator's own calls: an agent tool counts once by default."""
    return EvalCase.multi_turn([Invocation(
        user_content="Are INV-7 and INV-8 paid?", expected_final_response=ANSWER,
        expected_tool_trajectory=[ToolCall(name="ask_researcher", args={"input": f"Check {i}"})
                                  for i in INVOICES],
        expected_node_order=["orchestrator"])], eval_id="delegation")


# An agent tool whose agent hands off inside its own run ------------------------------------------

def support_desk(request: RecordedRequest) -> Reply | str:
    system, outputs = request.system or "", request.tool_outputs
    if "You orchestrate" in system:
        return f"Done: {outputs[-1]}" if outputs else Reply.calling(
            ("ask_support", {"input": "Refund 5"}))
    if "You triage" in system:
        return Reply.calling(("transfer_to_refunds", {}))
    if any("refunded" in out for out in outputs):  # refunds, after its tool answered
        return "Refund made"
    return Reply.calling(("refund", {"amount": 5}))


def build_support(agents: Any, model: Any, refund_hooks: Any = None) -> Any:
    @agents.function_tool
    def refund(amount: int) -> str:
        """Refund an amount."""
        return f"refunded {amount}"

    refunds = agents.Agent(name="refunds", instructions="You refund.", tools=[refund],
                           model=model, hooks=refund_hooks)
    triage = agents.Agent(name="support_triage", instructions="You triage.", handoffs=[refunds],
                          model=model)
    return agents.Agent(name="orchestrator", instructions="You orchestrate.", model=model,
                        tools=[triage.as_tool(tool_name="ask_support",
                                              tool_description="Ask support.")])


SUPPORT_NESTING = [("ask_support", {"input": "Refund 5"}, "Refund made",
                    ["support_triage", "refunds"],
                    [("refund", {"amount": 5}, "refunded 5", [], [])])]


def support_case() -> EvalCase:
    return EvalCase.multi_turn([Invocation(
        user_content="Refund me 5", expected_final_response="Done: Refund made",
        expected_tool_trajectory=[ToolCall(name="ask_support", args={"input": "Refund 5"})],
        expected_node_order=["orchestrator"])], eval_id="support")
