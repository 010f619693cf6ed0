"""LangGraph (``langgraph``) -> ExecutionResult. Extra: ``referee[langgraph]``.

Node visits are the graph's steps in order (``stream_mode="updates"``); tool calls come from
``AIMessage.tool_calls`` and their results from ``ToolMessage``s, read by the same message-list
reader that scores recorded LangChain exports. Later turns start from the previous turn's
messages.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from referee.adapters._base import require_extra
from referee.adapters._conversation import NativeHistory
from referee.adapters._media import langchain_blocks, turn_parts
from referee.adapters._messages import read_messages
from referee.case import content_text
from referee.execution import ExecutionResult, TurnResult

EXTRA = "langgraph"
MESSAGES_KEY = "messages"


def _visited(update: Any) -> list[str]:
    # Keys like "__interrupt__" are LangGraph's own signals, not nodes of the graph.
    return [node for node in update if not str(node).startswith("__")] if isinstance(
        update, Mapping) else []


def _execution(visits: list[str], state: Any, turn_start: int, key: str) -> ExecutionResult:
    messages = state.get(key) if isinstance(state, Mapping) else None
    if not isinstance(messages, Sequence):
        raise TypeError(f"the graph's final state has no '{key}' list of messages; pass "
                        f"messages_key= for a graph that keeps them under another name")
    execution = read_messages(list(messages)[turn_start:], "langgraph run").execution()
    execution.node_visits = visits
    return execution


def execution_from_langgraph(graph: Any, inputs: Any, config: Any = None, *,
                             messages_key: str = MESSAGES_KEY) -> ExecutionResult:
    """Run a compiled graph once on ``inputs`` and return what it did.

    Messages already in ``inputs`` before the last user message are earlier history: their tool
    calls belong to earlier turns and are not counted again.
    """
    require_extra("langgraph", EXTRA)
    given = inputs.get(messages_key) if isinstance(inputs, Mapping) else None
    start = max(len(given) - 1, 0) if isinstance(given, Sequence) else 0
    visits: list[str] = []
    state: Any = None
    for mode, chunk in graph.stream(inputs, config, stream_mode=["updates", "values"]):
        if mode == "updates":
            visits.extend(_visited(chunk))
        else:
            state = chunk
    return _execution(visits, state, start, messages_key)


def _with_thread(config: Any, thread_id: str) -> dict[str, Any]:
    """``config`` with its own ``configurable.thread_id``; the other settings kept."""
    merged = dict(config or {})
    merged["configurable"] = {**(merged.get("configurable") or {}), "thread_id": thread_id}
    return merged


class LangGraphAgent:
    """A compiled LangGraph graph as AgentEvaluator's agent under test, turn by turn.

    A graph compiled with a checkpointer (``MemorySaver``...) keeps its state per thread: each
    conversation, so each case and each repeated run of it, gets a fresh ``thread_id`` (any
    given in ``config`` is replaced), and a later turn sends only its new message to the
    thread. Without one, a later turn sends the earlier messages again. A turn holding images
    or PDFs is sent as LangChain's standard content blocks (text, image, file), and a later
    turn's earlier messages (resent, or the thread's) hold them as they were sent.
    """

    def __init__(self, graph: Any, *, config: Any = None,
                 messages_key: str = MESSAGES_KEY) -> None:
        require_extra("langgraph", EXTRA)
        self.graph = graph
        self.config = config
        self.messages_key = messages_key
        self.__name__ = str(getattr(graph, "name", None) or "langgraph graph")
        self._history = NativeHistory()
        # True/False/None mean "the parent's", "none" and "not set": no saver of its own.
        self._checkpointed = getattr(graph, "checkpointer", None) not in (None, False, True)

    async def __call__(self, message: Any, history: list[TurnResult]) -> ExecutionResult:
        previous, thread_id = self._history.recall(history) or ([], uuid.uuid4().hex)
        user = {"role": "user", "content": _user_content(message)}
        if self._checkpointed:
            inputs, config = {self.messages_key: [user]}, _with_thread(self.config, thread_id)
        else:
            inputs, config = {self.messages_key: [*previous, user]}, self.config
        visits: list[str] = []
        state: Any = None
        async for mode, chunk in self.graph.astream(inputs, config,
                                                    stream_mode=["updates", "values"]):
            if mode == "updates":
                visits.extend(_visited(chunk))
            else:
                state = chunk
        execution = _execution(visits, state, len(previous), self.messages_key)
        self._history.keep([*history, TurnResult(user_content=message,
                                                 response=execution.actual_response)],
                           (list(state[self.messages_key]), thread_id))
        return execution


def _user_content(message: Any) -> Any:
    """A user turn as LangGraph is sent it: LangChain's standard content blocks (text, image,
    file) when it holds images or PDFs, else its text."""
    parts = turn_parts(message)
    return langchain_blocks(parts) if parts else content_text(message)
