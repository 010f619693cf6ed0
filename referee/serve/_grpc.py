"""The OTLP/gRPC receiver (grpcio's asyncio server): TraceService/Export and LogsService/Export.

It answers as the OTLP specification's gRPC section asks: OK with an empty export response once
the request is spooled; UNAVAILABLE with a RetryInfo (the retry delay) while the queue is full or
the spool cannot be written, which exporters retry after that delay; INVALID_ARGUMENT for a
message that is not an export (not retried); RESOURCE_EXHAUSTED without RetryInfo, from grpc
itself, past the size limit (not retried either, as a 413 is not). gzip-compressed requests are
decompressed by grpc. The RetryInfo travels twice: in the standard status details
(``grpc-status-details-bin``, read by the Collector and the Go and Java SDKs) and in the
``google.rpc.retryinfo-bin`` trailer that the Python SDK's exporter reads.

The methods are registered under the service names of the official ``opentelemetry-proto``
descriptors but take the raw request bytes, not the generated servicer's parsed message: grpc
answers a message its deserializer rejects with INTERNAL before any servicer sees it, and OTLP
wants INVALID_ARGUMENT; the bytes then go through the same decode and spool as an HTTP body
(``_intake.take``). grpcio is imported only when this receiver starts (the ``serve`` extra).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from referee.errors import InputError
from referee.serve._decode import LOGS, PROTOBUF, TRACES
from referee.serve._intake import DEFAULT_MAX_REQUEST_BYTES, Outcome, take
from referee.serve._scorer import OnlineScorer

if TYPE_CHECKING:
    import grpc

STOP_GRACE_S = 5.0  # requests being spooled when serve stops may finish for this long
_RETRY_INFO_TRAILER = "google.rpc.retryinfo-bin"
_STATUS_DETAILS_TRAILER = "grpc-status-details-bin"


def grpc_missing() -> str | None:
    """Why the gRPC receiver cannot start here, or None when it can."""
    try:
        import google.rpc.error_details_pb2  # noqa: F401
        import grpc  # noqa: F401
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2  # noqa: F401
    except ImportError as exc:
        return (f"the OTLP/gRPC receiver needs the 'serve' extra (pip install "
                f"'referee[serve]'): {exc}")
    return None


def _retry_trailers(seconds: int, message: str) -> tuple[tuple[str, bytes], ...]:
    from google.protobuf.any_pb2 import Any as AnyMessage
    from google.rpc import code_pb2, error_details_pb2, status_pb2

    retry = error_details_pb2.RetryInfo()
    retry.retry_delay.seconds = seconds
    detail = AnyMessage()
    detail.Pack(retry)
    status = status_pb2.Status(code=code_pb2.UNAVAILABLE, message=message, details=[detail])
    return ((_STATUS_DETAILS_TRAILER, status.SerializeToString()),
            (_RETRY_INFO_TRAILER, retry.SerializeToString()))


def _services() -> dict[str, tuple[str, bytes]]:
    """signal -> (the service's full name, its empty export response, serialized)."""
    from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

    return {
        TRACES: (trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"].full_name,
                 trace_service_pb2.ExportTraceServiceResponse().SerializeToString()),
        LOGS: (logs_service_pb2.DESCRIPTOR.services_by_name["LogsService"].full_name,
               logs_service_pb2.ExportLogsServiceResponse().SerializeToString())}


def _export_handler(scorer: OnlineScorer, signal: str, response: bytes) -> Any:
    import grpc

    async def export(body: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        async def read() -> bytes:
            return body

        intake = await take(scorer, signal, PROTOBUF, read)
        if intake.outcome is Outcome.INVALID:
            scorer.metrics.requests[(signal, grpc.StatusCode.INVALID_ARGUMENT.name)] += 1
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, intake.detail)
        if intake.outcome is Outcome.BUSY:
            scorer.metrics.requests[(signal, grpc.StatusCode.UNAVAILABLE.name)] += 1
            message = "queue full; retry later"
            await context.abort(grpc.StatusCode.UNAVAILABLE, message,
                                trailing_metadata=_retry_trailers(intake.retry_after, message))
        scorer.metrics.requests[(signal, grpc.StatusCode.OK.name)] += 1
        return response

    # No (de)serializers: the request arrives as bytes and the response leaves as bytes.
    return grpc.unary_unary_rpc_method_handler(export)


async def start_grpc(scorer: OnlineScorer, *, host: str, port: int,
                     max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
                     ) -> tuple[grpc.aio.Server, str]:
    """Listen on ``host:port`` (0: a free port); returns the started server and its address."""
    missing = grpc_missing()
    if missing is not None:
        raise InputError(missing, source="--grpc-port", expected="grpcio installed")
    import grpc

    server = grpc.aio.server(options=[
        ("grpc.max_receive_message_length", max_request_bytes),
        ("grpc.so_reuseport", 0),  # a port another process holds is an error, not shared
    ])
    server.add_generic_rpc_handlers(tuple(
        grpc.method_handlers_generic_handler(name, {
            "Export": _export_handler(scorer, signal, response)})
        for signal, (name, response) in _services().items()))
    host_text = f"[{host}]" if ":" in host else host
    try:
        bound = server.add_insecure_port(f"{host_text}:{port}")
    except RuntimeError as exc:
        raise OSError(f"cannot listen for OTLP/gRPC on {host_text}:{port} ({exc})") from None
    if not bound:
        raise OSError(f"cannot listen for OTLP/gRPC on {host_text}:{port}")
    await server.start()
    return server, f"{host_text}:{bound}"
