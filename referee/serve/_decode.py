"""OTLP/HTTP request bodies -> OTLP/JSON documents, the shape the trace import reads.

Protobuf bodies are parsed with the official ``opentelemetry-proto`` messages (the ``serve``
extra) and turned into OTLP/JSON: protobuf's JSON mapping writes ids as base64, where OTLP/JSON
writes them as hex, so the ids are rewritten; everything else already matches (camelCase keys,
int64 values as strings).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any

import orjson

from referee.errors import InputError

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
TRACES = "traces"
LOGS = "logs"
_ID_KEYS = ("traceId", "spanId", "parentSpanId")
_TOP_KEYS = {TRACES: "resourceSpans", LOGS: "resourceLogs"}


def _request_parser(signal: str) -> Callable[[bytes], Any]:
    try:
        from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
    except ImportError:
        raise InputError("protobuf OTLP needs the 'serve' extra (pip install 'referee[serve]')",
                         source="request body", expected="OTLP/JSON, or the serve extra") from None
    request_type: Any = (trace_service_pb2.ExportTraceServiceRequest if signal == TRACES
                         else logs_service_pb2.ExportLogsServiceRequest)

    def parse(body: bytes) -> Any:
        message = request_type()
        message.ParseFromString(body)
        return message

    return parse


def _hex_ids(node: Any) -> None:
    """Rewrite protobuf-JSON base64 ids as OTLP/JSON hex, in place, wherever they occur."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _ID_KEYS and isinstance(value, str) and value:
                try:
                    node[key] = base64.b64decode(value, validate=True).hex()
                except (binascii.Error, ValueError):
                    pass
            elif isinstance(value, (dict, list)):
                _hex_ids(value)
    elif isinstance(node, list):
        for item in node:
            _hex_ids(item)


def decode(signal: str, body: bytes, content_type: str) -> dict[str, Any]:
    """The request as an OTLP/JSON document; InputError (a 400) when it is not one."""
    kind = content_type.split(";")[0].strip().lower()
    top = _TOP_KEYS[signal]
    if kind == PROTOBUF:
        from google.protobuf.json_format import MessageToDict
        from google.protobuf.message import DecodeError

        try:
            message = _request_parser(signal)(body)
        except DecodeError as exc:
            raise InputError(f"not an OTLP protobuf export ({exc})", source="request body",
                             expected=f"an Export{signal.title()}ServiceRequest") from None
        document = MessageToDict(message)
        _hex_ids(document)
        document.setdefault(top, [])
        return document
    if kind == JSON:
        try:
            document = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise InputError(f"not valid JSON ({exc})", source="request body",
                             expected="an OTLP/JSON export") from None
        if not isinstance(document, dict) or not isinstance(document.get(top, []), list):
            raise InputError(f"no {top} list", source="request body", field=top,
                             expected=f"an OTLP/JSON {signal} export")
        document.setdefault(top, [])
        return document
    raise InputError(f"content type {content_type!r}", source="request",
                     expected=f"{PROTOBUF} or {JSON}")
