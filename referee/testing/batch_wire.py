"""Each provider's batch API as the scripted batch service speaks it: a batch's id, its view
and status words, what a cancel under way shows, how an item's error reads, what happens when
a batch ends.

The service picks one ``BatchAPI`` per route it serves (``OPENAI``, ``ANTHROPIC``, ``GEMINI``)
and a batch keeps the one that created it, so no code here or in batch_service.py asks which
provider a batch is for. Errors come from the provider's online wire format (wire.py).
"""

from __future__ import annotations

import json
import time
import uuid
from abc import ABC, abstractmethod
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from referee.testing.wire import WireFormat, for_provider

if TYPE_CHECKING:
    from referee.testing.batch_service import ScriptedBatchService


@dataclass
class ItemResult:
    """One item's outcome: the reply body (HTTP 200), or an error the provider would report."""

    body: dict[str, Any] | None = None
    status: int = 200
    error_code: str | None = None   # "batch_expired", "batch_cancelled", an HTTP error's type
    error_message: str = ""


@dataclass
class Batch:
    id: str
    api: BatchAPI               # the batch API that created it
    endpoint: str               # the items' URL path ("/v1/chat/completions", "/v1/messages")
    items: list[tuple[str, dict[str, Any]]]  # (custom_id, request body)
    created_at: float
    ends_at: float              # time.time() at which it finishes processing
    input_file_id: str | None = None
    tokens: int = 0             # its items' estimated prompt tokens (the enqueued-token count)
    expire_after: int | None = None  # expires once this many items were answered
    failure: tuple[str, str] | None = None  # (code, message): failed validation
    cancel_requested: float | None = None
    ended_at: float | None = None
    state: str = "in_progress"  # in_progress, ended, failed, expired, cancelled
    results: dict[str, ItemResult] = field(default_factory=dict)
    output_file_id: str | None = None
    error_file_id: str | None = None
    metadata: dict[str, Any] | None = None
    item_metadata: dict[str, Any] = field(default_factory=dict)  # Gemini's, echoed back

    @property
    def model(self) -> str:
        return str(self.items[0][1].get("model", "")) if self.items else ""


class BatchAPI(ABC):
    """One provider's batch API. Its defaults: ids without a prefix, item errors in the online
    API's error format, nothing shown while a cancel is under way, nothing done at a batch's
    end."""

    provider: ClassVar[str]
    id_prefix: ClassVar[str] = ""
    # The online routes beside the batch ones (a batch_fallback="online" request comes there).
    online_routes: ClassVar[tuple[str, ...]] = ()
    # What a batch's view shows while its cancel is under way: the API's word for it.
    cancelling: ClassVar[dict[str, str]] = {}

    @property
    def wire(self) -> WireFormat:
        return for_provider(self.provider)

    def error(self, status: int, message: str) -> dict[str, Any]:
        return self.wire.error_body(status, message)

    def item_error(self, status: int, message: str) -> dict[str, Any]:
        """The body of an item the provider answered with HTTP ``status``."""
        return self.error(status, message)

    @abstractmethod
    def view(self, service: ScriptedBatchService, batch: Batch) -> dict[str, Any]:
        """The batch as its retrieve call shows it; called with the service's lock held."""

    def ended(self, service: ScriptedBatchService, batch: Batch) -> None:  # noqa: B027  # an optional hook
        """The batch has just ended (its results are in); called with the lock held."""


def iso(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + "Z"


# OpenAI -------------------------------------------------------------------------------------

class _OpenAIBatches(BatchAPI):
    provider = "openai"
    id_prefix = "batch_"
    online_routes = ("/v1/chat/completions", "/v1/responses")
    cancelling = {"status": "cancelling"}

    def view(self, service: ScriptedBatchService, batch: Batch) -> dict[str, Any]:
        now = time.time()
        status = {"ended": "completed", "failed": "failed", "expired": "expired",
                  "cancelled": "cancelled"}.get(batch.state, "in_progress")
        if status == "in_progress" and now < batch.created_at + service.processing_s / 10:
            status = "validating"
        done = [r for r in batch.results.values() if r.status == 200]
        return {
            "id": batch.id, "object": "batch", "endpoint": batch.endpoint,
            "errors": ({"object": "list", "data": [
                {"code": batch.failure[0], "message": batch.failure[1], "param": None,
                 "line": None}]} if batch.failure else None),
            "input_file_id": batch.input_file_id or "", "completion_window": "24h",
            "status": status, "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id, "created_at": int(batch.created_at),
            "in_progress_at": int(batch.created_at), "expires_at": int(
                batch.created_at + 86400),
            "completed_at": (int(batch.ended_at or 0) if batch.state == "ended"
                             else None),
            "failed_at": int(batch.created_at) if batch.state == "failed" else None,
            "expired_at": int(batch.ended_at or 0) if batch.state == "expired" else None,
            "cancelled_at": (int(batch.ended_at or 0) if batch.state == "cancelled"
                             else None),
            "request_counts": {"total": len(batch.items), "completed": len(done),
                               "failed": len(batch.results) - len(done)},
            "metadata": batch.metadata,
        }

    def ended(self, service: ScriptedBatchService, batch: Batch) -> None:  # noqa: B027  # an optional hook
        """Write the output and error files (JSONL) the batch's view names."""
        output: list[str] = []
        errors: list[str] = []
        for custom_id, _ in batch.items:
            result = batch.results[custom_id]
            line: dict[str, Any] = {"id": f"batch_req_{uuid.uuid4().hex[:20]}",
                                    "custom_id": custom_id}
            if result.status == 200:
                line["response"] = {"status_code": 200, "request_id": uuid.uuid4().hex,
                                    "body": result.body}
                line["error"] = None
                output.append(json.dumps(line))
            elif result.status:
                line["response"] = {"status_code": result.status,
                                    "request_id": uuid.uuid4().hex, "body": result.body}
                line["error"] = None
                errors.append(json.dumps(line))
            else:
                line["response"] = None
                line["error"] = {"code": result.error_code, "message": result.error_message}
                errors.append(json.dumps(line))
        if output:
            batch.output_file_id = service.store_file("\n".join(output) + "\n")
        if errors:
            batch.error_file_id = service.store_file("\n".join(errors) + "\n")


# Anthropic ----------------------------------------------------------------------------------

# The error type Anthropic names for each HTTP status (an errored batch item carries it).
_ANTHROPIC_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                          403: "permission_error", 404: "not_found_error",
                          413: "request_too_large", 429: "rate_limit_error",
                          529: "overloaded_error"}


def anthropic_result(result: ItemResult) -> dict[str, Any]:
    """An item's ``result`` in Anthropic's results JSONL."""
    if result.status == 200:
        return {"type": "succeeded", "message": result.body}
    if result.status:
        return {"type": "errored", "error": result.body}
    kind = "canceled" if result.error_code == "batch_cancelled" else "expired"
    return {"type": kind}


class _AnthropicBatches(BatchAPI):
    provider = "anthropic"
    id_prefix = "msgbatch_"
    online_routes = ("/v1/messages",)
    cancelling = {"processing_status": "canceling"}

    def item_error(self, status: int, message: str) -> dict[str, Any]:
        error = super().item_error(status, message)
        error["error"]["type"] = _ANTHROPIC_ERROR_TYPES.get(status, "api_error")
        return error

    def view(self, service: ScriptedBatchService, batch: Batch) -> dict[str, Any]:
        counts = Counter(anthropic_result(r)["type"] for r in batch.results.values())
        ended = batch.state != "in_progress"
        return {
            "id": batch.id, "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": {"processing": 0 if ended else len(batch.items),
                               "succeeded": counts["succeeded"],
                               "errored": counts["errored"],
                               "canceled": counts["canceled"],
                               "expired": counts["expired"]},
            "ended_at": iso(batch.ended_at) if ended else None,
            "created_at": iso(batch.created_at),
            "expires_at": iso(batch.created_at + 86400),
            "archived_at": None,
            "cancel_initiated_at": (iso(batch.cancel_requested)
                                    if batch.cancel_requested else None),
            "results_url": (f"{service.root}/v1/messages/batches/{batch.id}/results"
                            if ended else None),
        }


# Gemini -------------------------------------------------------------------------------------

def _gemini_result(metadata: Any, result: ItemResult) -> dict[str, Any]:
    entry: dict[str, Any] = {"metadata": metadata} if metadata else {}
    if result.status == 200:
        entry["response"] = result.body
    else:
        # google.rpc.Status: 4 DEADLINE_EXCEEDED for an expired item, 1 CANCELLED.
        code = result.status or (1 if result.error_code == "batch_cancelled" else 4)
        entry["error"] = {"code": code, "message": result.error_message}
    return entry


class _GeminiBatches(BatchAPI):
    provider = "google"
    online_routes = ("/{version:v1[a-z0-9]*}/models/{model:[^/:]+}:generateContent",)

    def view(self, service: ScriptedBatchService, batch: Batch) -> dict[str, Any]:
        state = {"ended": "SUCCEEDED", "failed": "FAILED", "expired": "EXPIRED",
                 "cancelled": "CANCELLED"}.get(batch.state, "RUNNING")
        metadata: dict[str, Any] = {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1main."
                     "GenerateContentBatch",
            "model": f"models/{batch.model or 'scripted'}",
            "displayName": (batch.metadata or {}).get("displayName") or batch.id,
            "state": f"BATCH_STATE_{state}",
            "createTime": iso(batch.created_at), "updateTime": iso(time.time())}
        if batch.state != "in_progress":
            metadata["endTime"] = iso(batch.ended_at)
            metadata["output"] = {"inlinedResponses": {"inlinedResponses": [
                _gemini_result(batch.item_metadata.get(custom_id), batch.results[custom_id])
                for custom_id, _ in batch.items]}}
        return {"name": f"batches/{batch.id}", "metadata": metadata}


OPENAI, ANTHROPIC, GEMINI = _OpenAIBatches(), _AnthropicBatches(), _GeminiBatches()
BATCH_APIS: tuple[BatchAPI, ...] = (OPENAI, ANTHROPIC, GEMINI)
