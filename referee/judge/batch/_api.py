"""What a provider's batch API must do for the transport, and what it reports back."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol


class EnqueuedLimitReached(Exception):
    """The provider refused the batch for its enqueued-token (or queued-request) limit: it is
    split or waits for batches in flight, never failed for it."""


@dataclass(frozen=True)
class BatchState:
    """A submitted batch as the provider reports it."""

    status: str         # the provider's own word: validating, in_progress, ended, completed...
    ended: bool         # no item will change any more
    completed: int = 0  # items answered so far
    failed: int = 0     # items that ended in an error (expired, cancelled included)
    total: int = 0
    # The whole batch failed (validation); its items get this as their error.
    failure: str | None = None
    limit_exceeded: bool = False  # it failed for the enqueued-token limit


@dataclass(frozen=True)
class ItemOutcome:
    """One item's result: the reply body as the online API would have sent it, or an error."""

    body: Any = None  # a JSON object; Gemini's typed GenerateContentResponse
    error: str | None = None
    # Worth asking again in a new batch (expired, cancelled, a 429 or 5xx); a 400 is not.
    retryable: bool = True


class BatchAPI(Protocol):
    provider: str
    max_items: int
    max_bytes: int

    def item_size(self, custom_id: str, path: str, body: dict[str, Any]) -> int:
        """The bytes the item adds to the batch's upload."""

    async def create(self, client: Any, path: str, items: Sequence[tuple[str, dict[str, Any]]],
                     label: str) -> str:
        """Submit the items (all for ``path``); the provider's batch id. ``label`` (the
        journal's id for the batch) goes with it where the API keeps one, for ``find``.
        Raises EnqueuedLimitReached when the provider refuses it for its queue limit."""

    async def find(self, client: Any, labels: Sequence[str]) -> dict[str, str]:
        """The provider's id of each batch created with one of these labels (those it can
        find; none where the API keeps no label)."""

    async def retrieve(self, client: Any, batch_id: str) -> BatchState: ...

    async def results(self, client: Any, batch_id: str) -> dict[str, ItemOutcome]:
        """Every item's outcome by custom_id, once the batch has ended."""

    async def cancel(self, client: Any, batch_id: str) -> None: ...
