"""OTLP/JSON spans -> recorded runs (OpenTelemetry GenAI conventions and OpenInference).

A turn is a user message: one trace is one turn, unless it holds several outermost agent
spans sent different user messages; traces that share ``gen_ai.conversation.id`` (or
OpenInference's ``session.id``) are the turns of one conversation, in start order.

Both GenAI convention generations read: the current one (``gen_ai.input.messages`` and
``gen_ai.output.messages`` with typed parts, ``gen_ai.tool.call.arguments``/``.result``,
``gen_ai.provider.name``) and the one before 1.37 still emitted by default (flattened
``gen_ai.prompt.N.*``/``gen_ai.completion.N.*``, ``gen_ai.usage.prompt_tokens``/
``completion_tokens``, no tool arguments on ``execute_tool``).

Tool arguments and results are opt-in attributes. When a tool span lacks them they are taken
from the model's own recorded tool call (same call id: ``gen_ai.output.messages`` tool_call
parts, or the v1.28-1.36 ``gen_ai.choice`` events) if the trace has it; otherwise the run says
so in its notes, and the arguments read as not recorded (``args`` None), never as none ({}).

Images and PDFs (GenAI ``blob``/``uri`` parts, OpenInference image contents, provider parts in
event bodies) are read through ``_media``: the user's into the turn's content, the model's into
the run's ``outputs``, a tool's into its result; one that cannot be read is a note.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from referee.adapters._base import NumberedRecord, RecordedRun, record_location, with_notes
from referee.adapters._media import (
    MediaPart,
    Part,
    add_unique,
    content_parts,
    load_media,
    media_of,
    said,
    with_media,
)
from referee.adapters._messages import (
    message_dict,
    message_text,
    parse_arguments,
    parse_result,
    role_of,
)
from referee.case import ToolCall
from referee.content._load import is_part
from referee.content._media import DOCUMENT_TYPES
from referee.content._parts import TextPart
from referee.errors import InputError
from referee.execution import ExecutionResult, TurnResult
from referee.usage import TokenUsage

_LLM_OPERATIONS = ("chat", "text_completion", "generate_content")
_CONVERSATION_KEYS = ("gen_ai.conversation.id", "session.id")
# (name, arguments, result, call id) attributes of a tool span, newest convention first;
# tool_arguments/tool_response are what pydantic-ai emitted before gen_ai.tool.call.* existed.
_TOOL_NAME_KEYS = ("gen_ai.tool.name", "tool.name")
_TOOL_ID_KEYS = ("gen_ai.tool.call.id", "tool.id", "tool_call.id")
_TOOL_ARGUMENT_KEYS = ("gen_ai.tool.call.arguments", "tool_arguments", "input.value")
_TOOL_RESULT_KEYS = ("gen_ai.tool.call.result", "tool_response", "output.value")
_INPUT_TOKEN_KEYS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens",
                     "llm.token_count.prompt")
_OUTPUT_TOKEN_KEYS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens",
                      "llm.token_count.completion")
_CACHE_READ_KEYS = ("gen_ai.usage.cache_read.input_tokens",
                    "llm.token_count.prompt_details.cache_read")
_CACHE_WRITE_KEYS = ("gen_ai.usage.cache_creation.input_tokens",
                     "llm.token_count.prompt_details.cache_write")
_AGENT_NAME_KEYS = ("gen_ai.agent.name", "agent.name")
# OpenInference's TraceConfig (hide_inputs, hide_outputs...) writes this in place of content.
REDACTED = "__REDACTED__"
# v1.28-1.36 GenAI events (OTLP log records or span events) and the role each one carries.
_EVENT_ROLES = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
                "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}
_CHOICE_EVENT = "gen_ai.choice"
_EVENT_CONTENT = "gen_ai.event.content"


@dataclass
class _Message:
    role: str
    text: str = ""
    calls: list[tuple[str | None, str, Any]] = field(default_factory=list)  # (id, name, args)
    tool_call_id: str | None = None  # a tool result's call
    # Its text and media parts in order, when it holds an image or PDF (else empty).
    parts: list[Part] = field(default_factory=list)
    # False when the instrumentation kept the message but left its content out (v1.28-1.36
    # events without opt-in capture: a bare tool message, tool calls without arguments).
    recorded: bool = True


@dataclass
class _Span:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start: int
    end: int
    attrs: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    order: int
    path: str  # file and position, for messages
    logged: list[tuple[str, Any]] = field(default_factory=list)  # (event name, body) from logs

    @property
    def where(self) -> str:
        return f"{self.path} (span {self.span_id} '{self.name}')"

    @property
    def kind(self) -> str:
        operation = str(self.attrs.get("gen_ai.operation.name") or "")
        openinference = str(self.attrs.get("openinference.span.kind") or "").upper()
        if openinference == "TOOL" and not operation and self.first(_TOOL_NAME_KEYS) is None:
            # The Agents SDK instrumentor's handoff span ("handoff to X"): a change of agent,
            # which the agent spans already record, not a call of a tool.
            return "other"
        if operation == "execute_tool" or openinference == "TOOL" or (
                not operation and self.name.startswith("execute_tool ")):
            return "tool"
        if operation == "invoke_agent" or openinference == "AGENT" or (
                not operation and self.name.startswith("invoke_agent ")):
            return "agent"
        if operation in _LLM_OPERATIONS or openinference == "LLM":
            return "llm"
        return "other"

    def first(self, keys: tuple[str, ...]) -> tuple[str, Any] | None:
        for key in keys:
            if self.attrs.get(key) not in (None, ""):
                return key, self.attrs[key]
        return None


# OTLP/JSON decoding -----------------------------------------------------------------------------

def _any_value(value: Any, where: str, key: str) -> Any:
    if not isinstance(value, Mapping):
        raise InputError(f"got {type(value).__name__}", source=where, field=f"attributes.{key}",
                         expected="an OTLP AnyValue object such as {\"stringValue\": ...}")
    if not value:
        return None
    if "stringValue" in value:
        return value["stringValue"]
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        try:
            return int(value["intValue"])  # int64 is a JSON string in OTLP/JSON
        except (TypeError, ValueError):
            raise InputError(f"got {value['intValue']!r}", source=where,
                             field=f"attributes.{key}.intValue", expected="an integer") from None
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "arrayValue" in value:
        return [_any_value(v, where, key) for v in (value["arrayValue"] or {}).get("values") or []]
    if "kvlistValue" in value:
        return _attributes((value["kvlistValue"] or {}).get("values"), where, f"{key}.")
    if "bytesValue" in value:
        return value["bytesValue"]
    raise InputError(f"unknown value type {sorted(value)}", source=where,
                     field=f"attributes.{key}",
                     expected="stringValue, intValue, doubleValue, boolValue, arrayValue, "
                              "kvlistValue or bytesValue")


def _attributes(raw: Any, where: str, prefix: str = "") -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise InputError(f"got {type(raw).__name__}", source=where,
                         field=f"{prefix}attributes" if not prefix else prefix.rstrip("."),
                         expected="a list of {\"key\": ..., \"value\": {...}}")
    out: dict[str, Any] = {}
    for item in raw:
        if not isinstance(item, Mapping) or not isinstance(item.get("key"), str):
            raise InputError(f"got {item!r:.60}", source=where, field=f"{prefix}attributes",
                             expected="{\"key\": NAME, \"value\": {...}}")
        out[item["key"]] = _any_value(item.get("value"), where, prefix + item["key"])
    return out


def _read_spans(record: Any, source: str, first_order: int,
                broken: dict[str, str]) -> list[_Span]:
    """The record's spans; a span that cannot be read marks its trace in ``broken`` instead."""
    if not isinstance(record, Mapping) or not isinstance(record.get("resourceSpans"), list):
        raise InputError("no resourceSpans list", source=source, field="resourceSpans",
                         expected="an OTLP/JSON trace export")
    spans: list[_Span] = []
    for ri, resource_spans in enumerate(record["resourceSpans"]):
        scopes = (resource_spans or {}).get("scopeSpans") or []
        for si, scope in enumerate(scopes):
            for pi, raw in enumerate((scope or {}).get("spans") or []):
                path = f"resourceSpans[{ri}].scopeSpans[{si}].spans[{pi}]"
                if not isinstance(raw, Mapping) or not raw.get("traceId"):
                    raise InputError("missing" if isinstance(raw, Mapping) else
                                     f"got {type(raw).__name__}", source=source,
                                     field=f"{path}.traceId", expected="a span with its trace id")
                try:
                    spans.append(_span(raw, f"{source}: {path}", first_order + len(spans)))
                except InputError as exc:
                    broken.setdefault(str(raw["traceId"]), str(exc))
    return spans


def _span(raw: Mapping[str, Any], path: str, order: int) -> _Span:
    if not raw.get("spanId"):
        raise InputError("missing", source=path, field="spanId", expected="the span's hex id")
    where = f"{path} (span {raw['spanId']} '{raw.get('name', '')}')"
    events = [(str(e.get("name", "")), _attributes(e.get("attributes"), where))
              for e in raw.get("events") or [] if isinstance(e, Mapping)]
    try:
        start, end = int(raw.get("startTimeUnixNano") or 0), int(raw.get("endTimeUnixNano") or 0)
    except (TypeError, ValueError):
        raise InputError("not an integer", source=where, field="startTimeUnixNano",
                         expected="nanoseconds since the epoch") from None
    return _Span(trace_id=str(raw["traceId"]), span_id=str(raw["spanId"]),
                 parent_id=str(raw.get("parentSpanId") or ""), name=str(raw.get("name", "")),
                 start=start, end=end, attrs=_attributes(raw.get("attributes"), where),
                 events=events, order=order, path=path)


# Messages in each convention ---------------------------------------------------------------------

def _indexed(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """Un-flatten ``prefix.0.a.b = v`` attributes into ``[{"a": {"b": v}}]``."""
    items: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if not key.startswith(prefix):
            continue
        index, _, rest = key[len(prefix):].partition(".")
        if not index.isdigit() or not rest:
            continue
        node = items.setdefault(int(index), {})
        *parents, leaf = rest.split(".")
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                break
        else:
            node[leaf] = value
    return [items[i] for i in sorted(items)]


def _numbered(node: Any) -> list[Any]:
    """The values of an un-flattened ``{"0": ..., "1": ...}`` node, in index order."""
    if isinstance(node, list):
        return node
    if not isinstance(node, Mapping):
        return []
    return [node[k] for k in sorted((k for k in node if str(k).isdigit()), key=int)]


def _json_list(value: Any, where: str, key: str) -> list[Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise InputError(f"not valid JSON ({exc.msg})", source=where,
                             field=f"attributes.{key}",
                             expected="a JSON list of messages") from None
    if isinstance(value, Mapping):
        value = [value]
    if not isinstance(value, list):
        raise InputError(f"got {type(value).__name__}", source=where, field=f"attributes.{key}",
                         expected="a list of messages")
    return value


@dataclass
class _Source:
    """Where a message was read (the span and attribute), and the notes of its trace."""

    where: str
    field: str
    notes: list[str]

    def at(self, suffix: str) -> _Source:
        return _Source(self.where, f"{self.field}{suffix}", self.notes)

    def left_out(self, what: str) -> None:
        self.notes.append(f"{self.where}: field '{self.field}': {what}; the part is left out")


def _parts_message(raw: Any, source: _Source) -> _Message | None:
    """A current-convention message: ``{"role", "parts": [{"type": "text"|"tool_call"|...}]}``;
    ``blob`` (inline base64), ``uri`` (a reference) and ``file`` (an uploaded file's id) parts
    carry its media."""
    if not isinstance(raw, Mapping):
        return None
    message = _Message(role=str(raw.get("role", "")))
    texts = []
    ordered: list[Part] = []
    for index, part in enumerate(raw.get("parts") or []):
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind == "text":
            texts.append(str(part.get("content", "")))
            ordered.append(TextPart(text=texts[-1]))
        elif kind in ("blob", "uri", "file"):
            media = _genai_media(part, source.at(f".parts[{index}]"))
            if media is not None:
                ordered.append(media)
        elif kind == "tool_call":
            message.calls.append((part.get("id"), str(part.get("name", "")),
                                  part.get("arguments")))
        elif kind == "tool_call_response":
            result = part.get("response", part.get("result"))
            message.tool_call_id = str(part.get("id")) if part.get("id") is not None else None
            texts.append(result if isinstance(result, str) else json.dumps(result))
    message.text = "\n".join(t for t in texts if t)
    message.parts = ordered if media_of(ordered) else []
    return message


def _genai_media(part: Mapping[str, Any], source: _Source) -> Part | None:
    """A GenAI ``blob``/``uri``/``file`` part as an image or PDF; None, with a note, for what
    cannot be one: another modality, an uploaded file's bare id, content the instrumentation
    left out, bytes that do not decode."""
    kind, modality = part.get("type"), part.get("modality")
    mime_type = part.get("mime_type") or part.get("mimeType") or ""
    if modality != "image" and mime_type not in DOCUMENT_TYPES:
        source.left_out(f"a {kind} part of modality {modality!r} "
                        f"({mime_type or 'no mime_type'}); referee reads images and PDFs")
        return None
    if kind == "file":
        source.left_out(f"an uploaded file named by its id {part.get('file_id')!r}, whose bytes "
                        f"the trace does not hold")
        return None
    if kind == "blob" and part.get("content") in (None, "", REDACTED):
        source.left_out(f"the {modality} blob's content was left out by the instrumentation "
                        f"(redacted or not captured)")
        return None
    return load_media(dict(part), source.where, source.field, source.notes)


def _flat_message(raw: Mapping[str, Any], source: _Source) -> _Message:
    """A flattened message: OpenInference's ``message.*`` or the older ``gen_ai.prompt.N.*``."""
    nested = isinstance(raw.get("message"), Mapping)
    inner = raw["message"] if nested else raw
    source = source.at(".message") if nested else source
    content = inner.get("content")
    message = _Message(role=str(inner.get("role", "")),
                       text=message_text(content) if not isinstance(content, Mapping) else "",
                       tool_call_id=inner.get("tool_call_id"))
    if inner.get("contents") is not None:  # OpenInference's multi-part message
        message.parts = _openinference_parts(_numbered(inner["contents"]),
                                             source.at(".contents"))
        message.text = message.text or "\n".join(
            p.text for p in message.parts if isinstance(p, TextPart) and p.text)
        message.parts = message.parts if media_of(message.parts) else []
    else:
        message.parts = content_parts(content, source.where, f"{source.field}.content",
                                      source.notes)
    for item in _numbered(inner.get("tool_calls")):
        call: Mapping[str, Any] = item.get("tool_call", item) if isinstance(item, Mapping) else {}
        named = call.get("function")
        function: Mapping[str, Any] = named if isinstance(named, Mapping) else call
        message.calls.append((call.get("id"), str(function.get("name", "")),
                              function.get("arguments")))
    message.recorded = "content" in inner or "contents" in inner or any(
        args is not None for *_, args in message.calls)
    return message


def _openinference_parts(contents: list[Any], source: _Source) -> list[Part]:
    """``message.contents.M.message_content.{type, text, image.image.url}``, in order."""
    parts: list[Part] = []
    for index, item in enumerate(contents):
        found = item.get("message_content", item) if isinstance(item, Mapping) else None
        content: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        here = source.at(f".{index}.message_content")
        if content.get("type") == "text" and isinstance(content.get("text"), str):
            parts.append(TextPart(text=content["text"]))
        elif content.get("type") == "image":
            image = content.get("image")
            image = image.get("image", image) if isinstance(image, Mapping) else {}
            url = image.get("url") if isinstance(image, Mapping) else None
            here = here.at(".image.image.url")
            if url in (None, "", REDACTED):
                here.left_out("the image was left out by the instrumentation (redacted, or "
                              "over its base64 length limit)")
                continue
            part = load_media({"type": "image_url", "image_url": {"url": url}}, here.where,
                              here.field, here.notes)
            if part is not None:
                parts.append(part)
    return parts


def _event_messages(events: list[tuple[str, Any]], direction: str,
                    source: _Source) -> list[_Message]:
    """Messages from v1.28-1.36 GenAI events: ``gen_ai.{system,user,assistant,tool}.message``
    are the model's input, ``gen_ai.choice`` (``{"message": {...}}``) its output. The body is
    the log record's, or a span event's attributes, or the JSON text some SDKs (Azure AI
    Inference, Semantic Kernel) put in a span event's ``gen_ai.event.content``."""
    messages = []
    for name, body in events:
        if isinstance(body, Mapping) and _EVENT_CONTENT in body:
            text = body[_EVENT_CONTENT]
            body = _as_object(text) or {"content": text}
        # An empty body is an event whose content was not captured (opt-in), not empty text.
        body = body if isinstance(body, Mapping) else {} if body is None else {"content": body}
        if direction == "input" and name in _EVENT_ROLES:
            raw = {"role": body.get("role") or _EVENT_ROLES[name],
                   "tool_calls": body.get("tool_calls"),
                   "tool_call_id": body.get("id") if name == "gen_ai.tool.message" else None}
            if "content" in body:  # absent, not empty, without the opt-in content capture
                raw["content"] = body["content"]
            messages.append(_flat_message(raw, source.at(f"event {name}")))
        elif direction == "output" and name == _CHOICE_EVENT:
            found = body.get("message")
            inner: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
            messages.append(_flat_message({"role": inner.get("role") or "assistant", **{
                k: v for k, v in inner.items() if k != "role"}}, source.at(f"event {name}")))
    return messages


def _messages(span: _Span, direction: str, notes: list[str]) -> list[_Message]:
    """The span's input or output messages, in whichever convention it was written; what its
    media parts leave unreadable is noted in ``notes``."""
    current = f"gen_ai.{direction}.messages"
    if span.attrs.get(current) is not None:
        return [m for m in (_parts_message(raw, _Source(span.where, f"attributes.{current}[{i}]",
                                                         notes))
                            for i, raw in enumerate(_json_list(span.attrs[current], span.where,
                                                               current))) if m]
    openinference = "llm.input_messages." if direction == "input" else "llm.output_messages."
    older = "gen_ai.prompt." if direction == "input" else "gen_ai.completion."
    for prefix in (openinference, older):
        flat = _indexed(span.attrs, prefix)
        if flat:
            return [_flat_message(raw, _Source(span.where, f"attributes.{prefix}{i}", notes))
                    for i, raw in enumerate(flat)]
    # Older still: a span event carrying the JSON list (gen_ai.content.prompt/completion).
    event_key = "gen_ai.prompt" if direction == "input" else "gen_ai.completion"
    for _, attrs in span.events:
        if attrs.get(event_key) is not None:
            return [_flat_message(raw, _Source(span.where, f"event {event_key}[{i}]", notes))
                    for i, raw in enumerate(_json_list(attrs[event_key], span.where, event_key))
                    if isinstance(raw, Mapping)]
    # v1.28-1.36: one event per message, as span events or (the default) OTLP log records.
    return _event_messages([*span.events, *span.logged], direction,
                           _Source(span.where, "", notes))


# One turn: tool calls, node visits, texts and usage --------------------------------------------

def _int_attr(span: _Span, keys: tuple[str, ...]) -> int | None:
    found = span.first(keys)
    if found is None:
        return None
    try:
        return int(found[1])
    except (TypeError, ValueError):
        raise InputError(f"got {found[1]!r}", source=span.where, field=f"attributes.{found[0]}",
                         expected="a token count") from None


class _Tree:
    """Parent links of one trace's spans."""

    def __init__(self, spans: list[_Span]) -> None:
        self.by_id = {s.span_id: s for s in spans}

    def ancestors(self, span: _Span) -> list[_Span]:
        found, seen = [], {span.span_id}
        parent = self.by_id.get(span.parent_id)
        while parent is not None and parent.span_id not in seen:  # a cycle is no ancestry
            found.append(parent)
            seen.add(parent.span_id)
            parent = self.by_id.get(parent.parent_id)
        return found


def _usage(spans: list[_Span], tree: _Tree) -> TokenUsage | None:
    """Model calls' token counts; agent spans' only when no model call has any (no double count)."""
    def of(selected: list[_Span]) -> TokenUsage | None:
        usages = []
        for span in selected:
            inputs = _int_attr(span, _INPUT_TOKEN_KEYS)
            outputs = _int_attr(span, _OUTPUT_TOKEN_KEYS)
            if inputs is not None or outputs is not None:
                usages.append(TokenUsage(
                    input_tokens=inputs or 0, output_tokens=outputs or 0,
                    cached_input_tokens=_int_attr(span, _CACHE_READ_KEYS) or 0,
                    cache_write_tokens=_int_attr(span, _CACHE_WRITE_KEYS) or 0,
                    requests=1 if span.kind == "llm" else 0))
        return TokenUsage.total(usages)

    return of([s for s in spans if s.kind == "llm"]) or of(
        [s for s in spans if _outermost_agent(s, tree)])


def _outermost_agent(span: _Span, tree: _Tree) -> bool:
    """An agent span inside no other agent span."""
    return span.kind == "agent" and not any(a.kind == "agent" for a in tree.ancestors(span))


def _agent_name(span: _Span) -> str | None:
    """The agent an agent span names, or None for a nameless OpenInference AGENT span."""
    found = span.first(_AGENT_NAME_KEYS)
    if found is not None:
        return str(found[1])
    if span.name.startswith("invoke_agent"):
        return span.name.removeprefix("invoke_agent").strip() or span.name
    return None


def _graph_node(span: _Span) -> str | None:
    """LangGraph's ``langgraph_node``, which LangChain instrumentations copy into ``metadata``."""
    metadata = _as_object(span.attrs.get("metadata"))
    node = metadata.get("langgraph_node") if metadata is not None else None
    node = node if node is not None else span.attrs.get("metadata.langgraph_node")
    return str(node) if node not in (None, "") else None


def _in_graph_step(span: _Span, tree: _Tree) -> bool:
    """The span is (or runs inside) a LangGraph node."""
    return any(_graph_node(s) is not None for s in [span, *tree.ancestors(span)])


def _calling_tool(span: _Span, tree: _Tree) -> _Span | None:
    """The tool span ``span`` ran inside (an agent used as a tool), if any: the nearest."""
    return next((a for a in tree.ancestors(span) if a.kind == "tool"), None)


def _node_visits(spans: list[_Span], tree: _Tree) -> list[tuple[_Span, str]] | None:
    """Graph nodes or agents that ran, in start order, each with its span; None when no span
    can say.

    LangGraph: each span of a node carries ``langgraph_node``; a visit is the outermost one
    (the node's model calls, tools and nested subgraph nodes run inside it, as the live
    ``stream_mode="updates"`` shows only the top-level nodes). Otherwise each agent span is a
    visit, except a nameless one around other agents (the Agents SDK's ``Agent workflow``).
    An agent inside a tool span (an agent used as a tool) is a visit of that call's inner run.
    """
    nodes = {s.span_id: _graph_node(s) for s in tree.by_id.values()}
    if any(nodes[s.span_id] for s in spans):
        return [(s, str(nodes[s.span_id])) for s in spans if nodes[s.span_id]
                and not any(nodes[a.span_id] for a in tree.ancestors(s))]
    agents = [s for s in spans if s.kind == "agent"]
    if not agents:
        return None
    around_others = {a.span_id for other in agents for a in tree.ancestors(other)}
    return [(span, name or span.name) for span in agents
            if (name := _agent_name(span)) is not None or span.span_id not in around_others]


def _redacted(value: Any, what: str, where: str, notes: list[str]) -> bool:
    if value == REDACTED:
        notes.append(f"{where}: the {what} was redacted by the instrumentation "
                     f"('{REDACTED}'); read as unknown")
        return True
    return False


def _tool_message(value: Any) -> tuple[Any, str | None] | None:
    """(content, tool_call_id) of a LangChain ``ToolMessage`` serialised as a tool's output."""
    value = _as_object(value)
    if value is None:
        return None
    try:
        message = message_dict(value, "", 0)
        if role_of(message, "", 0) != "tool":
            return None
    except InputError:
        return None
    call_id = message.get("tool_call_id")
    return message_text(message.get("content")), str(call_id) if call_id is not None else None


@dataclass
class _ModelCall:
    call_id: str | None
    name: str
    arguments: Any
    taken: bool = False


def _tool_from_span(span: _Span, model_calls: list[_ModelCall], model_results: dict[str, Any],
                    notes: list[str], unknown: set[str]) -> ToolCall:
    found_name = span.first(_TOOL_NAME_KEYS)
    name = str(found_name[1]) if found_name else span.name.removeprefix("execute_tool ").strip()
    if not name or name == "execute_tool":
        raise InputError("missing", source=span.where, field="attributes.gen_ai.tool.name",
                         expected="the tool's name (gen_ai.tool.name or tool.name)")
    found_id = span.first(_TOOL_ID_KEYS)
    call_id = str(found_id[1]) if found_id else None
    found_result = span.first(_TOOL_RESULT_KEYS)
    raw_result = found_result[1] if found_result is not None else None
    message = _tool_message(raw_result) if raw_result is not None else None
    if message is not None:  # LangChain records the ToolMessage it built, id and all
        raw_result, call_id = message[0], call_id or message[1]
    found_args = span.first(_TOOL_ARGUMENT_KEYS)
    by_id = next((c for c in model_calls if call_id is not None and c.call_id == call_id), None)
    if by_id is None and call_id is None:
        # No id on the span (the Agents SDK's function spans): the model's next call of this
        # tool not yet matched is the one this span ran; same name, and same arguments when
        # the span has them.
        untaken = [c for c in model_calls if not c.taken and c.name == name]
        shown = _as_object(found_args[1]) if found_args is not None else None
        by_id = next((c for c in untaken if shown is not None
                      and _as_object(c.arguments) == shown), untaken[0] if untaken else None)
        if by_id is not None:
            call_id = by_id.call_id
    if by_id is not None:
        by_id.taken = True

    args = _arguments(span, name, found_args, by_id, notes, unknown)

    result: Any = None
    if raw_result is not None and not _redacted(raw_result, f"result of {name!r}", span.where,
                                                notes):
        result = _result_parts(parse_result(raw_result), _Source(
            span.where, f"attributes.{found_result[0] if found_result else ''}", notes))
    elif raw_result is None and call_id in model_results:
        result = parse_result(model_results[call_id])
    else:
        if raw_result is None:
            notes.append(f"{span.where}: gen_ai.tool.call.result not recorded (an opt-in "
                         f"attribute); the result of {name!r} is unknown")
        unknown.add("tool_results")
    return ToolCall(name=name, args=args, result=result, call_id=call_id)


def _result_parts(result: Any, source: _Source) -> Any:
    """A tool result recorded as a list of content parts (text and images, as MCP tools and
    the Responses API return them): its text and its media kept as parts."""
    if not isinstance(result, list) or not any(is_part(item) for item in result):
        return result
    parts = content_parts(result, source.where, source.field, source.notes)
    return [part.text if isinstance(part, TextPart) else part for part in parts]


def _arguments(span: _Span, name: str, found_args: tuple[str, Any] | None,
               by_id: _ModelCall | None, notes: list[str],
               unknown: set[str]) -> dict[str, Any] | None:
    """A tool span's arguments: its own attribute, else its model call's; None (with a note)
    when neither records them, which is not the same as a call without arguments ({})."""
    if found_args is not None and _redacted(found_args[1], f"arguments of {name!r}",
                                            span.where, notes):
        found_args, explained = None, True
    elif found_args is not None and found_args[0] == "input.value" and not _is_json_object(
            found_args[1]):
        found_args = None  # OpenInference's input.value is whatever the tool took, often text
        explained = by_id is None or by_id.arguments is None
        if explained:
            notes.append(f"{span.where}: input.value is not a JSON object, so the arguments "
                         f"of {name!r} are not recorded (read as null)")
    else:
        explained = False
    if found_args is not None:
        return parse_arguments(found_args[1], span.where, f"attributes.{found_args[0]}")
    if by_id is not None and by_id.arguments is not None:
        return parse_arguments(by_id.arguments, span.where,
                               f"the model's tool call {by_id.call_id} arguments")
    unknown.add("tool_args")
    if explained:
        return None
    if by_id is not None:
        notes.append(f"{span.where}: gen_ai.tool.call.arguments not recorded (an opt-in "
                     f"attribute), nor on the model's call {by_id.call_id or name!r} (content "
                     f"capture is opt-in); the arguments of {name!r} are not recorded (read as "
                     f"null)")
    else:
        notes.append(f"{span.where}: gen_ai.tool.call.arguments not recorded (an opt-in "
                     f"attribute) and no model tool call with this id; the arguments of "
                     f"{name!r} are not recorded (read as null)")
    return None


def _model_call(call: _ModelCall, index: int, model_results: Mapping[str, Any],
                unsent_results: set[str], where: str, notes: list[str],
                unknown: set[str]) -> ToolCall:
    """A tool call as only the model's own record shows it (no tool span)."""
    args = None
    if call.arguments is not None:
        args = parse_arguments(call.arguments, where, f"tool_calls[{index}].arguments")
    else:
        notes.append(f"{where}: the model's call {call.call_id or index} of {call.name!r} "
                     f"records no arguments (content capture is opt-in); read as null")
        unknown.add("tool_args")
    if call.call_id in unsent_results:
        notes.append(f"{where}: the tool message answering the model's call {call.call_id} "
                     f"of {call.name!r} records no content (capture is opt-in); its result is "
                     f"unknown")
        unknown.add("tool_results")
    if call.call_id is None or call.call_id not in model_results:
        return ToolCall(name=call.name, args=args, call_id=call.call_id)
    return ToolCall(name=call.name, args=args, call_id=call.call_id,
                    result=parse_result(model_results[call.call_id]))


def _as_object(value: Any) -> Mapping[str, Any] | None:
    """``value`` as a JSON object (given as one or as its text), else None."""
    if isinstance(value, Mapping):
        return value
    try:
        parsed = json.loads(value)
    except (TypeError, ValueError, RecursionError):
        return None
    return parsed if isinstance(parsed, dict) else None


def _is_json_object(value: Any) -> bool:
    return _as_object(value) is not None


@dataclass
class _Turn:
    turn: TurnResult
    usage: TokenUsage | None
    visits_recorded: bool
    unknown: set[str]  # execution fields this turn's spans could not carry
    said: Any = ""  # the user's message: its text, or its parts when it holds media
    outputs: list[MediaPart] = field(default_factory=list)  # the images the model answered with


def _user_messages(spans: list[_Span], inputs: Mapping[str, list[_Message]]) -> list[_Message]:
    """The user messages the first model call was sent (the conversation so far), or those of
    the first other span that shows any: an enclosing chain or agent span may show only the
    conversation's first message. The turn's own message is the last one."""
    by_kind = [s for s in spans if s.kind == "llm"] + [s for s in spans if s.kind != "llm"]
    for span in by_kind:
        users = [m for m in inputs[span.span_id] if m.role == "user" and (m.text or m.parts)]
        if users:
            return users
    return []


def _said_key(messages: list[_Message]) -> list[tuple[str, list[str]]]:
    """User messages as compared between turns: their text and their media's hashes."""
    return [(m.text, [p.content_key() for p in media_of(m.parts)]) for m in messages]


def _turn(spans: list[_Span], tree: _Tree, notes: list[str]) -> _Turn:
    spans = sorted(spans, key=lambda s: (s.start, s.order))
    inputs = {s.span_id: _messages(s, "input", notes) for s in spans}
    outputs = {s.span_id: _messages(s, "output", notes) for s in spans}
    model_calls: dict[str, _ModelCall] = {}  # by id (or position), in the order they were made
    model_results: dict[str, Any] = {}  # call id -> result sent back to the model
    unsent_results: set[str] = set()  # call ids whose result was sent, its content not recorded
    for span in spans:
        for message in outputs[span.span_id]:
            for call_id, name, arguments in message.calls:
                key = str(call_id) if call_id is not None else f"#{len(model_calls)}"
                model_calls.setdefault(key, _ModelCall(
                    str(call_id) if call_id is not None else None, name, arguments))
        for message in inputs[span.span_id]:
            if message.role == "tool" and message.tool_call_id is not None:
                if message.recorded:
                    model_results[str(message.tool_call_id)] = with_media(
                        parse_result(message.text), media_of(message.parts))
                else:
                    unsent_results.add(str(message.tool_call_id))
    unknown: set[str] = set()
    turn = TurnResult()
    users = _user_messages(spans, inputs)
    if users:
        turn.user_content = users[-1].text
    else:
        root_input = next((s.attrs.get("input.value") for s in spans
                           if not s.parent_id and s.attrs.get("input.value")), None)
        turn.user_content = str(root_input or "")

    tool_spans = [s for s in spans if s.kind == "tool"]
    notes.extend(f"{s.where}: a TOOL span without tool.name; not counted as a tool call"
                 for s in spans if s.kind == "other" and not s.name.startswith("handoff to ")
                 and str(s.attrs.get("openinference.span.kind") or "").upper() == "TOOL")
    calls = list(model_calls.values())
    by_span: dict[str, ToolCall] = {}  # each tool span's call, to nest inner runs under
    if tool_spans:
        for span in tool_spans:  # in start order: a calling tool before the calls inside it
            made = _tool_from_span(span, calls, model_results, notes, unknown)
            by_span[span.span_id] = made
            caller = _calling_tool(span, tree)
            if caller is not None and caller.span_id in by_span:
                by_span[caller.span_id].nested_calls.append(made)
            else:
                turn.tool_calls.append(made)
    else:  # only the model was instrumented: its own tool calls are the trajectory
        turn.tool_calls.extend(_model_call(call, j, model_results, unsent_results,
                                           spans[0].where, notes, unknown)
                               for j, call in enumerate(calls))
    visits = _node_visits(spans, tree)
    for span, name in visits or []:
        caller = _calling_tool(span, tree)
        if caller is not None and caller.span_id in by_span:
            by_span[caller.span_id].nested_node_visits.append(name)
        else:
            turn.node_visits.append(name)

    answered = [(s.end, s.order, m.text) for s in spans for m in outputs[s.span_id]
                if m.role in ("assistant", "") and m.text]
    roots = [s for s in spans if not s.parent_id and s.attrs.get("output.value")]
    if answered:
        turn.response = max(answered)[2]
    elif roots:
        turn.response = str(roots[-1].attrs["output.value"])
    where = spans[0].where if spans else ""
    if _redacted(turn.response, "response", where, notes):
        turn.response = ""
        unknown.add("actual_response")
    redacted_user = _redacted(turn.user_content, "user message", where, notes)
    if redacted_user:
        turn.user_content = ""
    outputs_made: list[MediaPart] = []
    for span in spans:
        for message in outputs[span.span_id]:
            if message.role in ("assistant", ""):
                add_unique(outputs_made, media_of(message.parts))
    models = [s for s in spans if s.kind == "llm"]
    if models and not any(m.recorded for s in models
                          for m in [*inputs[s.span_id], *outputs[s.span_id]]):
        # The GenAI instrumentations' default: no content on the spans (opt-in), and with the
        # v1.28-1.36 conventions it goes to the logs pipeline when enabled, where the events
        # without it still name the model's tool calls.
        unknown.add("content")
        if not answered and not roots:
            unknown.add("actual_response")
        if not tool_spans and not calls:
            unknown.add("tool_calls")
    spoken = said(turn.user_content, users[-1].parts) if users and not redacted_user \
        else turn.user_content
    return _Turn(turn, _usage(spans, tree), visits is not None, unknown, spoken, outputs_made)


def _turn_spans(spans: list[_Span], tree: _Tree) -> list[list[_Span]]:
    """A trace's turns: one per user message, started by an outermost agent span (a trace
    holding two top-level ``invoke_agent`` spans holds two turns of the conversation); the
    whole trace without.

    A turn is a user message, not an agent or model call: agent spans that were sent the same
    user messages as the one before (a handoff, a ReAct loop's next step) continue its turn,
    and an agent span inside a LangGraph node (the prebuilt ReAct agent's ``agent`` node is an
    AGENT span, once per tool round) is a step of the graph run that holds it.
    """
    outermost = sorted((s for s in spans if _outermost_agent(s, tree)
                        and not _in_graph_step(s, tree)), key=lambda s: (s.start, s.order))
    if len(outermost) < 2:
        return [spans]
    groups: dict[str, list[_Span]] = {s.span_id: [] for s in outermost}
    around_turns = {a.span_id for s in outermost for a in tree.ancestors(s)}
    for span in spans:
        owner = next((a for a in [span, *tree.ancestors(span)] if a.span_id in groups), None)
        if owner is None:  # outside every agent: the turn under way when it started
            owner = next((s for s in reversed(outermost) if s.start <= span.start), outermost[0])
            if not span.parent_id and span.span_id in around_turns:
                continue  # the conversation's own root span is no part of any one turn
        groups[owner.span_id].append(span)
    turns: list[tuple[list[tuple[str, list[str]]], list[_Span]]] = []
    for start in outermost:
        group = groups[start.span_id]
        # The notes of a group's messages are the turn's own, made again when it is read.
        users = _said_key(_user_messages(group, {s.span_id: _messages(s, "input", [])
                                                 for s in group}))
        if turns and users and users == turns[-1][0]:
            turns[-1][1].extend(group)
        else:
            turns.append((users, group))
    return [group for _, group in turns] if len(turns) > 1 else [spans]


def _conversation_id(spans: list[_Span]) -> str | None:
    for span in spans:
        found = span.first(_CONVERSATION_KEYS)
        if found is not None:
            return str(found[1])
    return None


def _unrecorded(fields: set[str], where: str) -> dict[str, str]:
    reasons = {
        "node_visits": f"{where}: no agent or graph-node span, so the trace carries no node "
                       f"visits",
        "actual_response": f"{where}: the trace records no response text",
        "tool_calls": f"{where}: the trace records neither tool spans nor the model's tool "
                      f"calls",
        "tool_args": f"{where}: some tool arguments are not recorded",
        "tool_results": f"{where}: some tool results are not recorded",
    }
    return {name: reasons[name] for name in sorted(fields)}


def _read_logs(record: Mapping[str, Any], source: str) -> list[tuple[str, str, str, Any]]:
    """(trace id, span id, event name, body) of each GenAI event in an OTLP/JSON logs export."""
    events = []
    for ri, resource_logs in enumerate(record.get("resourceLogs") or []):
        for si, scope in enumerate((resource_logs or {}).get("scopeLogs") or []):
            for li, raw in enumerate((scope or {}).get("logRecords") or []):
                where = f"{source}: resourceLogs[{ri}].scopeLogs[{si}].logRecords[{li}]"
                if not isinstance(raw, Mapping):
                    raise InputError(f"got {type(raw).__name__}", source=where,
                                     expected="an OTLP log record")
                attrs = _attributes(raw.get("attributes"), where)
                # eventName is OTLP 1.5's field; earlier SDKs wrote the event.name attribute.
                name = str(raw.get("eventName") or attrs.get("event.name") or "")
                if not name.startswith("gen_ai.") or not raw.get("spanId"):
                    continue
                body = _any_value(raw["body"], where, "body") if raw.get("body") else None
                events.append((str(raw.get("traceId") or ""), str(raw["spanId"]), name, body))
    return events


def read_otlp(records: list[NumberedRecord], source: str,
              logs: tuple[list[NumberedRecord], str] | None = None) -> list[RecordedRun]:
    """Every conversation in OTLP/JSON exports (one per JSONL line, or one JSON document).

    Records holding ``resourceLogs`` are the logs signal of the same run: their GenAI events
    (``gen_ai.*.message``, ``gen_ai.choice``) give the messages of the span they belong to;
    ``logs`` is a separate logs export and its file name.
    """
    spans: list[_Span] = []
    logged: dict[tuple[str, str], list[tuple[str, Any]]] = {}
    broken: dict[str, str] = {}  # trace id -> the first unreadable span's error
    located = [(record, record_location(source, line, index, len(records)))
               for index, (line, record) in enumerate(records)]
    if logs is not None:
        log_records, logs_source = logs
        located += [(record, record_location(logs_source, line, index, len(log_records)))
                    for index, (line, record) in enumerate(log_records)]
    for record, where in located:
        if isinstance(record, Mapping) and "resourceLogs" in record:
            for trace_id, span_id, name, body in _read_logs(record, where):
                logged.setdefault((trace_id, span_id), []).append((name, body))
            if "resourceSpans" not in record:
                continue
        spans.extend(_read_spans(record, where, len(spans), broken))
    for span in spans:
        span.logged = logged.get((span.trace_id, span.span_id), [])
    for trace_id in broken:
        if not any(span.trace_id == trace_id for span in spans):
            spans.append(_Span(trace_id, "", "", "", 0, 0, {}, [], len(spans), source))
    traces: dict[str, list[_Span]] = {}
    for span in spans:
        traces.setdefault(span.trace_id, []).append(span)
    conversations: dict[str, list[tuple[str, list[_Span]]]] = {}
    for trace_id, trace_spans in sorted(traces.items(),
                                        key=lambda kv: min((s.start, s.order) for s in kv[1])):
        key = _conversation_id(trace_spans) or trace_id
        conversations.setdefault(key, []).append((trace_id, trace_spans))
    return [_conversation(run_id, members, broken, source)
            for run_id, members in conversations.items()]


def _conversation(run_id: str, members: list[tuple[str, list[_Span]]], broken: dict[str, str],
                  source: str) -> RecordedRun:
    """One recorded run: the turns of every trace of a conversation, in start order."""
    where = f"{source}: trace {members[0][0]}"
    damage = next((broken[trace_id] for trace_id, _ in members if trace_id in broken), None)
    if damage is not None:
        return RecordedRun(run_id, ExecutionResult(error=damage), where)
    notes: list[str] = []
    try:
        read: list[Any] = []
        for _, trace_spans in members:
            tree = _Tree(trace_spans)
            read.extend(_turn(group, tree, notes) for group in _turn_spans(trace_spans, tree))
    except InputError as exc:
        return RecordedRun(run_id, ExecutionResult(error=str(exc)), where)
    turns = [item.turn for item in read]
    unknown = set().union(*(item.unknown for item in read))
    if not any(item.visits_recorded for item in read):
        unknown.add("node_visits")
    outputs: list[MediaPart] = []
    for item in read:
        add_unique(outputs, item.outputs)
    execution = ExecutionResult(
        actual_response=turns[-1].response,
        tool_calls=[call for turn in turns for call in turn.tool_calls],
        node_visits=[node for turn in turns for node in turn.node_visits],
        turns=turns if len(turns) > 1 else [],
        token_usage=TokenUsage.total([item.usage for item in read]), outputs=outputs)
    execution.metadata["trace_ids"] = [trace_id for trace_id, _ in members]
    if "content" in unknown:
        unknown.discard("content")
        notes.append(f"{where}: the model calls record no message content (the "
                     f"instrumentation's default: content is opt-in, e.g. "
                     f"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT); where it was "
                     f"recorded as OTLP log events, give that file too (--traces-logs)")
    notes = list(dict.fromkeys(notes))  # one note per thing left out, not one per turn
    unrecorded = _unrecorded(unknown, where)
    return RecordedRun(run_id, with_notes(execution, notes, unrecorded), where,
                       notes=notes,
                       user_turns=[item.said for item in read])


class OtlpReader:
    name = "otlp"

    def sniff(self, records: list[Any]) -> bool:
        return any(isinstance(r, Mapping) and "resourceSpans" in r for r in records[:1]) or (
            bool(records) and all(isinstance(r, Mapping) and (
                "resourceSpans" in r or "resourceLogs" in r) for r in records)
            and any("resourceSpans" in r for r in records))

    def read(self, records: list[NumberedRecord], source: str) -> list[RecordedRun]:
        return read_otlp(records, source)
