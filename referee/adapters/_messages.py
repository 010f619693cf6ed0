"""OpenAI-style message lists -> ExecutionResult (Chat Completions agents, LangChain exports).

Each user message starts a turn; the last assistant text of a turn is its response;
``tool_calls[].function.{name, arguments}`` (or LangChain's ``{name, args}``) and ``id`` give
the tool calls, and a ``role=tool`` message with the same ``tool_call_id`` gives the result.
A user message's images and PDFs are its turn's parts, an assistant message's the run's
``outputs``, a tool message's part of its result.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from referee.adapters._base import with_notes
from referee.adapters._media import MediaPart, content_parts, media_of, said
from referee.case import ToolCall, content_text
from referee.content._load import find_parts
from referee.content._parts import ContentError
from referee.errors import InputError
from referee.execution import ExecutionResult, TurnResult, add_visit
from referee.usage import TokenUsage

# LangChain names a message by type (model_dump, messages_to_dict) or by class (dumpd).
_ROLE_ALIASES = {
    "user": "user", "human": "user", "HumanMessage": "user",
    "assistant": "assistant", "ai": "assistant", "AIMessage": "assistant",
    "AIMessageChunk": "assistant",
    "tool": "tool", "ToolMessage": "tool",
    "system": "system", "developer": "system", "SystemMessage": "system",
}


_TEXT_PARTS = (None, "text", "output_text", "input_text")


@dataclass
class Conversation:
    """A message list read into turns, with what the messages left unsaid."""

    turns: list[TurnResult] = field(default_factory=list)
    usage: TokenUsage | None = None
    notes: list[str] = field(default_factory=list)
    # What the user said in each turn: its text, or its parts when it holds images or PDFs.
    said: list[Any] = field(default_factory=list)
    outputs: list[MediaPart] = field(default_factory=list)  # the assistant's images and PDFs

    def execution(self, unrecorded: dict[str, str] | None = None) -> ExecutionResult:
        calls = [call for turn in self.turns for call in turn.tool_calls]
        visits = [node for turn in self.turns for node in turn.node_visits]
        result = ExecutionResult(
            actual_response=self.turns[-1].response if self.turns else "",
            tool_calls=calls, node_visits=visits,
            turns=self.turns if len(self.turns) > 1 else [], token_usage=self.usage,
            outputs=self.outputs)
        return with_notes(result, self.notes, unrecorded)


def parse_arguments(raw: Any, where: str, field_name: str) -> dict[str, Any]:
    """Tool arguments as recorded: a JSON object or its text; anything else is an error."""
    if raw is None or raw == "":
        return {}
    value = raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InputError(f"not valid JSON ({exc.msg} at character {exc.pos})",
                             source=where, field=field_name,
                             expected="the tool arguments as a JSON object") from None
    if not isinstance(value, dict):
        raise InputError(f"got a JSON {type(value).__name__}", source=where, field=field_name,
                         expected="the tool arguments as a JSON object")
    return value


def parse_result(value: Any) -> Any:
    """A tool result as recorded; JSON text of an object or a list is read as that value.

    Traces and message lists carry a tool's structured result as JSON text, where a live run
    has the object itself: read both the same way, as arguments are. Other text (a number,
    a sentence) stays text.
    """
    if not isinstance(value, str):
        return value
    text = value.strip()
    if (text[:1], text[-1:]) not in (("{", "}"), ("[", "]")):
        return value
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return value
    return parsed if isinstance(parsed, (dict, list)) else value


def _count(source: Mapping[str, Any], *path: str) -> int:
    """An integer under a nested key path, 0 when absent."""
    value: Any = source
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def usage_from(value: Any) -> TokenUsage | None:
    """Token counts in OpenAI (prompt/completion) or LangChain/Responses (input/output) names,
    with the prompt-cache reads each of them reports."""
    if not isinstance(value, Mapping):
        return None
    nested = value.get("token_usage")
    source: Mapping[str, Any] = nested if isinstance(nested, Mapping) else value
    inputs = source.get("input_tokens", source.get("prompt_tokens"))
    outputs = source.get("output_tokens", source.get("completion_tokens"))
    if not isinstance(inputs, int) and not isinstance(outputs, int):
        return None
    cached = (_count(source, "input_token_details", "cache_read")  # LangChain usage_metadata
              or _count(source, "input_tokens_details", "cached_tokens")  # Responses
              or _count(source, "prompt_tokens_details", "cached_tokens"))  # Chat Completions
    written = _count(source, "input_token_details", "cache_creation")
    return TokenUsage(input_tokens=int(inputs or 0), output_tokens=int(outputs or 0), requests=1,
                      cached_input_tokens=cached, cache_write_tokens=written)


def message_text(content: Any) -> str:
    """The text of a message content; non-text parts (tool_use blocks, images) are not text."""
    if isinstance(content, (list, tuple)):
        parts = (part if isinstance(part, str) else
                 part.get("text", part.get("content"))
                 if isinstance(part, Mapping) and part.get("type") in _TEXT_PARTS else None
                 for part in content)
        return "\n".join(p for p in parts if isinstance(p, str) and p)
    return content_text(content)


def message_dict(raw: Any, where: str, index: int) -> dict[str, Any]:
    if hasattr(raw, "model_dump") and not isinstance(raw, Mapping):
        raw = raw.model_dump()  # a LangChain message object
    if not isinstance(raw, Mapping):
        raise InputError(f"got {type(raw).__name__}", source=where, field=f"messages[{index}]",
                         expected="a message object with a role")
    message = dict(raw)
    if message.get("lc") and isinstance(message.get("kwargs"), Mapping):  # langchain dumpd()
        class_name = (message.get("id") or [""])[-1]
        message = {**message["kwargs"], "type": class_name}
    elif "role" not in message and isinstance(message.get("data"), Mapping):  # messages_to_dict()
        message = {**message["data"], "type": message.get("type")}
    return message


def role_of(message: Mapping[str, Any], where: str, index: int) -> str:
    raw = message.get("role") or message.get("type")
    role = _ROLE_ALIASES.get(str(raw)) if raw is not None else None
    if role is None:
        raise InputError(f"unknown role {raw!r}" if raw is not None else "missing",
                         source=where, field=f"messages[{index}].role",
                         expected="user, assistant, tool or system")
    return role


def _tool_call(raw: Any, where: str, path: str) -> ToolCall:
    if not isinstance(raw, Mapping):
        raise InputError(f"got {type(raw).__name__}", source=where, field=path,
                         expected="a tool call object")
    if isinstance(raw.get("function"), Mapping):
        function = raw["function"]
        name, arguments, arg_path = (function.get("name"), function.get("arguments"),
                                     f"{path}.function.arguments")
        name_path = f"{path}.function.name"
    else:
        name, arguments = raw.get("name"), raw.get("args", raw.get("arguments"))
        arg_path, name_path = f"{path}.args", f"{path}.name"
    if not isinstance(name, str) or not name:
        raise InputError("missing" if name is None else f"got {name!r}", source=where,
                         field=name_path, expected="the tool's name")
    call_id = raw.get("id")
    return ToolCall(name=name, args=parse_arguments(arguments, where, arg_path),
                    call_id=str(call_id) if call_id is not None else None)


def read_messages(messages: Sequence[Any], where: str) -> Conversation:
    """Turns, tool calls and results of one recorded conversation; raises InputError if bad."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InputError(f"got {type(messages).__name__}", source=where, field="messages",
                         expected="a list of messages")
    conversation = Conversation()
    calls_by_id: dict[str, ToolCall] = {}
    current: TurnResult | None = None
    usages: list[TokenUsage | None] = []
    for index, raw in enumerate(messages):
        message = message_dict(raw, where, index)
        role = role_of(message, where, index)
        text = message_text(message.get("content"))
        if role == "system":
            continue
        parts = [] if role == "tool" else content_parts(message.get("content"), where,
                                                         f"messages[{index}].content")
        if role == "user":
            current = TurnResult(user_content=text)
            conversation.turns.append(current)
            conversation.said.append(said(text, parts))
            continue
        if current is None:  # an assistant or tool message before any user message
            current = TurnResult()
            conversation.turns.append(current)
            conversation.said.append("")
        if role == "assistant":
            if text:
                current.response = text
            conversation.outputs.extend(media_of(parts))
            name = message.get("name")
            # A multi-agent graph names each agent's messages: the agents that spoke are the
            # node visits, one per stretch of messages from the same agent.
            if isinstance(name, str) and name:
                add_visit(current.node_visits, name)
            for j, raw_call in enumerate(message.get("tool_calls") or []):
                call = _tool_call(raw_call, where, f"messages[{index}].tool_calls[{j}]")
                current.tool_calls.append(call)
                if call.call_id is not None:
                    calls_by_id[call.call_id] = call
            usages.append(usage_from(message.get("usage_metadata") or message.get("usage")
                                     or message.get("response_metadata")))
            continue
        call_id = message.get("tool_call_id")
        answered = calls_by_id.pop(str(call_id), None) if call_id is not None else None
        if answered is None:
            conversation.notes.append(
                f"{where}: messages[{index}]: a tool result for call id {call_id!r} that no "
                f"earlier assistant message made; left out")
            continue
        answered.result = parse_result(text)
        # Issue 34: a tool that returned images or PDFs (a screenshot, a rendered page) keeps
        # them beside its text, as parts; the run store writes their bytes to blobs/ once.
        media = _media_parts(message.get("content"), where, index)
        if media:
            answered.result = [*([answered.result] if text else []), *media]
    for call_id, call in calls_by_id.items():
        conversation.notes.append(f"{where}: tool call {call.name!r} (id {call_id}) has no "
                                  f"recorded result")
    conversation.usage = TokenUsage.total(usages)
    return conversation


def _media_parts(content: Any, where: str, index: int) -> list[Any]:
    if not isinstance(content, (list, tuple)):
        return []
    try:
        return list(find_parts(content))
    except ContentError as exc:
        raise InputError(str(exc), source=where, field=f"messages[{index}].content") from None


def execution_from_messages(messages: Sequence[Any], *, where: str = "messages") -> ExecutionResult:
    """One recorded conversation (OpenAI-style dicts or LangChain messages) as an ExecutionResult.

    What the messages leave out (a tool call with no result) is listed under
    ``metadata["trace_notes"]``; malformed messages raise ``InputError`` naming the field.
    """
    return read_messages(messages, where).execution()
