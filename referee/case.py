"""What a case expects: tool calls, turns and the case itself."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import (
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticSerializationError

from referee._strict import StrictModel, move_alias, with_positions
from referee.content._load import is_part, load_part, load_parts, media_content
from referee.content._parts import (
    IDENTITY,
    ContentPart,
    DocumentPart,
    ImagePart,
    TextPart,
    distinct_parts,
)
from referee.execution import as_steps, store_trace, stored_trace
from referee.messages import MessageContent as MessageContent
from referee.messages import ToolCall as ToolCall
from referee.messages import canonical_json as canonical_json
from referee.messages import content_text as content_text
from referee.messages import flattened as flattened
from referee.messages import is_chat_message

# Long enough to tell cases apart in a report line, short enough to keep the line on one row.
DISPLAY_NAME_CHARS = 60


class Text(str):
    """Text that also answers 10xgraph's ``MessageContent.get_text()``, so code written for
    ``turn.user_content.get_text()`` or ``turn.expected_final_response.get_text()`` keeps working
    while referee stores plain strings (a ``Text`` is a ``str`` and serialises as one)."""

    __slots__ = ()

    def get_text(self) -> str:
        return str(self)

    @property
    def text(self) -> str:
        return str(self)


class SessionInput(StrictModel):
    """How the agent's session starts (ADK's and 10xgraph's ``session_input``); further keys are
    kept, as ADK keeps them."""

    model_config = ConfigDict(extra="allow")

    app_name: str = ""
    user_id: str = "test_user"
    session_id: str | None = None
    state: dict[str, Any] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)


# An image or a PDF in a case's field; a dump names its type, which tells the two apart.
Media = Annotated[ImagePart | DocumentPart, Field(discriminator="type")]


def _text_of(parts: list[Any]) -> str:
    return "\n".join(part.text for part in parts if isinstance(part, TextPart))


def _is_part_like(value: Any) -> bool:
    """A list, or one part in any shape ``load_part`` reads: a field that takes parts reads it."""
    return isinstance(value, (list, tuple, TextPart, ImagePart, DocumentPart)) or (
        isinstance(value, Mapping) and (is_part(value) or set(value) == {"text"}
                                        or value.get("type") == "text"))


def _read_input(value: Any) -> Any:
    """An input given as parts: the parts when they hold an image or a PDF, else their text as
    one str (so a text-only case dumps, and hashes to its eval_id, as it always did)."""
    if not _is_part_like(value):
        return value
    parts = load_parts(value, field="input")
    return parts if any(not isinstance(p, TextPart) for p in parts) else _text_of(parts)


def _read_context(value: Any) -> Any:
    """Context chunks given as text or parts: text stays text, images and PDFs become parts."""
    if isinstance(value, (ImagePart, DocumentPart)) or (isinstance(value, Mapping)
                                                        and is_part(value)):
        value = [value]
    if not isinstance(value, (list, tuple)):
        return value
    chunks: list[Any] = []
    for index, item in enumerate(value):
        if _is_part_like(item) and not isinstance(item, (list, tuple)):
            part = load_part(item, field=f"context[{index}]")
            item = part.text if isinstance(part, TextPart) else part
        chunks.append(item)
    return chunks


def _split_expected(data: dict[str, Any], key: str, field: str) -> None:
    """An expected response given as parts: its text stays in ``key``, its images and PDFs
    go to ``expected_media``."""
    value = data[key]
    parts = media_content(value, field=field) if not isinstance(value, str) else None
    if parts is None and isinstance(value, (list, tuple)):
        parts = load_parts(value, field=field)
    if parts is None:
        return
    text = _text_of(parts)
    data[key] = text if text or not parts else None
    media = [part for part in parts if not isinstance(part, TextPart)]
    if media:
        data["expected_media"] = [*(data.get("expected_media") or []), *media]


def _without_empty_media(data: Any) -> Any:
    # Left out of dumps when empty, so a case without expected images dumps as it always did.
    if isinstance(data, dict) and not data.get("expected_media", True):
        data.pop("expected_media")
    return data


def _message_text(value: Any) -> Any:
    """An expected response given as a message (10xgraph's MessageContent, ADK's Content) is
    read as its text; anything else is left for the field to validate."""
    if isinstance(value, MessageContent):
        return value.get_text()
    if isinstance(value, dict) and ("parts" in value or is_chat_message(value)):
        return content_text(value)
    return value


class Invocation(StrictModel):
    """One user turn and what is expected of the agent in it.

    A case file's ADK invocation (``final_response``, ``intermediate_data``, ...) is read into
    these fields where the file is read (:mod:`referee.compat.adk`), not here.
    """

    # A str, a message, or a list of parts (text, images, PDFs: what the agent is sent).
    user_content: Any = ""
    expected_final_response: str | None = None
    # The images and PDFs of an expected response given as parts (its text is
    # ``expected_final_response``). Left out of dumps when empty.
    expected_media: list[Media] = Field(default_factory=list)
    expected_tool_trajectory: list[ToolCall] = Field(default_factory=list)
    expected_node_order: list[str] = Field(default_factory=list)
    invocation_id: str | None = None
    # 10xgraph: messages expected between the user turn and the final response.
    expected_intermediate_responses: list[Any] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def _normalise_input(cls, data: dict[str, Any]) -> dict[str, Any]:
        content = data.get("user_content")
        parts = media_content(content, field="user_content")
        if parts is not None:
            data["user_content"] = parts
        elif isinstance(content, dict) and is_chat_message(content):
            data["user_content"] = MessageContent.model_validate(content)
        if "expected_final_response" in data:
            _split_expected(data, "expected_final_response", "expected_final_response")
            data["expected_final_response"] = _message_text(data["expected_final_response"])
        return data

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _without_empty_media(handler(self))

    @field_validator("user_content", "expected_final_response", mode="after")
    @classmethod
    def _text_with_message_api(cls, value: Any) -> Any:
        return Text(value) if type(value) is str else value

    @classmethod
    def simple(cls, user_query: str, expected_response: str | None = None,
               expected_tools: list[ToolCall] | None = None,
               expected_node_order: list[str] | None = None) -> Invocation:
        """10xgraph's one-line turn: a question, and optionally its answer, tools and nodes."""
        return cls(user_content=user_query, expected_final_response=expected_response or None,
                   expected_tool_trajectory=expected_tools or [],
                   expected_node_order=expected_node_order or [])

    @property
    def user_text(self) -> str:
        """The text of the turn's message (an image or a PDF has none)."""
        return content_text(self.user_content)

    @property
    def user_parts(self) -> list[TextPart | ImagePart | DocumentPart] | None:
        """The turn's message as parts when it holds an image or a PDF, else None."""
        content = self.user_content
        if isinstance(content, list) and any(isinstance(p, (ImagePart, DocumentPart))
                                             for p in content):
            return content
        return None


# The single-turn shorthand: what a case may say about its one turn without a conversation.
_SHORTHAND_EXPECTATIONS = ("expected_tool_trajectory", "expected_node_order",
                           "expected_intermediate_responses")
# Peer spellings of case fields: 10xgraph's single_turn keywords and multivon's names.
_CASE_KEYWORD_ALIASES = {"user_query": "input", "expected_response": "expected_output",
                         "expected_tools": "expected_tool_trajectory", "case_id": "eval_id",
                         "expected_tool_calls": "expected_tool_trajectory"}
# Fields added after the first release; left at their defaults they stay out of the content
# hash, so a case keeps the eval_id earlier versions gave it (resume relies on it).
_LATER_CASE_FIELDS = {"description": "", "session_input": None}
_LATER_TURN_FIELDS: dict[str, Any] = {"expected_intermediate_responses": [], "metadata": {}}
# multivon: EvalCase(input, expected_output, context) by position; provenance kept in metadata.
_MULTIVON_POSITIONAL = ("input", "expected_output", "context")
_MULTIVON_METADATA_FIELDS = ("source_id", "revision")
# The metadata key that records multivon's explicit ``expected_tool_calls=[]``: an assertion
# that no tool is called, which an empty expected trajectory cannot tell from no expectation.
EXPECTS_NO_TOOLS = "expected_tool_calls"


def _keep_recorded_trace(data: dict[str, Any], agent_trace: Any) -> dict[str, Any]:
    # multivon's case may carry the trace an agent recorded earlier; referee keeps it in
    # metadata, and the agent evaluators read it when the run itself records no steps.
    if agent_trace is None:
        return data
    if not isinstance(agent_trace, (list, tuple)):
        raise ValueError(f"agent_trace must be a list of AgentStep, got {type(agent_trace).__name__}")
    return store_trace(data, as_steps(agent_trace))


class EvalCase(StrictModel):
    """One evaluation case.

    Single-turn shorthand (``input``, ``expected_output``, ``context`` and the expectations
    ``expected_tool_trajectory``, ``expected_node_order``, ``expected_intermediate_responses``)
    and the multi-turn ``conversation`` are two views of the same case: ``input`` without a
    conversation becomes a one-turn conversation carrying those expectations.

    Peer spellings are accepted: 10xgraph's ``user_query``/``expected_response``/
    ``expected_tools``, multivon's ``case_id`` and ``expected_tool_calls`` (tool names). A
    case file's Google ADK fields are read where the file is read (:mod:`referee.evalset`).

    Images and PDFs (content parts, :mod:`referee.content`): ``input`` holds the list of parts
    when one is an image or a PDF (``input_text`` is its text), ``context`` text chunks and
    parts, an expected output given as parts its text and ``expected_media``; ``media`` lists
    every image and PDF the case holds. ``eval_id`` hashes each by its SHA-256 (docs/images.md).
    """

    _input_aliases = (frozenset(_SHORTHAND_EXPECTATIONS) | frozenset(_CASE_KEYWORD_ALIASES)
                      | frozenset(_MULTIVON_METADATA_FIELDS) | {"agent_trace"})

    # Text, or a list of parts when the case holds images or PDFs (``input_text`` is its text).
    input: str | list[ContentPart] | None = None
    expected_output: str | None = None
    context: str | list[str | Media] | None = None
    conversation: list[Invocation] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)
    eval_id: str = ""
    name: str = ""
    description: str = ""
    session_input: SessionInput | None = None
    # The images and PDFs of an expected output given as parts (its text is
    # ``expected_output``). Left out of dumps, and of the eval_id, when empty.
    expected_media: list[Media] = Field(default_factory=list)

    def __init__(self, *positional: Any, **fields: Any) -> None:
        # multivon's EvalCase is a dataclass: EvalCase("question", "answer", context).
        super().__init__(**with_positions("EvalCase", _MULTIVON_POSITIONAL, positional, fields))

    @classmethod
    def _normalise_input(cls, data: dict[str, Any]) -> dict[str, Any]:
        if "agent_trace" in data:
            data = _keep_recorded_trace(data, data.pop("agent_trace"))
        # multivon's provenance fields have no referee field; they are kept in metadata.
        kept = {key: data.pop(key) for key in _MULTIVON_METADATA_FIELDS if key in data}
        kept = {key: value for key, value in kept.items() if value is not None}
        if kept:
            data["metadata"] = {**(data.get("metadata") or {}), **kept}
        names = data.get("expected_tool_calls")
        if isinstance(names, list):  # multivon lists the expected tools by name
            data["expected_tool_calls"] = [{"name": v} if isinstance(v, str) else v for v in names]
            if not names:  # multivon's assertion that no tool is called; kept, as no turn can say it
                data["metadata"] = {**(data.get("metadata") or {}), EXPECTS_NO_TOOLS: []}
        for alias, field in _CASE_KEYWORD_ALIASES.items():
            move_alias(data, alias, field)
        if "input" in data:
            data["input"] = _read_input(data["input"])
        if "context" in data:
            data["context"] = _read_context(data["context"])
        if "expected_output" in data:
            _split_expected(data, "expected_output", "expected_output")
        shorthand = {k: data.pop(k) for k in _SHORTHAND_EXPECTATIONS if k in data}
        shorthand = {k: v for k, v in shorthand.items() if v}
        if shorthand:
            named = ", ".join(shorthand)
            if data.get("conversation"):
                raise ValueError(f"{named} belongs on a turn when the case has a conversation; "
                                 "put it inside conversation[i]")
            if data.get("input") is None:
                raise ValueError(f"{named} needs the turn it expects: give 'input' as well")
            data["conversation"] = [{"user_content": data["input"],
                                     "expected_final_response": data.get("expected_output"),
                                     "expected_media": list(data.get("expected_media") or []),
                                     **shorthand}]
        return data

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _without_empty_media(handler(self))

    @model_validator(mode="after")
    def _fill_views(self) -> EvalCase:
        if not self.conversation and self.input is not None:
            # The one turn is sent what the input holds: the same parts, images included.
            self.conversation = [
                Invocation(user_content=self.input, expected_final_response=self.expected_output,
                           expected_media=list(self.expected_media))
            ]
        elif self.input is None and self.conversation:
            final_turn = self.conversation[-1]
            self.input = final_turn.user_parts or final_turn.user_text
        if self.expected_output is None and self.conversation:
            last = self.last_expected_response()
            self.expected_output = last
        if not self.expected_media:
            self.expected_media = next((list(turn.expected_media) for turn
                                        in reversed(self.conversation) if turn.expected_media), [])
        if not self.eval_id:
            # Content-derived, so the same case keeps its id across processes (resume relies on it).
            # surrogatepass: a lone surrogate (a recorded turn may hold one) still hashes.
            identity = canonical_json(self._identity()).encode("utf-8", "surrogatepass")
            digest = hashlib.sha1(identity).hexdigest()[:12]
            self.eval_id = f"case-{digest}"
        return self

    def _identity(self) -> dict[str, Any]:
        try:
            data = self.model_dump(exclude={"eval_id"}, mode="json", context={IDENTITY: True})
        except (UnicodeEncodeError, PydanticSerializationError) as exc:
            # A lone surrogate (a recorded turn may hold one) has no JSON form (raised as
            # itself, or wrapped by a model's own serializer). No id was ever derived from
            # such a case, so hashing the plain dump changes no existing id.
            if "UnicodeEncodeError" not in f"{type(exc).__name__}: {exc}":
                raise
            data = self.model_dump(exclude={"eval_id"}, context={IDENTITY: True})
        for key, default in _LATER_CASE_FIELDS.items():
            if data.get(key) == default:
                data.pop(key, None)
        turns: list[dict[str, Any]] = data.get("conversation") or []
        for turn in turns:
            for key, default in _LATER_TURN_FIELDS.items():
                if turn.get(key) == default:
                    turn.pop(key, None)
        return data

    @classmethod
    def single_turn(cls, *positional: Any, input: str | None = None,
                    expected_output: str | None = None, user_query: str | None = None,
                    expected_response: str | None = None, eval_id: str = "",
                    expected_tools: list[ToolCall] | None = None,
                    expected_node_order: list[str] | None = None, name: str = "",
                    description: str = "", **kwargs: Any) -> EvalCase:
        """A one-turn case.

        ``single_turn(input, expected_output=None, **fields)``; 10xgraph's keywords
        (``eval_id``, ``user_query``, ``expected_response``, ``expected_tools``,
        ``expected_node_order``, ``name``, ``description``) are accepted too, and so is its
        positional order when three or more values are given positionally
        (``single_turn("t1", "Hello", "Hi!")``). Every other keyword is an ``EvalCase`` field or
        shorthand expectation (``context``, ``expected_tool_trajectory``, ``tags``, ...).
        """
        if len(positional) >= 3:
            order = ("eval_id", "user_query", "expected_response", "expected_tools",
                     "expected_node_order", "name", "description")
            if len(positional) > len(order):
                raise TypeError(f"single_turn takes at most {len(order)} positional arguments")
            given = dict(zip(order, positional))
        elif len(positional) <= 2:
            given = dict(zip(("input", "expected_output"), positional))
        explicit = {"input": input, "expected_output": expected_output, "user_query": user_query,
                    "expected_response": expected_response, "eval_id": eval_id or None,
                    "expected_tools": expected_tools, "expected_node_order": expected_node_order,
                    "name": name or None, "description": description or None}
        for key, value in explicit.items():
            if value is None:
                continue
            if key in given:
                raise TypeError(f"single_turn got {key!r} twice")
            given[key] = value
        given.update(kwargs)
        return cls(**given)

    @classmethod
    def multi_turn(cls, *positional: Any, **kwargs: Any) -> EvalCase:
        """A case of several turns: ``multi_turn(conversation, **fields)``, or 10xgraph's
        ``multi_turn(eval_id, conversation, expected_tools=None, name="", description="")``.

        A turn may be an :class:`Invocation`, a dict of its fields, a ``(user_query,
        expected_response)`` pair or a plain question. 10xgraph's ``expected_tools`` attach to
        the first turn, as there.
        """
        names = (("eval_id", "conversation", "expected_tools", "name", "description")
                 if positional and isinstance(positional[0], str) else ("conversation",))
        if len(positional) > len(names):
            raise TypeError(f"multi_turn takes at most {len(names)} positional arguments")
        for key, value in zip(names, positional):
            if key in kwargs:
                raise TypeError(f"multi_turn got {key!r} twice")
            kwargs[key] = value
        conversation = kwargs.pop("conversation", None)
        if conversation is None:
            raise TypeError("multi_turn needs a conversation")
        turns = [_turn(t) for t in conversation]
        expected_tools = kwargs.pop("expected_tools", None)
        if expected_tools and turns:
            turns[0] = turns[0].model_copy(update={"expected_tool_trajectory": [
                t if isinstance(t, ToolCall) else ToolCall.model_validate(t) for t in expected_tools]})
        return cls(conversation=turns, **kwargs)

    # Views used by criteria -------------------------------------------------------------

    def last_expected_response(self) -> str | None:
        """The last non-empty expected final response across turns (10xgraph's rule)."""
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
    def input_text(self) -> str:
        """The input's text: text parts joined by newlines ("" for no input)."""
        if self.input is None or isinstance(self.input, str):
            return self.input or ""
        return _text_of(self.input)

    @property
    def media(self) -> list[ImagePart | DocumentPart]:
        """Every image and PDF the case holds (input, context, expected output, every turn's
        message and expected response), in that order, each once by content."""
        sources: list[Any] = [self.input, self.context, self.expected_media]
        for turn in self.conversation:
            sources += [turn.user_content, turn.expected_media]
        return distinct_parts(item for source in sources
                              for item in (source if isinstance(source, list) else ())
                              if isinstance(item, (ImagePart, DocumentPart)))

    @property
    def text_context(self) -> str | list[str] | None:
        """``context`` as given, less its images and PDFs (a list keeps its text items)."""
        if isinstance(self.context, list):
            return [chunk for chunk in self.context if isinstance(chunk, str)]
        return self.context

    @property
    def context_chunks(self) -> list[str]:
        """The context's text chunks (its images and PDFs are in ``media``)."""
        if self.context is None:
            return []
        if isinstance(self.context, str):
            return [self.context] if self.context else []
        return [c for c in self.context if isinstance(c, str) and c]

    @property
    def context_text(self) -> str:
        return "\n\n".join(self.context_chunks)

    # multivon's reads of the same case.
    @property
    def case_id(self) -> str:
        return self.eval_id

    @property
    def source_id(self) -> str | None:
        return self.metadata.get("source_id")

    @property
    def revision(self) -> str | None:
        return self.metadata.get("revision")

    @property
    def expected_tool_calls(self) -> list[str] | None:
        """The expected tools' names, in order; ``[]`` when the case asserts that no tool is
        called, ``None`` when it expects nothing about tools."""
        names = [call.name for turn in self.conversation for call in turn.expected_tool_trajectory]
        return names if names or EXPECTS_NO_TOOLS in self.metadata else None

    def context_str(self) -> str:
        return self.context_text

    @property
    def agent_trace(self) -> list[Any] | None:
        """The agent steps recorded with the case (multivon's ``agent_trace``), else ``None``."""
        return stored_trace(self.metadata)

    @property
    def display_name(self) -> str:
        """How people recognise the case: its name, else its first user message, else its id."""
        if self.name:
            return self.name
        first = " ".join(self.conversation[0].user_text.split()) if self.conversation else ""
        if not first:
            return self.eval_id
        return first if len(first) <= DISPLAY_NAME_CHARS else first[:DISPLAY_NAME_CHARS - 1] + "…"


def _turn(value: Any) -> Invocation:
    if isinstance(value, Invocation):
        return value
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(
            v is None or isinstance(v, str) for v in value):
        return Invocation.simple(value[0], value[1])
    if isinstance(value, str):
        return Invocation.simple(value)
    return Invocation.model_validate(value)
