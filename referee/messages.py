"""The floor of the data model: a tool call, a chat message and the text of a message's
content. ``case`` (what is expected) and ``execution`` (what happened) both build on it, as
does the ADK shape reader, so none of them has to import another to learn what a tool call is.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import (
    AliasChoices,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from referee._strict import StrictModel, with_positions


def canonical_json(value: Any) -> str:
    """Stable JSON text for hashing and cache keys; nested lists and dicts are fine."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


_NON_TEXT_PART_KEYS = frozenset({"function_call", "functionCall", "function_response",
                                 "functionResponse", "inline_data", "inlineData", "file_data",
                                 "fileData", "executable_code", "code_execution_result"})


_CHAT_MESSAGE_KEYS = frozenset({"role", "content", "metadata"})
# The types of content parts that hold an image or a document (referee's own and the
# providers' shapes): no part of a message's text.
_MEDIA_PART_TYPES = frozenset({"image", "document", "image_url", "input_image", "file",
                               "input_file"})


def is_chat_message(value: dict[str, Any]) -> bool:
    """A {role, content} message (MessageContent's dump; ``role`` may be left out)."""
    return "content" in value and value.keys() <= _CHAT_MESSAGE_KEYS


def content_text(value: Any) -> str:
    """Plain text of a user turn given as a str, a list of parts or a {'text': ...} dict."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if "text" in value:
            return value["text"] if isinstance(value["text"], str) else ""
        if "parts" in value:
            return content_text(value["parts"])
        if is_chat_message(value):
            return content_text(value["content"])
        if _NON_TEXT_PART_KEYS & value.keys() or value.get("type") in _MEDIA_PART_TYPES:
            return ""  # a function call or an attachment is no part of the text
        return canonical_json(value)
    if isinstance(value, (list, tuple)):
        return "\n".join(t for t in (content_text(v) for v in value) if t)
    text = getattr(value, "text", None)
    if isinstance(text, str):
        return text
    # An image or a document part (a model of its own) has no text.
    return "" if getattr(value, "type", None) in _MEDIA_PART_TYPES else str(value)


# How a report or a judge prompt shows a call's arguments that the recording did not carry.
NOT_RECORDED = "(not recorded)"


class ToolCall(StrictModel):
    """One tool call, expected or actual. ``arguments=`` is accepted as an alias of ``args``."""

    model_config = ConfigDict(populate_by_name=True)

    name: str
    # None: the recording did not carry them (a trace whose tool spans and model calls leave
    # the opt-in arguments out), which is not "no arguments" ({}).
    args: dict[str, Any] | None = Field(default_factory=dict,
                                        validation_alias=AliasChoices("args", "arguments"))
    result: Any = None
    call_id: str | None = None
    # An agent used as a tool (the Agents SDK's ``as_tool``) runs an agent run of its own: the
    # agents that held control in it and the calls they made, in order, nested to any depth.
    # The caller's trajectory keeps such a call as one call; criteria configured with
    # ``include_nested`` read the inner calls too (``flattened``). Left out of dumps when empty,
    # so stored runs and dumps of calls without nesting are unchanged.
    nested_node_visits: list[str] = Field(default_factory=list)
    nested_calls: list[ToolCall] = Field(default_factory=list)

    def __init__(self, *positional: Any, **fields: Any) -> None:
        # multivon's ToolCall is a dataclass: ToolCall("lookup", {"id": 1}, "found").
        if positional and "arguments" in fields and len(positional) > 1:
            raise TypeError("ToolCall got 'args' twice (by position and as arguments=)")
        super().__init__(**with_positions("ToolCall", ("name", "args", "result"), positional,
                                          fields))

    @property
    def arguments(self) -> dict[str, Any] | None:
        return self.args

    def matches(self, other: ToolCall, check_args: bool = True,
                check_call_id: bool = False) -> bool:
        """Whether this (actual) call satisfies ``other`` (the expected one), 10xgraph's rule:
        same name; same args when ``check_args`` and ``other`` names any (no args expected
        means any args will do, recorded or not); same call id when ``check_call_id``."""
        if self.name != other.name:
            return False
        if check_args and other.args and self.args != other.args:
            return False
        return not (check_call_id and self.call_id != other.call_id)

    def __hash__(self) -> int:
        return hash((self.name, canonical_json(self.args)))

    @model_serializer(mode="wrap")
    def _without_empty_nesting(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        for key in _NESTING_FIELDS:
            if not data.get(key):
                data.pop(key, None)
        return data


_NESTING_FIELDS = ("nested_node_visits", "nested_calls")


def flattened(calls: list[ToolCall]) -> list[ToolCall]:
    """``calls`` with each call's nested calls right after it, depth first: the order in which
    the calls of an agent and of the agents it used as tools were made."""
    flat: list[ToolCall] = []
    for call in calls:
        flat.append(call)
        flat.extend(flattened(call.nested_calls))
    return flat


class MessageContent(StrictModel):
    """A chat message in 10xgraph's shape (``role``, ``content``), accepted as a turn's
    ``user_content`` and as an ``expected_final_response`` (read as its text)."""

    role: str = "user"
    content: str | list[dict[str, Any]] = ""
    metadata: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def user(cls, text: str) -> MessageContent:
        return cls(role="user", content=text)

    @classmethod
    def assistant(cls, text: str) -> MessageContent:
        return cls(role="assistant", content=text)

    def get_text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return " ".join(block["text"] for block in self.content
                        if isinstance(block, dict) and isinstance(block.get("text"), str))

    @property
    def text(self) -> str:
        return self.get_text()
