"""Agents used as tools (the Agents SDK's ``Agent.as_tool``): what the inner agent did.

An agent tool runs the inner agent in a ``Runner.run`` of its own. The caller's run hooks never
reach it (the SDK hands a nested run only the ``hooks=`` given to ``as_tool``), and tracing
shows it only when tracing is on, through the user's global processors. So the adapter records
it with what the SDK does hand to a nested run:

- the agent tool's invoker, which says (in a context variable) whose call is running now, so
  that parallel agent tools and agent tools inside agent tools each get their own record;
- the inner agents' ``hooks`` (``AgentHooks``), which report the agents that take control and
  the tools they call, with their arguments, results and call ids.

Both are added once per agent or tool, pass every call through to what was there, and record
only inside ``recording_agent_tools`` (which ``OpenAIAgentsAgent`` enters around each run):
nothing is traced or exported, tracing settings are left as they are, and
``RunConfig(tracing_disabled=True)`` records the same.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from referee.adapters._base import require_extra
from referee.adapters._messages import parse_arguments, parse_result
from referee.case import ToolCall

EXTRA = "openai-agents"

# Marks an invoker this module wrapped, so that installing twice wraps once.
_WRAPPED = "__referee_agent_tool__"
_installing = threading.Lock()  # two threads installing on one agent must not wrap it twice


@dataclass
class InnerRun:
    """One agent run: the agents that held control and the calls they made, in order; the
    runs of the agent tools among those calls, by call id."""

    node_visits: list[str] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    agent_tool_runs: dict[str, InnerRun] = field(default_factory=dict)

    def nest_into(self, calls: list[ToolCall]) -> None:
        """Put each agent tool's run under its call in ``calls`` (this run's calls), to any
        depth."""
        for call in calls:
            inner = self.agent_tool_runs.get(call.call_id) if call.call_id else None
            if inner is not None:
                call.nested_node_visits = list(inner.node_visits)
                call.nested_calls = inner.tool_calls
                inner.nest_into(inner.tool_calls)


_running: ContextVar[InnerRun | None] = ContextVar("referee_agent_tool_run", default=None)


@contextmanager
def recording_agent_tools(agent: Any) -> Iterator[InnerRun]:
    """Record what the agent tools reachable from ``agent`` do in the runs started within::

        with recording_agent_tools(agent) as agent_tool_runs:
            result = await Runner.run(agent, "...")
        execution = execution_from_run_result(result, agent_tool_runs)

    ``OpenAIAgentsAgent`` does this itself; this is for runs you start yourself.
    """
    install(agent)
    root = InnerRun()
    token = _running.set(root)
    try:
        yield root
    finally:
        _running.reset(token)


def _args(context: Any, name: str) -> dict[str, Any]:
    return parse_arguments(getattr(context, "tool_arguments", None), "openai-agents run",
                           f"{name}.arguments")


@functools.cache
def _recording_hooks_class() -> type:
    class RecordingHooks(require_extra("agents", EXTRA).AgentHooks):  # type: ignore[misc]
        """The hooks that were there, plus a record of the run an agent tool started."""

        def __init__(self, wrapped: Any) -> None:
            self.wrapped = wrapped

        async def on_start(self, context: Any, agent: Any) -> None:
            run = _running.get()
            if run is not None:
                run.node_visits.append(agent.name)
            if self.wrapped is not None:
                await self.wrapped.on_start(context, agent)

        async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
            run = _running.get()
            if run is not None:
                name = getattr(context, "tool_name", None) or tool.name
                run.tool_calls.append(ToolCall(name=name, args=_args(context, name),
                                               call_id=getattr(context, "tool_call_id", None)))
            if self.wrapped is not None:
                await self.wrapped.on_tool_start(context, agent, tool)

        async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
            run = _running.get()
            if run is not None:
                call_id = getattr(context, "tool_call_id", None)
                name = getattr(context, "tool_name", None) or tool.name
                ended = next((c for c in reversed(run.tool_calls) if
                              (c.call_id == call_id if call_id else c.name == name)), None)
                if ended is not None:
                    ended.result = parse_result(result)
            if self.wrapped is not None:
                await self.wrapped.on_tool_end(context, agent, tool, result)

        async def on_end(self, context: Any, agent: Any, output: Any) -> None:
            if self.wrapped is not None:
                await self.wrapped.on_end(context, agent, output)

        async def on_handoff(self, context: Any, agent: Any, source: Any) -> None:
            if self.wrapped is not None:
                await self.wrapped.on_handoff(context, agent, source)

        async def on_llm_start(self, context: Any, agent: Any, system_prompt: Any,
                               input_items: Any) -> None:
            if self.wrapped is not None:
                await self.wrapped.on_llm_start(context, agent, system_prompt, input_items)

        async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
            if self.wrapped is not None:
                await self.wrapped.on_llm_end(context, agent, response)

    return RecordingHooks


def _wrap_invoker(tool: Any) -> None:
    invoke = tool.on_invoke_tool
    if getattr(invoke, _WRAPPED, False):
        return

    async def invoke_recording(context: Any, input_json: str) -> Any:
        caller = _running.get()
        if caller is None:
            return await invoke(context, input_json)
        run = InnerRun()
        call_id = getattr(context, "tool_call_id", None)
        if call_id:
            caller.agent_tool_runs[call_id] = run
        token = _running.set(run)
        try:
            return await invoke(context, input_json)
        finally:
            _running.reset(token)

    setattr(invoke_recording, _WRAPPED, True)
    tool.on_invoke_tool = invoke_recording


def _handoff_target(handoff: Any) -> Any:
    if hasattr(handoff, "tools"):  # an Agent given directly
        return handoff
    ref = getattr(handoff, "_agent_ref", None)  # a Handoff keeps a weak reference to its agent
    return ref() if callable(ref) else None


def install(agent: Any) -> None:
    """Prepare every agent tool reachable from ``agent`` (through tools and handoffs, to any
    depth) to be recorded; agents that run only as someone's tool get the recording hooks."""
    hooks_class = _recording_hooks_class()
    seen: set[tuple[int, bool]] = set()
    pending: list[tuple[Any, bool]] = [(agent, False)]
    with _installing:
        while pending:
            current, inside_tool = pending.pop()
            if current is None or (id(current), inside_tool) in seen:
                continue
            seen.add((id(current), inside_tool))
            if inside_tool and not isinstance(current.hooks, hooks_class):
                current.hooks = hooks_class(current.hooks)
            for tool in list(getattr(current, "tools", None) or []):
                if getattr(tool, "_is_agent_tool", False):
                    _wrap_invoker(tool)
                    pending.append((getattr(tool, "_agent_instance", None), True))
            for handoff in list(getattr(current, "handoffs", None) or []):
                pending.append((_handoff_target(handoff), inside_tool))
