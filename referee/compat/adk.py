"""Google ADK eval sets read into referee's case model and written back.

ADK's schema (``google.adk.evaluation.eval_case`` / ``eval_set``), field by field:

| ADK                                         | referee                                             |
|---------------------------------------------|-----------------------------------------------------|
| ``eval_set_id``, ``name``, ``description``  | the same ``EvalSet`` fields                         |
| ``EvalCase.eval_id``                        | ``EvalCase.eval_id``                                |
| ``session_input`` (app_name, user_id, ...)  | ``EvalCase.session_input``                          |
| ``conversation[].invocation_id``            | ``Invocation.invocation_id``                        |
| ``conversation[].user_content`` (Content)   | ``Invocation.user_content`` (its text is the input; with ``inline_data`` / ``file_data``, its parts) |
| ``conversation[].final_response``           | ``Invocation.expected_final_response`` (text) and ``expected_media`` |
| ``intermediate_data.tool_uses`` / ``tool_responses`` | ``expected_tool_trajectory`` (name, args, id, result) |
| ``intermediate_data.invocation_events`` (function-call and function-response parts) | the same |
| ``invocation_events[].author`` (the agents) | ``Invocation.expected_node_order``                  |
| ``conversation_scenario``                   | kept; no turn of its own (run by the user simulator) |
| ``creation_timestamp``, ``rubrics``, ``final_session_state``, ``app_details``, ... | ``metadata["adk"]`` |

What has no referee field is kept under ``metadata["adk"]``, and so is any original value that
referee's fields cannot reproduce exactly (a Content with several parts or null keys, an
``intermediate_data`` with intermediate responses). Writing back uses the kept original while
referee's view of it is unchanged, and builds the ADK shape from referee's fields once they were
edited. ADK's camelCase spellings (``evalId``, ``userContent``, ``toolUses``) are read too.

This is the edge (design decision 15): the case model knows nothing of ADK. A case file is read
through :func:`read_case_entry` (referee.evalset, for every file it loads) before the case model
validates it, and :func:`read_set_header` reads a set's header; ``referee._adk`` is this module's
old path.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from referee._strict import move_alias, snake_case
from referee.content._load import media_content
from referee.content._parts import ContentError, TextPart
from referee.execution import add_visit
from referee.messages import MessageContent, ToolCall, content_text, is_chat_message

if TYPE_CHECKING:
    from referee.case import EvalCase, Invocation
    from referee.evalset import EvalSet

ADK = "adk"  # the metadata key that keeps what has no referee field
TURN_KEYS = frozenset({"final_response", "intermediate_data", "creation_timestamp", "rubrics",
                       "app_details", "inference_call_count", "duration"})
CASE_KEYS = frozenset({"conversation_scenario", "creation_timestamp", "rubrics",
                       "final_session_state"})
SET_KEYS = frozenset({"creation_timestamp"})
# The keys read_case and read_turn look at, which ADK may spell in camelCase (``finalResponse``);
# the case model turns the camelCase spellings of its own fields into snake_case itself.
_CASE_READ = CASE_KEYS | {"conversation", "session_input"}
_TURN_READ = TURN_KEYS | {"user_content", "expected_final_response", "expected_tool_trajectory",
                          "expected_node_order"}


def _get(mapping: Any, snake: str) -> Any:
    """A key in either spelling (ADK's models accept both)."""
    if not isinstance(mapping, dict):
        return None
    if snake in mapping:
        return mapping[snake]
    head, *rest = snake.split("_")
    return mapping.get(head + "".join(p.title() for p in rest))


def text_content(text: str, role: str) -> dict[str, Any]:
    return {"parts": [{"text": text}], "role": role}


def collapse_plain_content(content: dict[str, Any], role: str) -> Any:
    """A Content that is exactly one text part of ``role`` is that text; others stay as given."""
    parts = content.get("parts")
    if (set(content) == {"parts", "role"} and content.get("role") == role and isinstance(parts, list)
            and len(parts) == 1 and isinstance(parts[0], dict) and set(parts[0]) == {"text"}
            and isinstance(parts[0]["text"], str)):
        return parts[0]["text"]
    return content


def _parts(intermediate: Any) -> list[dict[str, Any]]:
    events = _get(intermediate, "invocation_events")
    parts: list[dict[str, Any]] = []
    for event in events if isinstance(events, list) else []:
        content = _get(event, "content")
        for part in _get(content, "parts") or []:
            if isinstance(part, dict):
                parts.append(part)
    return parts


def authors(intermediate: Any) -> list[str]:
    """The agents that held control in ``invocation_events``, in order: each event's ``author``
    (not the user's), one per stretch of events by the same agent."""
    order: list[str] = []
    events = _get(intermediate, "invocation_events")
    for event in events if isinstance(events, list) else []:
        author = _get(event, "author")
        if isinstance(author, str) and author and author != "user":
            add_visit(order, author)
    return order


def tool_calls(intermediate: Any) -> list[dict[str, Any]]:
    """Expected tool calls (referee ToolCall dicts) of an ``intermediate_data`` value: its
    ``tool_uses`` or the function-call parts of its ``invocation_events``; each gets the
    result of the function response with the same id."""
    if not isinstance(intermediate, dict):
        return []
    if _get(intermediate, "invocation_events") is not None:
        parts = _parts(intermediate)
        uses = [p for p in (_get(part, "function_call") for part in parts) if p]
        responses = [p for p in (_get(part, "function_response") for part in parts) if p]
    else:
        uses = _get(intermediate, "tool_uses") or []
        responses = _get(intermediate, "tool_responses") or []
    for item in (*uses, *responses):
        call_id = item.get("id") if isinstance(item, dict) else None
        if not isinstance(call_id, (str, int, type(None))):  # a list cannot key the pairing
            raise ValueError(f"intermediate_data: a tool call id is a {type(call_id).__name__}, "
                             "expected a string")
    results = {r.get("id"): r.get("response") for r in responses
               if isinstance(r, dict) and r.get("id") is not None}
    calls = []
    for use in uses:
        if not isinstance(use, dict):
            raise ValueError(f"intermediate_data: a tool use is a {type(use).__name__}, "
                             "expected an object with 'name' and 'args'")
        call: dict[str, Any] = {"name": use.get("name"), "args": use.get("args") or {}}
        if use.get("id") is not None:
            call["call_id"] = use["id"]
            if use["id"] in results:
                call["result"] = results[use["id"]]
        calls.append(call)
    return calls


def intermediate_data(calls: list[dict[str, Any]]) -> dict[str, Any]:
    """ADK's IntermediateData for referee tool calls (the shape ``tool_calls`` reads back)."""
    return {
        "tool_uses": [{"id": c.get("call_id"), "args": c.get("args", {}), "name": c["name"]}
                      for c in calls],
        "tool_responses": [{"id": c.get("call_id"), "name": c["name"], "response": c["result"]}
                           for c in calls if c.get("result") is not None],
        "intermediate_responses": [],
    }


def _keep(data: dict[str, Any], kept: dict[str, Any]) -> None:
    if kept:
        metadata = dict(data.get("metadata") or {})
        metadata[ADK] = {**metadata.get(ADK, {}), **kept}
        data["metadata"] = metadata


def read_turn(data: dict[str, Any]) -> dict[str, Any]:
    """Invocation input with ADK's keys moved to referee fields and ``metadata['adk']``."""
    if not TURN_KEYS & data.keys():
        return data
    data = dict(data)
    kept: dict[str, Any] = {}
    if "final_response" in data:
        move_alias(data, "final_response", "expected_final_response")
        raw = data.pop("expected_final_response")
        parts = media_content(raw)
        if parts is not None:  # its text and its images: the turn's model splits them
            data["expected_final_response"] = parts
            if raw != content_of(parts, "model"):
                kept["final_response"] = raw
        elif raw is not None:
            text = content_text(raw)
            data["expected_final_response"] = text
            if raw != text_content(text, "model"):
                kept["final_response"] = raw
        else:
            kept["final_response"] = None
    if "intermediate_data" in data:
        raw = data.pop("intermediate_data")
        calls = tool_calls(raw)
        if calls and data.get("expected_tool_trajectory"):
            raise ValueError("'intermediate_data' and 'expected_tool_trajectory' both name the "
                             "expected tool calls; give one of them")
        data["expected_tool_trajectory"] = calls
        if raw != intermediate_data(calls):
            kept["intermediate_data"] = raw
        if not data.get("expected_node_order"):
            data["expected_node_order"] = authors(raw)
    for key in sorted(TURN_KEYS - {"final_response", "intermediate_data"}):
        if key in data:
            kept[key] = data.pop(key)
    _keep(data, kept)
    return data


def read_case(data: dict[str, Any]) -> dict[str, Any]:
    """EvalCase input with ADK's case keys moved to referee fields and ``metadata['adk']``."""
    if "conversation" in data and data["conversation"] is None:
        data = {k: v for k, v in data.items() if k != "conversation"}  # a scenario case
    if not CASE_KEYS & data.keys() and data.get("session_input", {}) is not None:
        return data
    data = dict(data)
    kept = {key: data.pop(key) for key in sorted(CASE_KEYS) if key in data}
    if "session_input" in data and data["session_input"] is None:
        kept["session_input"] = data.pop("session_input")  # written back as the null it was
    scenario = kept.get("conversation_scenario")
    if scenario is not None:
        prompt = _get(scenario, "starting_prompt")
        if not isinstance(prompt, str):
            raise ValueError("conversation_scenario needs a 'starting_prompt' string")
        if data.get("conversation") or data.get("input") is not None:
            raise ValueError("an ADK case has a conversation or a conversation_scenario, not both")
        # No turn is made up from the prompt: the user simulator holds the conversation.
    _keep(data, kept)
    return data


def _snake_keys(data: dict[str, Any], names: frozenset[str]) -> dict[str, Any]:
    """``data`` with the camelCase spellings of ``names`` in snake_case (a copy)."""
    return {(snake_case(k) if isinstance(k, str) and k not in names and snake_case(k) in names
             else k): v for k, v in data.items()}


class TurnProblem(ValueError):
    """An ADK turn that cannot be read; ``turn`` is its index in the case's conversation."""

    def __init__(self, turn: int, message: str) -> None:
        super().__init__(message)
        self.turn = turn


def read_turn_entry(turn: Any) -> Any:
    """One turn of a case file as the case model reads it: ADK's invocation keys moved to
    referee fields (and ``metadata['adk']``), and a Content of one plain user text part
    collapsed to that text. Raises ValueError on an ADK value that cannot be read."""
    if not isinstance(turn, dict):
        return turn
    data = read_turn(_snake_keys(turn, _TURN_READ))
    content = data.get("user_content")
    if isinstance(content, dict) and not is_chat_message(content):
        data["user_content"] = collapse_plain_content(content, role="user")
    return data


def read_case_entry(raw: Any) -> Any:
    """One case of a case file as the case model reads it: ADK's case keys moved to referee
    fields and ``metadata['adk']``, each turn read by :func:`read_turn_entry`. A file without
    ADK keys passes through unchanged. Raises ValueError (TurnProblem for a turn)."""
    if not isinstance(raw, dict):
        return raw
    data = read_case(_snake_keys(raw, _CASE_READ))
    conversation = data.get("conversation")
    if isinstance(conversation, list):
        turns = []
        for index, turn in enumerate(conversation):
            try:
                turns.append(read_turn_entry(turn))
            except ValueError as exc:
                raise TurnProblem(index, str(exc)) from None
        data["conversation"] = turns
    return data


def read_set_header(header: dict[str, Any]) -> dict[str, Any]:
    """A set document's header fields: ADK's null name and description read as empty, and its
    set-level keys (``creation_timestamp``) kept under ``metadata['adk']``."""
    data = _snake_keys(header, SET_KEYS)
    for key in ("name", "description"):
        if key in data and data[key] is None:  # ADK writes null for an unnamed set
            data[key] = ""
    kept = {key: data.pop(key) for key in sorted(SET_KEYS) if key in data}
    _keep(data, kept)
    return data


def write_set(eval_set: EvalSet) -> dict[str, Any]:
    """The set as a Google ADK EvalSet document."""
    document: dict[str, Any] = {"eval_set_id": eval_set.eval_set_id, "name": eval_set.name,
                                "description": eval_set.description,
                                "eval_cases": [write_case(c) for c in eval_set.eval_cases]}
    document.update(eval_set.metadata.get(ADK, {}))
    metadata = {k: v for k, v in eval_set.metadata.items() if k != ADK}
    if metadata:
        document["metadata"] = metadata
    return document


def scenario_of(case: EvalCase) -> dict[str, Any] | None:
    """The ADK ``conversation_scenario`` a case is run by (through the user simulator)."""
    scenario = case.metadata.get(ADK, {}).get("conversation_scenario")
    return scenario if isinstance(scenario, dict) else None


# Writing -------------------------------------------------------------------------------------

_ABSENT = object()


def _write_turn(turn: Invocation) -> dict[str, Any]:
    kept = dict(turn.metadata.get(ADK, {}))
    out: dict[str, Any] = {}
    if turn.invocation_id is not None:
        out["invocation_id"] = turn.invocation_id
    content = turn.user_content
    if isinstance(content, MessageContent):
        content = text_content(content.get_text(), "user")
    elif turn.user_parts is not None:
        content = content_of(turn.user_parts, "user")
    elif not isinstance(content, dict):
        content = text_content(content_text(content), "user")
    out["user_content"] = content
    expected = turn.expected_final_response
    raw = kept.pop("final_response", None)
    if turn.expected_media:
        parts = [TextPart(text=expected)] if expected else []
        written = content_of([*parts, *turn.expected_media], "model")
        # The file's own Content where it holds the same text and images (in its own order).
        same = raw is not None and content_text(raw) == (expected or "") and _media_keys(
            raw) == [p.content_key() for p in turn.expected_media]
        out["final_response"] = raw if same else written
    elif expected is None:
        if "final_response" in turn.metadata.get(ADK, {}):
            out["final_response"] = None
    elif raw is not None and content_text(raw) == expected:
        out["final_response"] = raw
    else:
        out["final_response"] = text_content(expected, "model")
    calls = [c.model_dump(mode="json", exclude_defaults=True) for c in turn.expected_tool_trajectory]
    raw = kept.pop("intermediate_data", _ABSENT)
    if raw is not _ABSENT and [ToolCall.model_validate(c) for c in tool_calls(raw)] == \
            turn.expected_tool_trajectory:
        out["intermediate_data"] = raw
    elif calls:
        out["intermediate_data"] = intermediate_data(calls)
    out.update(kept)
    # Keys ADK's Invocation ignores, kept so that referee reads its own expectations back.
    if turn.expected_node_order and turn.expected_node_order != authors(
            out.get("intermediate_data")):
        out["expected_node_order"] = list(turn.expected_node_order)
    if turn.expected_intermediate_responses:
        out["expected_intermediate_responses"] = list(turn.expected_intermediate_responses)
    metadata = {k: v for k, v in turn.metadata.items() if k != ADK}
    if metadata:
        out["metadata"] = metadata
    return out


def content_of(parts: list[Any], role: str) -> dict[str, Any]:
    """Content parts as a Gemini/ADK Content."""
    return {"parts": [_part(part) for part in parts], "role": role}


def _media_keys(content: Any) -> list[str]:
    parts = media_content(content) or []
    return [part.content_key() for part in parts if not isinstance(part, TextPart)]


def _part(part: Any) -> dict[str, Any]:
    """A content part as a Gemini Part: text, ``inline_data`` (the bytes, in the URL-safe
    base64 Gemini's own dumps write) or ``file_data`` (a URL)."""
    if isinstance(part, TextPart):
        return {"text": part.text}
    if part.data is not None:
        data = base64.urlsafe_b64encode(part.data).decode("ascii")
        return {"inline_data": {"data": data, "mime_type": part.media_type}}
    if part.url is not None:
        return {"file_data": {"file_uri": part.url, "mime_type": part.media_type}}
    raise ContentError(f"{part.label()} has no bytes here to write into an ADK eval set",
                       expected="a part read from a file or a data URL")


def write_case(case: EvalCase) -> dict[str, Any]:
    """One case in ADK's shape. Referee fields ADK lacks (name, tags, context, metadata) are
    written as extra keys, which ADK's EvalCase keeps and referee reads back."""
    kept = dict(case.metadata.get(ADK, {}))
    out: dict[str, Any] = {"eval_id": case.eval_id}
    scenario = kept.pop("conversation_scenario", None)
    if scenario is None and "conversation_scenario" in case.metadata.get(ADK, {}):
        out["conversation_scenario"] = None  # ADK's dump writes the null
    if scenario is not None and not case.conversation:
        out["conversation_scenario"] = scenario
    else:
        out["conversation"] = [_write_turn(t) for t in case.conversation]
    if case.session_input is not None:
        out["session_input"] = case.session_input.model_dump(mode="json", exclude_unset=True)
    out.update(kept)
    if case.name:
        out["name"] = case.name
    if case.description:
        out["description"] = case.description
    if case.tags:
        out["tags"] = list(case.tags)
    if case.context is not None:
        out["context"] = case.context
    metadata = {k: v for k, v in case.metadata.items() if k != ADK}
    if metadata:
        out["metadata"] = metadata
    return out


# The format before EvalSet ----------------------------------------------------------------------

def is_legacy(data: Any) -> bool:
    """ADK's first eval data: ``[{"name", "data": [{"query", "expected_tool_use", ...}]}]``,
    which ADK still converts when a file is no EvalSet."""
    return (isinstance(data, list) and bool(data)
            and all(isinstance(item, dict) and isinstance(item.get("data"), list)
                    and "name" in item for item in data))


def from_legacy(data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The legacy cases as case dicts: ``name`` is the eval id, each ``data`` item a turn
    (``query`` its user content, ``reference`` the expected response, ``expected_tool_use``
    the trajectory, ``expected_intermediate_agent_responses`` its intermediate responses) and
    ``initial_session`` the session input. Raises ValueError naming the bad item."""
    cases = []
    for i, item in enumerate(data):
        turns = []
        for j, turn in enumerate(item["data"]):
            where = f"[{i}].data[{j}]"
            if not isinstance(turn, dict) or not isinstance(turn.get("query"), str):
                raise ValueError(f"{where}.query: expected the user's query as a string")
            uses = turn.get("expected_tool_use") or []
            if not isinstance(uses, list) or not all(
                    isinstance(u, dict) and isinstance(u.get("tool_name"), str) for u in uses):
                raise ValueError(f"{where}.expected_tool_use: expected a list of "
                                 f"{{'tool_name', 'tool_input'}} objects")
            converted: dict[str, Any] = {
                "user_content": turn["query"],
                "expected_tool_trajectory": [{"name": u["tool_name"],
                                              "args": u.get("tool_input") or {}} for u in uses],
            }
            if turn.get("reference") is not None:
                converted["expected_final_response"] = turn["reference"]
            if turn.get("expected_intermediate_agent_responses"):
                converted["expected_intermediate_responses"] = list(
                    turn["expected_intermediate_agent_responses"])
            turns.append(converted)
        case: dict[str, Any] = {"eval_id": item["name"], "conversation": turns}
        session = item.get("initial_session")
        if session:
            case["session_input"] = session
        cases.append(case)
    return cases
