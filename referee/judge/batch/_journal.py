"""The durable record of a run's judge batches, beside the run in its directory.

Before a batch is submitted its request ids (``custom_id``, a digest of the request's key) are
written, and after it the provider's batch id: a process that dies between the two leaves a
batch that may not exist, one that dies later leaves one a resume polls instead of sending
its requests again. Lines are appended and synced; the latest line about a request wins.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger("referee.judge.batch")

# In the run directory, beside meta.json and cases.jsonl.
JOURNAL_FILE = "judge_batches.jsonl"


@dataclass(frozen=True)
class SubmittedBatch:
    provider: str
    batch_id: str
    path: str  # the items' API path (/chat/completions, /responses, /v1/messages)
    submitted_at: float = 0.0  # time.time() when its id was recorded (0: not recorded)
    requests: int = 0


class BatchJournal:
    """One run directory's journal: which batch each submitted request went out in."""

    def __init__(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir) / JOURNAL_FILE
        self._lock = threading.Lock()
        self._pending: dict[str, list[str]] = {}     # local id -> custom_ids, not yet submitted
        self._batch_of: dict[str, SubmittedBatch] = {}  # custom_id -> where it went
        self._batches: dict[str, SubmittedBatch] = {}   # provider batch id -> batch
        self._pending_where: dict[str, tuple[str, str]] = {}  # local id -> (provider, path)
        self._read()

    def _read(self) -> None:
        if not self.path.exists():
            return
        pending_path = self._pending_where
        with self.path.open("rb") as handle:
            for number, raw in enumerate(handle, 1):
                try:
                    entry = json.loads(raw)
                except ValueError:
                    # A line cut short by a kill: its batch is treated as never submitted.
                    logger.warning("%s line %d is not JSON; ignored", self.path, number)
                    continue
                event, local = entry.get("event"), str(entry.get("local", ""))
                if event == "submitting":
                    self._pending[local] = [str(i) for i in entry.get("custom_ids") or []]
                    pending_path[local] = (str(entry.get("provider")), str(entry.get("path")))
                elif event == "submitted" and local in self._pending:
                    provider, path = pending_path[local]
                    batch = SubmittedBatch(provider, str(entry.get("batch_id")), path,
                                           float(entry.get("at") or 0.0),
                                           len(self._pending[local]))
                    self._batches[batch.batch_id] = batch
                    for custom_id in self._pending.pop(local):
                        self._batch_of[custom_id] = batch
                elif event == "abandoned":
                    self._pending.pop(local, None)

    def describe(self) -> str:
        """One line for ``referee list``: the batches this run submitted, and how long ago."""
        batches = self.batches
        if not batches:
            return ""
        newest = max(b.submitted_at for b in batches)
        age = f", newest {_age(time.time() - newest)} ago" if newest else ""
        ids = ", ".join(f"{b.provider} {b.batch_id}" for b in batches[-3:])
        more = f" and {len(batches) - 3} earlier" if len(batches) > 3 else ""
        return (f"{len(batches)} judge batch(es) submitted, {sum(b.requests for b in batches)} "
                f"request(s){age}: {ids}{more}")

    def batch_of(self, custom_id: str) -> SubmittedBatch | None:
        """The submitted batch that holds this request, if one does."""
        with self._lock:
            return self._batch_of.get(custom_id)

    @property
    def batches(self) -> list[SubmittedBatch]:
        with self._lock:
            return list(self._batches.values())

    def unconfirmed_batches(self, provider: str) -> list[tuple[str, str]]:
        """(local id, path) of this provider's batches recorded as being submitted whose
        provider id was never recorded: each may exist at the provider, or not."""
        with self._lock:
            return [(local, self._pending_where[local][1]) for local in self._pending
                    if self._pending_where.get(local, ("", ""))[0] == provider]

    @property
    def unconfirmed(self) -> int:
        """Batches recorded as being submitted whose provider id was never recorded."""
        with self._lock:
            return len(self._pending)

    def submitting(self, local: str, provider: str, path: str,
                   custom_ids: Sequence[str]) -> None:
        with self._lock:
            self._pending[local] = list(custom_ids)
            self._pending_where[local] = (provider, path)
            self._append({"event": "submitting", "local": local, "provider": provider,
                          "path": path, "custom_ids": list(custom_ids)})

    def submitted(self, local: str, provider: str, path: str, batch_id: str) -> None:
        with self._lock:
            ids = self._pending.pop(local, [])
            batch = SubmittedBatch(provider, batch_id, path, time.time(), len(ids))
            self._batches[batch_id] = batch
            for custom_id in ids:
                self._batch_of[custom_id] = batch
            self._append({"event": "submitted", "local": local, "batch_id": batch_id,
                          "at": round(batch.submitted_at, 3)})

    def abandoned(self, local: str, why: str) -> None:
        """The batch was never created (refused, split): its requests go out elsewhere."""
        with self._lock:
            self._pending.pop(local, None)
            self._append({"event": "abandoned", "local": local, "why": why})

    def _append(self, entry: dict[str, Any]) -> None:
        line = (json.dumps(entry, separators=(",", ":")) + "\n").encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)  # the point of the journal: it must outlive a kill
        finally:
            os.close(fd)


def _age(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


_JOURNAL: ContextVar[BatchJournal | None] = ContextVar("referee_batch_journal", default=None)
_journals: dict[Path, BatchJournal] = {}
_journals_lock = threading.Lock()


@contextlib.contextmanager
def batch_progress(shown: bool) -> Iterator[None]:
    """While inside, each batch's progress (submitted, its state changes with the completed
    and failed counts and the time since submission, items sent again) is printed on stderr;
    nothing when ``shown`` is false."""
    if not shown:
        yield
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("referee: %(message)s"))
    handler.setLevel(logging.INFO)
    level = logger.level
    logger.addHandler(handler)
    if not logger.isEnabledFor(logging.INFO):
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


@contextlib.contextmanager
def batch_journal(run_dir: str | Path | None) -> Iterator[BatchJournal | None]:
    """Judge batches submitted inside are recorded in ``run_dir`` (None: nowhere)."""
    journal: BatchJournal | None = None
    if run_dir is not None:
        key = Path(run_dir).resolve()
        with _journals_lock:
            journal = _journals.get(key)
            if journal is None:
                journal = _journals[key] = BatchJournal(key)
    token = _JOURNAL.set(journal)
    try:
        yield journal
    finally:
        _JOURNAL.reset(token)
        if journal is not None:
            with _journals_lock:
                _journals.pop(journal.path.parent, None)


def current_journal() -> BatchJournal | None:
    return _JOURNAL.get()
