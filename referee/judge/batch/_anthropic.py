"""Anthropic's Message Batches: ``/v1/messages/batches`` create, retrieve, results, cancel."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from referee.judge.batch._api import BatchState, EnqueuedLimitReached, ItemOutcome
from referee.judge.providers._base import as_dict

# An errored item of these kinds would fail again as it is.
_NOT_RETRYABLE = frozenset({"invalid_request_error", "authentication_error",
                            "permission_error", "not_found_error"})


class AnthropicBatchAPI:
    provider = "anthropic"
    max_items = 100_000
    max_bytes = 256 * 1024 * 1024

    def item_size(self, custom_id: str, path: str, body: dict[str, Any]) -> int:
        del path
        return len(json.dumps({"custom_id": custom_id, "params": body},
                              separators=(",", ":")).encode("utf-8")) + 1

    async def create(self, client: Any, path: str, items: Sequence[tuple[str, dict[str, Any]]],
                     label: str) -> str:
        del path, label  # every item is a Messages request; a batch keeps no label
        import anthropic

        try:
            batch = await client.messages.batches.create(requests=[
                {"custom_id": custom_id, "params": body} for custom_id, body in items])
        except anthropic.RateLimitError:
            # The queue of batch requests is full: wait for batches in flight, or split.
            raise EnqueuedLimitReached from None
        return str(batch.id)

    async def find(self, client: Any, labels: Sequence[str]) -> dict[str, str]:
        del client, labels  # Message Batches keep no label to find a batch by
        return {}

    async def retrieve(self, client: Any, batch_id: str) -> BatchState:
        batch = await client.messages.batches.retrieve(batch_id)
        counts = batch.request_counts
        failed = counts.errored + counts.canceled + counts.expired
        return BatchState(status=str(batch.processing_status),
                          ended=batch.processing_status == "ended",
                          completed=counts.succeeded, failed=failed,
                          total=counts.processing + counts.succeeded + failed)

    async def results(self, client: Any, batch_id: str) -> dict[str, ItemOutcome]:
        outcomes: dict[str, ItemOutcome] = {}
        decoder = await client.messages.batches.results(batch_id)
        async for entry in decoder:
            outcomes[str(entry.custom_id)] = _read_result(entry.result.model_dump(mode="json"))
        return outcomes

    async def cancel(self, client: Any, batch_id: str) -> None:
        await client.messages.batches.cancel(batch_id)


def _read_result(result: dict[str, Any]) -> ItemOutcome:
    kind = result.get("type")
    if kind == "succeeded" and isinstance(result.get("message"), dict):
        return ItemOutcome(body=result["message"])
    if kind == "errored":
        error = as_dict(result.get("error"))
        detail = as_dict(error.get("error")) or error
        error_type = str(detail.get("type") or "error")
        return ItemOutcome(error=f"{error_type}: {detail.get('message') or ''}".rstrip(": "),
                           retryable=error_type not in _NOT_RETRYABLE)
    if kind in ("expired", "canceled"):
        return ItemOutcome(error=f"the batch item was {kind} before it ran")
    return ItemOutcome(error=f"an unknown batch result type {kind!r}")
