"""OpenAI's Batch API: the items uploaded as a JSONL file (Files API), then ``/v1/batches``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from referee.judge.batch._api import BatchState, ItemOutcome
from referee.judge.providers._base import as_dict

# The batch's metadata key for the journal's id of it, and how many of the newest batches a
# resume looks through for the ones whose id it never recorded.
LABEL_KEY = "referee_batch"
FIND_LIMIT = 1000
_ENDED = frozenset({"completed", "failed", "expired", "cancelled"})
# A 4xx other than these is the request's own fault: the same request fails again.
_RETRYABLE_STATUS = frozenset({408, 409, 429})


def _line(custom_id: str, path: str, body: dict[str, Any]) -> str:
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": f"/v1{path}",
                       "body": body}, separators=(",", ":"))


class OpenAIBatchAPI:
    provider = "openai"
    max_items = 50_000
    max_bytes = 200 * 1024 * 1024

    def item_size(self, custom_id: str, path: str, body: dict[str, Any]) -> int:
        return len(_line(custom_id, path, body).encode("utf-8")) + 1

    async def create(self, client: Any, path: str, items: Sequence[tuple[str, dict[str, Any]]],
                     label: str) -> str:
        content = "\n".join(_line(custom_id, path, body) for custom_id, body in items) + "\n"
        upload = await client.files.create(file=("referee-batch.jsonl", content.encode("utf-8")),
                                           purpose="batch")
        batch = await client.batches.create(input_file_id=upload.id, endpoint=f"/v1{path}",
                                            completion_window="24h",
                                            metadata={"created_by": "referee",
                                                      LABEL_KEY: label})
        return str(batch.id)

    async def find(self, client: Any, labels: Sequence[str]) -> dict[str, str]:
        wanted, found = set(labels), {}
        seen = 0
        async for batch in client.batches.list(limit=100):
            label = (batch.metadata or {}).get(LABEL_KEY)
            if label in wanted:
                found[label] = str(batch.id)
            seen += 1
            if len(found) == len(wanted) or seen >= FIND_LIMIT:
                break
        return found

    async def retrieve(self, client: Any, batch_id: str) -> BatchState:
        batch = await client.batches.retrieve(batch_id)
        counts = batch.request_counts
        errors = [e for e in ((batch.errors.data or []) if batch.errors else [])]
        failure = "; ".join(f"{e.code}: {e.message}" for e in errors) or None
        return BatchState(status=str(batch.status), ended=batch.status in _ENDED,
                          completed=counts.completed if counts else 0,
                          failed=counts.failed if counts else 0,
                          total=counts.total if counts else 0,
                          failure=failure if batch.status == "failed" else None,
                          limit_exceeded=any(e.code == "token_limit_exceeded" for e in errors))

    async def results(self, client: Any, batch_id: str) -> dict[str, ItemOutcome]:
        batch = await client.batches.retrieve(batch_id)
        outcomes: dict[str, ItemOutcome] = {}
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            content = await client.files.content(file_id)
            for raw in content.text.splitlines():
                if raw.strip():
                    custom_id, outcome = _read_line(json.loads(raw))
                    outcomes[custom_id] = outcome
        return outcomes

    async def cancel(self, client: Any, batch_id: str) -> None:
        await client.batches.cancel(batch_id)


def _read_line(line: dict[str, Any]) -> tuple[str, ItemOutcome]:
    custom_id = str(line.get("custom_id"))
    error = line.get("error")
    response = line.get("response") if isinstance(line.get("response"), dict) else None
    if isinstance(error, dict):
        # batch_expired, batch_cancelled: the request never ran; a new batch may run it.
        return custom_id, ItemOutcome(error=f"{error.get('code')}: {error.get('message')}")
    if response is None:
        return custom_id, ItemOutcome(error="the batch reported no response for it")
    status = int(response.get("status_code") or 0)
    body = as_dict(response.get("body"))
    if status == 200:
        return custom_id, ItemOutcome(body=body)
    detail = as_dict(body.get("error"))
    message = detail.get("message") or json.dumps(body)[:200]
    return custom_id, ItemOutcome(error=f"HTTP {status}: {message}",
                                  retryable=status in _RETRYABLE_STATUS or status >= 500)


