"""OpenAI Agents SDK (``openai-agents``) -> ExecutionResult. Extra: ``referee[openai-agents]``.

Tool calls come from ``ToolCallItem``s and their results from ``ToolCallOutputItem``s (matched by
call id); the agents that held control (the first, then each handoff's target) are the node
visits; usage is the run's ``context_wrapper.usage``. Later turns continue from
``to_input_list()``. An agent used as a tool (``Agent.as_tool``) is one call of its caller, with
the inner agents' visits and calls nested under it (``_agent_tools``); ``OpenAIAgentsAgent``
records those, as a finished ``RunResult`` does not hold them.
"""

from __future__ import annotations

import json
from typing import Any

from referee.adapters._agent_tools import EXTRA, InnerRun, install, recording_agent_tools
from referee.adapters._base import require_extra
from referee.adapters._conversation import NativeHistory
from referee.adapters._media import responses_input, turn_parts
from referee.adapters._messages import parse_arguments, parse_result
from referee.case import ToolCall, content_text
from referee.execution import ExecutionResult, TurnResult
from referee.usage import TokenUsage


def _final_text(output: Any) -> str:
    if output is None or isinstance(output, str):
        return output or ""
    if hasattr(output, "model_dump_json"):
        return str(output.model_dump_json())
    return json.dumps(output, default=str)


def _raw_field(raw: Any, *names: str) -> Any:
    """A field of a raw Responses item, which the SDK keeps as a model or a plain dict."""
    for name in names:
        value = raw.get(name) if isinstance(raw, dict) else getattr(raw, name, None)
        if value is not None:
            return value
    return None


def execution_from_run_result(result: Any,
                              agent_tool_runs: InnerRun | None = None) -> ExecutionResult:
    """A finished ``Runner.run`` result as referee's ExecutionResult; with what
    ``recording_agent_tools`` recorded around the run, each agent tool's call carries its
    inner run (a finished result does not keep it)."""
    items = require_extra("agents.items", EXTRA)
    calls: list[ToolCall] = []
    by_id: dict[str, ToolCall] = {}
    visits: list[str] = []
    for item in result.new_items:
        if not visits and getattr(item, "agent", None) is not None:
            visits.append(item.agent.name)  # the agent that started the run
        if isinstance(item, items.ToolCallItem):
            name = _raw_field(item.raw_item, "name") or type(item.raw_item).__name__
            call = ToolCall(name=name,
                            args=parse_arguments(_raw_field(item.raw_item, "arguments"),
                                                 "openai-agents run", f"{name}.arguments"),
                            call_id=_raw_field(item.raw_item, "call_id", "id"))
            calls.append(call)
            if call.call_id is not None:
                by_id[call.call_id] = call
        elif (isinstance(item, items.ToolCallOutputItem)
              and _raw_field(item.raw_item, "call_id", "id") in by_id):
            by_id[_raw_field(item.raw_item, "call_id", "id")].result = parse_result(item.output)
        elif isinstance(item, items.HandoffOutputItem):
            visits.append(item.target_agent.name)
    if not visits and getattr(result, "last_agent", None) is not None:
        visits.append(result.last_agent.name)
    if agent_tool_runs is not None:
        agent_tool_runs.nest_into(calls)
    usage = getattr(getattr(result, "context_wrapper", None), "usage", None)
    return ExecutionResult(
        actual_response=_final_text(result.final_output), tool_calls=calls, node_visits=visits,
        token_usage=_usage(usage) if usage is not None else None)


def _usage(usage: Any) -> TokenUsage:
    details = getattr(usage, "input_tokens_details", None)
    return TokenUsage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                      requests=usage.requests,
                      cached_input_tokens=getattr(details, "cached_tokens", None) or 0)


class OpenAIAgentsAgent:
    """An Agents SDK ``Agent`` as AgentEvaluator's agent under test, turn by turn.

    ``run_config``, ``max_turns`` and ``context`` go to ``Runner.run`` unchanged. Each later turn
    starts from the previous turn's ``to_input_list()`` plus the new user message, with
    ``agent``; ``continue_with_last_agent=True`` starts it with the agent that ended the previous
    turn (``result.last_agent``), as a chat loop that stays with the agent it was handed to.
    ``to_input_list()`` holds the earlier turns' images and PDFs as each turn sent them.

    Agents used as tools (``Agent.as_tool``) are recorded under their call, to any depth: the
    adapter wraps each agent tool's invoker and adds pass-through ``hooks`` to the agents that
    run as tools (once; they record only inside this adapter's runs, and trace nothing).
    """

    def __init__(self, agent: Any, *, run_config: Any = None, max_turns: int | None = None,
                 context: Any = None, continue_with_last_agent: bool = False) -> None:
        self._runner = require_extra("agents", EXTRA).Runner
        self.agent = agent
        self.run_config = run_config
        self.max_turns = max_turns
        self.context = context
        self.continue_with_last_agent = continue_with_last_agent
        self.__name__ = str(getattr(agent, "name", None) or "openai-agents agent")
        self._history = NativeHistory()
        install(agent)

    async def __call__(self, message: Any, history: list[TurnResult]) -> ExecutionResult:
        previous = self._history.recall(history)
        starting_agent = self.agent
        content = _user_content(message)
        run_input: Any = content if isinstance(content, str) else [
            {"role": "user", "content": content}]
        if previous is not None:
            items, last_agent = previous
            run_input = [*items, {"role": "user", "content": content}]
            if self.continue_with_last_agent:
                starting_agent = last_agent
        options: dict[str, Any] = {"context": self.context, "run_config": self.run_config}
        if self.max_turns is not None:
            options["max_turns"] = self.max_turns
        # Installed again: tools or handoffs may have been given to an agent since.
        with recording_agent_tools(starting_agent) as agent_tool_runs:
            result = await self._runner.run(starting_agent, run_input, **options)
        execution = execution_from_run_result(result, agent_tool_runs)
        self._history.keep([*history, TurnResult(user_content=message,
                                                 response=execution.actual_response)],
                           (result.to_input_list(), result.last_agent))
        return execution


def _user_content(message: Any) -> Any:
    """A user turn as the SDK is sent it: its text, or, when it holds images or PDFs, one user
    message's ``input_text``/``input_image``/``input_file`` items (the SDK's own input shape)."""
    parts = turn_parts(message)
    return responses_input(parts) if parts else content_text(message)
