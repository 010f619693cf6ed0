"""Build OTLP/JSON trace exports (resourceSpans/scopeSpans/spans, AnyValue attributes) for tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from referee.config import CriteriaConfig, CriterionConfig, EvalConfig, MatchType

# Scores a recorded run's tool calls (with their arguments) and its nodes, each in exact order.
EXACT_TOOLS_AND_NODES = EvalConfig(criteria=CriteriaConfig(
    trajectory=CriterionConfig.trajectory(match_type=MatchType.EXACT, check_args=True),
    node_order=CriterionConfig.node_order(match_type=MatchType.EXACT)))


def any_value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}  # int64 travels as a string in OTLP/JSON
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [any_value(v) for v in value]}}
    if isinstance(value, dict):
        return {"kvlistValue": {"values": [{"key": k, "value": any_value(v)}
                                           for k, v in value.items()]}}
    return {"stringValue": str(value)}


def span(trace: str, span_id: str, name: str, start: int, *, parent: str = "",
         end: int | None = None, events: list[tuple[str, dict[str, Any]]] = (),
         **attributes: Any) -> dict[str, Any]:
    """A span; attribute names use '__' for '.' (gen_ai__tool__name -> gen_ai.tool.name).

    Span ids are made unique per trace (the trace's first 8 characters, then ``span_id``)."""
    return {
        "traceId": trace, "spanId": trace[:8] + span_id[:8],
        "parentSpanId": trace[:8] + parent[:8] if parent else "", "name": name, "kind": 1,
        "startTimeUnixNano": str(start * 1_000_000), "endTimeUnixNano": str(
            (end if end is not None else start + 1) * 1_000_000),
        "attributes": [{"key": k.replace("__", "."), "value": any_value(v)}
                       for k, v in attributes.items()],
        "events": [{"name": n, "timeUnixNano": str(start * 1_000_000),
                    "attributes": [{"key": k, "value": any_value(v)} for k, v in a.items()]}
                   for n, a in events],
        "status": {},
    }


def export(*spans: dict[str, Any], service: str = "agent") -> dict[str, Any]:
    return {"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
        "scopeSpans": [{"scope": {"name": "tests"}, "spans": list(spans)}],
    }]}


def write_export(path: Path, *spans: dict[str, Any]) -> Path:
    """``spans`` as one OTLP/JSON export file at ``path``."""
    path.write_text(json.dumps(export(*spans)), encoding="utf-8")
    return path


def messages_json(*messages: dict[str, Any]) -> str:
    return json.dumps(list(messages))


def current_genai_trace(trace: str = "a" * 32, conversation: str = "conv-1",
                        user: str = "Weather in Paris?", city: str = "Paris",
                        with_arguments: bool = True) -> list[dict[str, Any]]:
    """The GenAI conventions since 1.37: parts-based messages, gen_ai.tool.call.* attributes."""
    tool_attrs: dict[str, Any] = {"gen_ai__operation__name": "execute_tool",
                                  "gen_ai__tool__name": "get_weather",
                                  "gen_ai__tool__call__id": f"call-{trace[:4]}"}
    if with_arguments:
        tool_attrs["gen_ai__tool__call__arguments"] = json.dumps({"city": city})
        tool_attrs["gen_ai__tool__call__result"] = f"sunny in {city}"
    return [
        span(trace, "1" * 16, "invoke_agent weather_agent", 0, end=100,
             gen_ai__operation__name="invoke_agent", gen_ai__agent__name="weather_agent",
             gen_ai__conversation__id=conversation, gen_ai__provider__name="openai"),
        span(trace, "2" * 16, "chat gpt-4o", 1, end=10, parent="1" * 16,
             gen_ai__operation__name="chat", gen_ai__usage__input_tokens=20,
             gen_ai__usage__output_tokens=5,
             gen_ai__input__messages=messages_json(
                 {"role": "user", "parts": [{"type": "text", "content": user}]}),
             gen_ai__output__messages=messages_json(
                 {"role": "assistant", "parts": [{"type": "tool_call", "id": f"call-{trace[:4]}",
                                                  "name": "get_weather",
                                                  "arguments": {"city": city}}]})),
        span(trace, "3" * 16, "execute_tool get_weather", 11, end=20, parent="1" * 16,
             **tool_attrs),
        span(trace, "4" * 16, "chat gpt-4o", 21, end=30, parent="1" * 16,
             gen_ai__operation__name="chat", gen_ai__usage__input_tokens=30,
             gen_ai__usage__output_tokens=7,
             gen_ai__output__messages=messages_json(
                 {"role": "assistant", "parts": [{"type": "text",
                                                  "content": f"It is sunny in {city}."}]})),
    ]
