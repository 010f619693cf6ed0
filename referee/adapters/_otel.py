"""OTLP/JSON spans -> recorded runs (OpenTelemetry GenAI conventions and OpenInference).

One trace is one turn; traces that share ``gen_ai.conversation.id`` (or OpenInference's
``session.id``) are the turns of one conversation, in start order. Both GenAI convention
generations read: the current one (``gen_ai.input.messages``/``gen_ai.output.messages`` with
typed parts, ``gen_ai.tool.call.arguments``/``.result``, ``gen_ai.provider.name``) and the one
before 1.37 still emitted by default (flattened ``gen_ai.prompt.N.*``/``gen_ai.completion.N.*``,
``gen_ai.usage.prompt_tokens``/``completion_tokens``, no tool arguments on ``execute_tool``).

Tool arguments and results are opt-in attributes. When a tool span lacks them they are taken
from the model's own recorded tool call (same call id) if the trace has it; otherwise the run
says so in its notes, and the arguments stay empty rather than guessed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from referee.adapters._base import NumberedRecord, RecordedRun, record_location, with_notes
from referee.adapters._messages import message_text, parse_arguments
from referee.case import ToolCall
from referee.errors import InputError
from referee.execution import ExecutionResult, TurnResult
from referee.usage import TokenUsage

_LLM_OPERATIONS = ("chat", "text_completion", "generate_content")
_CONVERSATION_KEYS = ("gen_ai.conversation.id", "session.id")
# (name, arguments, result, call id) attributes of a tool span, newest convention first;
# tool_arguments/tool_response are what pydantic-ai emitted before gen_ai.tool.call.* existed.
_TOOL_NAME_KEYS = ("gen_ai.tool.name", "tool.name")
_TOOL_ID_KEYS = ("gen_ai.tool.call.id", "tool_call.id")
_TOOL_ARGUMENT_KEYS = ("gen_ai.tool.call.arguments", "tool_arguments", "input.value")
_TOOL_RESULT_KEYS = ("gen_ai.tool.call.result", "tool_response", "output.value")
_INPUT_TOKEN_KEYS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens",
                     "llm.token_count.prompt")
_OUTPUT_TOKEN_KEYS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens",
                      "llm.token_count.completion")


@dataclass
class _Message:
    role: str
    text: str = ""
    calls: list[tuple[str | None, str, Any]] = field(default_factory=list)  # (id, name, args)
    tool_call_id: str | None = None  # a tool result's call


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

    @property
    def where(self) -> str:
        return f"{self.path} (span {self.span_id} '{self.name}')"

    @property
    def kind(self) -> str:
        operation = str(self.attrs.get("gen_ai.operation.name") or "")
        openinference = str(self.attrs.get("openinference.span.kind") or "").upper()
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


def _parts_message(raw: Any) -> _Message | None:
    """A current-convention message: ``{"role", "parts": [{"type": "text"|"tool_call"|...}]}``."""
    if not isinstance(raw, Mapping):
        return None
    message = _Message(role=str(raw.get("role", "")))
    texts = []
    for part in raw.get("parts") or []:
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind == "text":
            texts.append(str(part.get("content", "")))
        elif kind == "tool_call":
            message.calls.append((part.get("id"), str(part.get("name", "")),
                                  part.get("arguments")))
        elif kind == "tool_call_response":
            result = part.get("response", part.get("result"))
            message.tool_call_id = str(part.get("id")) if part.get("id") is not None else None
            texts.append(result if isinstance(result, str) else json.dumps(result))
    message.text = "\n".join(t for t in texts if t)
    return message


def _flat_message(raw: Mapping[str, Any]) -> _Message:
    """A flattened message: OpenInference's ``message.*`` or the older ``gen_ai.prompt.N.*``."""
    inner = raw.get("message", raw) if isinstance(raw.get("message"), Mapping) else raw
    message = _Message(role=str(inner.get("role", "")),
                       text=message_text(inner.get("content")) if not isinstance(
                           inner.get("content"), Mapping) else "",
                       tool_call_id=inner.get("tool_call_id"))
    for call in _numbered(inner.get("tool_calls")):
        call = call.get("tool_call", call) if isinstance(call, Mapping) else {}
        function = call.get("function") if isinstance(call.get("function"), Mapping) else call
        message.calls.append((call.get("id"), str(function.get("name", "")),
                              function.get("arguments")))
    return message


def _messages(span: _Span, direction: str) -> list[_Message]:
    """The span's input or output messages, in whichever convention it was written."""
    current = f"gen_ai.{direction}.messages"
    if span.attrs.get(current) is not None:
        return [m for m in (_parts_message(raw) for raw in
                            _json_list(span.attrs[current], span.where, current)) if m]
    openinference = "llm.input_messages." if direction == "input" else "llm.output_messages."
    older = "gen_ai.prompt." if direction == "input" else "gen_ai.completion."
    for prefix in (openinference, older):
        flat = _indexed(span.attrs, prefix)
        if flat:
            return [_flat_message(raw) for raw in flat]
    # Older still: a span event carrying the JSON list (gen_ai.content.prompt/completion).
    event_key = "gen_ai.prompt" if direction == "input" else "gen_ai.completion"
    for _, attrs in span.events:
        if attrs.get(event_key) is not None:
            return [_flat_message(raw) for raw in _json_list(attrs[event_key], span.where,
                                                             event_key)
                    if isinstance(raw, Mapping)]
    return []


# One trace, one turn ------------------------------------------------------------------------------

def _int_attr(span: _Span, keys: tuple[str, ...]) -> int | None:
    found = span.first(keys)
    if found is None:
        return None
    try:
        return int(found[1])
    except (TypeError, ValueError):
        raise InputError(f"got {found[1]!r}", source=span.where, field=f"attributes.{found[0]}",
                         expected="a token count") from None


def _usage(spans: list[_Span]) -> TokenUsage | None:
    """Model calls' token counts; agent spans' only when no model call has any (no double count)."""
    def of(selected: list[_Span]) -> TokenUsage | None:
        usages = []
        for span in selected:
            inputs = _int_attr(span, _INPUT_TOKEN_KEYS)
            outputs = _int_attr(span, _OUTPUT_TOKEN_KEYS)
            if inputs is not None or outputs is not None:
                usages.append(TokenUsage(input_tokens=inputs or 0, output_tokens=outputs or 0,
                                         requests=1 if span.kind == "llm" else 0))
        return TokenUsage.total(usages)

    by_id = {s.span_id: s for s in spans}

    def under_agent(span: _Span) -> bool:
        parent = by_id.get(span.parent_id)
        while parent is not None:
            if parent.kind == "agent":
                return True
            parent = by_id.get(parent.parent_id)
        return False

    return of([s for s in spans if s.kind == "llm"]) or of(
        [s for s in spans if s.kind == "agent" and not under_agent(s)])


def _agent_name(span: _Span) -> str:
    for key in ("gen_ai.agent.name", "agent.name"):
        if span.attrs.get(key):
            return str(span.attrs[key])
    return span.name.removeprefix("invoke_agent ").strip() or span.name


def _turn(spans: list[_Span], notes: list[str]) -> tuple[TurnResult, TokenUsage | None]:
    spans = sorted(spans, key=lambda s: (s.start, s.order))
    inputs = {s.span_id: _messages(s, "input") for s in spans}
    outputs = {s.span_id: _messages(s, "output") for s in spans}
    model_calls: dict[str, tuple[str, Any]] = {}  # call id -> (name, raw arguments)
    model_results: dict[str, str] = {}  # call id -> result sent back to the model
    for span in spans:
        for message in outputs[span.span_id]:
            for call_id, name, arguments in message.calls:
                if call_id is not None:
                    model_calls[str(call_id)] = (name, arguments)
        for message in inputs[span.span_id]:
            if message.role == "tool" and message.tool_call_id is not None:
                model_results[str(message.tool_call_id)] = message.text

    turn = TurnResult()
    user_texts = [m.text for s in spans for m in inputs[s.span_id] if m.role == "user" and m.text]
    first_with_input = next((inputs[s.span_id] for s in spans if any(
        m.role == "user" for m in inputs[s.span_id])), [])
    users = [m.text for m in first_with_input if m.role == "user" and m.text]
    turn.user_content = users[-1] if users else (user_texts[-1] if user_texts else "")

    tool_spans = [s for s in spans if s.kind == "tool"]
    if tool_spans:
        for span in tool_spans:
            turn.tool_calls.append(_tool_from_span(span, model_calls, model_results, notes))
    else:  # only the model was instrumented: its own tool calls are the trajectory
        for span in spans:
            for message in outputs[span.span_id]:
                for j, (call_id, name, arguments) in enumerate(message.calls):
                    args = parse_arguments(arguments, span.where, f"tool_calls[{j}].arguments")
                    turn.tool_calls.append(ToolCall(
                        name=name, args=args, call_id=str(call_id) if call_id else None,
                        result=model_results.get(str(call_id)) if call_id else None))
    turn.node_visits = [_agent_name(s) for s in spans if s.kind == "agent"]

    answered = [(s.end, s.order, m.text) for s in spans for m in outputs[s.span_id]
                if m.role in ("assistant", "") and m.text]
    if answered:
        turn.response = max(answered)[2]
    else:
        roots = [s for s in spans if not s.parent_id and s.attrs.get("output.value")]
        if roots:
            turn.response = str(roots[-1].attrs["output.value"])
    if not user_texts and not turn.user_content:
        root_input = next((s.attrs.get("input.value") for s in spans
                           if not s.parent_id and s.attrs.get("input.value")), None)
        turn.user_content = str(root_input or "")
    return turn, _usage(spans)


def _tool_from_span(span: _Span, model_calls: dict[str, tuple[str, Any]],
                    model_results: dict[str, str], notes: list[str]) -> ToolCall:
    found_name = span.first(_TOOL_NAME_KEYS)
    name = str(found_name[1]) if found_name else span.name.removeprefix("execute_tool ").strip()
    if not name or name == "execute_tool":
        raise InputError("missing", source=span.where, field="attributes.gen_ai.tool.name",
                         expected="the tool's name (gen_ai.tool.name or tool.name)")
    found_id = span.first(_TOOL_ID_KEYS)
    call_id = str(found_id[1]) if found_id else None
    found_args = span.first(_TOOL_ARGUMENT_KEYS)
    if found_args is not None and found_args[0] == "input.value" and not _is_json_object(
            found_args[1]):
        # OpenInference's input.value is whatever the tool took, often plain text.
        notes.append(f"{span.where}: input.value is not a JSON object, so the arguments of "
                     f"{name!r} are unknown, left empty")
        args = {}
    elif found_args is not None:
        args = parse_arguments(found_args[1], span.where, f"attributes.{found_args[0]}")
    elif call_id in model_calls:
        args = parse_arguments(model_calls[call_id][1], span.where,
                               f"the model's tool call {call_id} arguments")
    else:
        args = {}
        notes.append(f"{span.where}: gen_ai.tool.call.arguments not recorded (an opt-in "
                     f"attribute) and no model tool call with this id; arguments of "
                     f"{name!r} are unknown, left empty")
    found_result = span.first(_TOOL_RESULT_KEYS)
    result: Any = None
    if found_result is not None:
        result = found_result[1]
    elif call_id in model_results:
        result = model_results[call_id]
    else:
        notes.append(f"{span.where}: gen_ai.tool.call.result not recorded (an opt-in "
                     f"attribute); the result of {name!r} is unknown")
    return ToolCall(name=name, args=args, result=result, call_id=call_id)


def _is_json_object(value: Any) -> bool:
    if isinstance(value, Mapping):
        return True
    try:
        return isinstance(json.loads(value), dict)
    except (TypeError, ValueError):
        return False


def _conversation_id(spans: list[_Span]) -> str | None:
    for span in spans:
        found = span.first(_CONVERSATION_KEYS)
        if found is not None:
            return str(found[1])
    return None


def read_otlp(records: list[NumberedRecord], source: str) -> list[RecordedRun]:
    """Every conversation in OTLP/JSON exports (one per JSONL line, or one JSON document)."""
    spans: list[_Span] = []
    broken: dict[str, str] = {}  # trace id -> the first unreadable span's error
    for index, (line, record) in enumerate(records):
        where = record_location(source, line, index, len(records))
        spans.extend(_read_spans(record, where, len(spans), broken))
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
    runs = []
    for run_id, members in conversations.items():
        where = f"{source}: trace {members[0][0]}"
        notes: list[str] = []
        damage = next((broken[trace_id] for trace_id, _ in members if trace_id in broken), None)
        if damage is not None:
            runs.append(RecordedRun(run_id, ExecutionResult(error=damage), where))
            continue
        try:
            turns_and_usage = [_turn(trace_spans, notes) for _, trace_spans in members]
        except InputError as exc:
            runs.append(RecordedRun(run_id, ExecutionResult(error=str(exc)), where))
            continue
        turns = [turn for turn, _ in turns_and_usage]
        execution = ExecutionResult(
            actual_response=turns[-1].response,
            tool_calls=[call for turn in turns for call in turn.tool_calls],
            node_visits=[node for turn in turns for node in turn.node_visits],
            turns=turns if len(turns) > 1 else [],
            token_usage=TokenUsage.total([usage for _, usage in turns_and_usage]))
        execution.metadata["trace_ids"] = [trace_id for trace_id, _ in members]
        runs.append(RecordedRun(run_id, with_notes(execution, notes), where, notes=notes,
                                user_turns=[turn.user_content for turn in turns]))
    return runs


class OtlpReader:
    name = "otlp"

    def sniff(self, records: list[Any]) -> bool:
        return bool(records) and isinstance(records[0], Mapping) and "resourceSpans" in records[0]

    def read(self, records: list[NumberedRecord], source: str) -> list[RecordedRun]:
        return read_otlp(records, source)
