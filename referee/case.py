"""What a case expects: tool calls, turns and the case itself."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

# Long enough to tell cases apart in a report line, short enough to keep the line on one row.
DISPLAY_NAME_CHARS = 60


def canonical_json(value: Any) -> str:
    """Stable JSON text for hashing and cache keys; nested lists and dicts are fine."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def content_text(value: Any) -> str:
    """Plain text of a user turn given as a str, a list of parts or a {'text': ...} dict."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if "text" in value and isinstance(value["text"], str):
            return value["text"]
        if "parts" in value:
            return content_text(value["parts"])
        return canonical_json(value)
    if isinstance(value, (list, tuple)):
        return "\n".join(t for t in (content_text(v) for v in value) if t)
    text = getattr(value, "text", None)
    return text if isinstance(text, str) else str(value)


class ToolCall(BaseModel):
    """One tool call, expected or actual. ``arguments=`` is accepted as an alias of ``args``."""

    model_config = ConfigDict(populate_by_name=True)

    name: str
    args: dict[str, Any] = Field(default_factory=dict, validation_alias=AliasChoices("args", "arguments"))
    result: Any = None
    call_id: str | None = None

    @property
    def arguments(self) -> dict[str, Any]:
        return self.args

    def __hash__(self) -> int:
        return hash((self.name, canonical_json(self.args)))


class Invocation(BaseModel):
    """One user turn and what is expected of the agent in it."""

    user_content: Any = ""
    expected_final_response: str | None = None
    expected_tool_trajectory: list[ToolCall] = Field(default_factory=list)
    expected_node_order: list[str] = Field(default_factory=list)
    invocation_id: str | None = None

    @property
    def user_text(self) -> str:
        return content_text(self.user_content)


class EvalCase(BaseModel):
    """One evaluation case.

    Single-turn shorthand (``input``, ``expected_output``, ``context``) and the multi-turn
    ``conversation`` are two views of the same case: ``input`` without a conversation becomes a
    one-turn conversation whose expected final response is ``expected_output``.
    """

    input: str | None = None
    expected_output: str | None = None
    context: str | list[str] | None = None
    conversation: list[Invocation] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)
    eval_id: str = ""
    name: str = ""

    @model_validator(mode="after")
    def _fill_views(self) -> "EvalCase":
        if not self.conversation and self.input is not None:
            self.conversation = [
                Invocation(user_content=self.input, expected_final_response=self.expected_output)
            ]
        elif self.input is None and self.conversation:
            self.input = self.conversation[-1].user_text
        if self.expected_output is None and self.conversation:
            last = self.last_expected_response()
            self.expected_output = last
        if not self.eval_id:
            # Content-derived, so the same case keeps its id across processes (resume relies on it).
            digest = hashlib.sha1(
                canonical_json(self.model_dump(exclude={"eval_id"}, mode="json")).encode()
            ).hexdigest()[:12]
            self.eval_id = f"case-{digest}"
        return self

    @classmethod
    def single_turn(cls, input: str, expected_output: str | None = None, *,
                    context: str | list[str] | None = None,
                    expected_tool_trajectory: list[ToolCall] | None = None,
                    expected_node_order: list[str] | None = None, **kwargs: Any) -> "EvalCase":
        turn = Invocation(
            user_content=input,
            expected_final_response=expected_output,
            expected_tool_trajectory=expected_tool_trajectory or [],
            expected_node_order=expected_node_order or [],
        )
        return cls(input=input, expected_output=expected_output, context=context,
                   conversation=[turn], **kwargs)

    @classmethod
    def multi_turn(cls, conversation: list[Invocation | dict[str, Any]], **kwargs: Any) -> "EvalCase":
        turns = [t if isinstance(t, Invocation) else Invocation.model_validate(t) for t in conversation]
        return cls(conversation=turns, **kwargs)

    # Views used by criteria -------------------------------------------------------------

    def last_expected_response(self) -> str | None:
        """The last non-empty expected final response across turns (document 000's rule)."""
        for turn in reversed(self.conversation):
            if turn.expected_final_response:
                return turn.expected_final_response
        return self.expected_output or None

    @property
    def expected_tool_trajectory(self) -> list[ToolCall]:
        return [call for turn in self.conversation for call in turn.expected_tool_trajectory]

    @property
    def expected_node_order(self) -> list[str]:
        return [node for turn in self.conversation for node in turn.expected_node_order]

    @property
    def context_chunks(self) -> list[str]:
        if self.context is None:
            return []
        if isinstance(self.context, str):
            return [self.context] if self.context else []
        return [c for c in self.context if c]

    @property
    def context_text(self) -> str:
        return "\n\n".join(self.context_chunks)

    @property
    def display_name(self) -> str:
        """How people recognise the case: its name, else its first user message, else its id."""
        if self.name:
            return self.name
        first = " ".join(self.conversation[0].user_text.split()) if self.conversation else ""
        if not first:
            return self.eval_id
        return first if len(first) <= DISPLAY_NAME_CHARS else first[:DISPLAY_NAME_CHARS - 1] + "…"
