"""Driving an agent through the turns of one case: the part of an agent run that both
AgentEvaluator (run/agent.py) and the user simulator (run/simulator.py) need, kept apart so that
neither front door imports the other back.

The agent under test is any callable, sync or async::

    def agent(user_message: str, history: list[TurnResult]) -> ExecutionResult | str | dict
    def agent(user_message: str) -> ...          # a one-argument agent keeps its own state

A turn holding an image or a PDF is sent as its parts, and its ``TurnResult.user_content`` in
the later turns' history holds the same parts, so an agent that rebuilds the conversation from
its history sends the model the earlier turns' images too.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from referee.case import EvalCase
from referee.content._parts import DocumentPart, ImagePart, distinct_parts
from referee.execution import ExecutionResult, TurnResult
from referee.run.engine import ModelCaller
from referee.usage import TokenUsage

AgentFn = Callable[..., Any]


def takes_history(agent: AgentFn) -> bool:
    """Whether ``agent`` accepts a second positional argument (the history)."""
    try:
        signature = inspect.signature(agent)
    except (TypeError, ValueError):  # some builtins and C callables have no signature
        return True
    positional = 0
    for param in signature.parameters.values():
        if param.kind == param.VAR_POSITIONAL:
            return True
        if param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
            positional += 1
    return positional >= 2


class AgentError(RuntimeError):
    """The agent reported a failure on one turn (ExecutionResult.error)."""


async def run_conversation(agent: AgentFn, case: EvalCase, caller: ModelCaller) -> ExecutionResult:
    """Drive ``agent`` through every turn of ``case`` and merge the turns into one result."""
    with_history = takes_history(agent)
    turns: list[TurnResult] = []
    tool_calls = []
    node_visits: list[str] = []
    usages: list[TokenUsage | None] = []
    metadata: dict[str, Any] = {}
    outputs: list[ImagePart | DocumentPart] = []
    for number, invocation in enumerate(case.conversation, start=1):
        # An agent is sent the turn's parts when it holds an image or a PDF, else its text.
        sent = invocation.user_parts or invocation.user_text
        args = (sent, list(turns)) if with_history else (sent,)
        result = ExecutionResult.coerce(await caller.call(agent, *args))
        if result.error:
            raise AgentError(f"turn {number}: {result.error}")
        turns.append(TurnResult(user_content=sent, response=result.actual_response,
                                tool_calls=list(result.tool_calls),
                                node_visits=list(result.node_visits)))
        tool_calls.extend(result.tool_calls)
        node_visits.extend(result.node_visits)
        usages.append(result.token_usage)
        metadata.update(result.metadata)
        outputs.extend(result.outputs)
    return ExecutionResult(
        actual_response=turns[-1].response if turns else "",
        tool_calls=tool_calls, node_visits=node_visits,
        turns=turns if len(turns) > 1 else [],  # a single turn is the result itself
        token_usage=TokenUsage.total(usages),
        metadata=metadata, outputs=distinct_parts(outputs),
    )
