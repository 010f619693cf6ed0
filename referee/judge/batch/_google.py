"""Gemini's batch mode (the Gemini Developer API's ``models/{model}:batchGenerateContent``)
through google-genai: inlined requests, each tagged with its id in ``metadata``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from referee.judge.batch._api import BatchState, ItemOutcome

_ENDED = frozenset({"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED",
                    "JOB_STATE_EXPIRED"})
# google.rpc codes of an item that would fail again as it is: INVALID_ARGUMENT,
# PERMISSION_DENIED, NOT_FOUND, FAILED_PRECONDITION, UNAUTHENTICATED (and their HTTP forms).
_NOT_RETRYABLE = frozenset({3, 5, 7, 9, 16, 400, 401, 403, 404})
# Where the request id travels with each item (and comes back with its response).
ID_KEY = "referee_request"
# The display name a batch carries: this prefix and the journal's id of it.
LABEL_PREFIX = "referee-"
FIND_LIMIT = 1000


class GoogleBatchAPI:
    provider = "google"
    max_items = 50_000       # the inline request's size is the binding limit
    max_bytes = 20 * 1024 * 1024  # inlined requests: 20 MB a batch

    def item_size(self, custom_id: str, path: str, body: dict[str, Any]) -> int:
        del path
        return len(json.dumps({"request": body, "metadata": {ID_KEY: custom_id}},
                              default=str).encode("utf-8"))

    async def create(self, client: Any, path: str, items: Sequence[tuple[str, dict[str, Any]]],
                     label: str) -> str:
        del path
        model = str(items[0][1]["model"])
        job = await client.aio.batches.create(model=model, src=[
            {"contents": body["contents"], "config": body["config"],
             "metadata": {ID_KEY: custom_id}} for custom_id, body in items],
            config={"display_name": f"{LABEL_PREFIX}{label}"})
        return str(job.name)

    async def find(self, client: Any, labels: Sequence[str]) -> dict[str, str]:
        wanted, found = {f"{LABEL_PREFIX}{label}": label for label in labels}, {}
        seen = 0
        async for job in await client.aio.batches.list(config={"page_size": 100}):
            if job.display_name in wanted:
                found[wanted[job.display_name]] = str(job.name)
            seen += 1
            if len(found) == len(wanted) or seen >= FIND_LIMIT:
                break
        return found

    async def retrieve(self, client: Any, batch_id: str) -> BatchState:
        job = await client.aio.batches.get(name=batch_id)
        state = str(getattr(job.state, "name", job.state))
        stats = getattr(job, "completion_stats", None) or getattr(job, "batch_stats", None)
        done = int(getattr(stats, "successful_count", 0) or 0) if stats else 0
        failed = int(getattr(stats, "failed_count", 0) or 0) if stats else 0
        error = getattr(job, "error", None)
        return BatchState(status=state.removeprefix("JOB_STATE_").lower(),
                          ended=state in _ENDED, completed=done, failed=failed,
                          failure=(f"{getattr(error, 'message', None) or 'the batch failed'}"
                                   if state == "JOB_STATE_FAILED" else None))

    async def results(self, client: Any, batch_id: str) -> dict[str, ItemOutcome]:
        job = await client.aio.batches.get(name=batch_id)
        state = str(getattr(job.state, "name", job.state)).removeprefix("JOB_STATE_").lower()
        outcomes: dict[str, ItemOutcome] = {}
        dest = getattr(job, "dest", None)
        for entry in getattr(dest, "inlined_responses", None) or []:
            custom_id = (entry.metadata or {}).get(ID_KEY)
            if custom_id is None:
                continue
            if entry.response is not None and entry.error is None:
                outcomes[custom_id] = ItemOutcome(body=entry.response)
                continue
            code = getattr(entry.error, "code", None)
            message = getattr(entry.error, "message", None) or f"the batch {state}"
            outcomes[custom_id] = ItemOutcome(error=f"{code}: {message}" if code else message,
                                              retryable=code not in _NOT_RETRYABLE)
        return outcomes

    async def cancel(self, client: Any, batch_id: str) -> None:
        await client.aio.batches.cancel(name=batch_id)
