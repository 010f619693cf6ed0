"""The spool: every accepted OTLP request on disk before its 200, and what has been scored.

``segment-NNNNNNNN.jsonl`` hold the requests, one line each (``seq``, ``signal``, receive
time, the OTLP/JSON document), appended and fsynced in groups: concurrent requests share one
fsync, and none is answered before its line is synced. ``scored.jsonl`` is the ledger: for
each case scored (or sampled out), the highest request ``seq`` of each of its traces, and the
judge spend, written only after the run store has synced the case; ``window`` lines name the
run directory being written (a case stored but not yet in the ledger is found there). A restart replays every
segment and keeps only the items of each trace past its ledger ``seq``, so an accepted trace is
scored once: never lost, never twice. A segment whose traces are all scored is deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from referee.errors import InputError

SEGMENT_PREFIX = "segment-"
LEDGER_FILE = "scored.jsonl"
LOCK_FILE = ".lock"
DEFAULT_SEGMENT_BYTES = 32 * 1024 * 1024
# The ledger keeps a day of spend: the daily cap reads it back after a restart.
SPEND_MEMORY_S = 86_400.0


@dataclass
class SpoolRecord:
    seq: int
    signal: str
    received_at: float
    document: dict[str, Any]


@dataclass
class LedgerState:
    """What the ledger says on opening: scored trace items, spend, the last window."""

    scored: dict[str, int] = field(default_factory=dict)  # trace id -> highest scored seq
    spend: list[tuple[float, float]] = field(default_factory=list)  # (time, USD)
    window: str | None = None  # run directory name of the last window written


def trace_ids(document: dict[str, Any]) -> set[str]:
    """The trace ids a request's spans or log records belong to."""
    found: set[str] = set()
    for resource in document.get("resourceSpans") or []:
        for scope in (resource or {}).get("scopeSpans") or []:
            found.update(str(s.get("traceId")) for s in (scope or {}).get("spans") or []
                         if isinstance(s, dict) and s.get("traceId"))
    for resource in document.get("resourceLogs") or []:
        for scope in (resource or {}).get("scopeLogs") or []:
            found.update(str(r.get("traceId")) for r in (scope or {}).get("logRecords") or []
                         if isinstance(r, dict) and r.get("traceId"))
    return found


class Spool:
    """Append-only request segments plus the scored ledger, in one directory."""

    def __init__(self, directory: str | Path, *,
                 segment_bytes: int = DEFAULT_SEGMENT_BYTES) -> None:
        self.directory = Path(directory)
        self.segment_bytes = segment_bytes
        self.next_seq = 0
        self._segment_no = 0
        self._segment: Any = None
        self._segment_size = 0
        self._ledger: Any = None
        self._unflushed: list[tuple[bytes, dict[str, int]]] = []  # (ledger line, its seqs)
        self._waiting: list[tuple[str, dict[str, Any], asyncio.Future[int]]] = []
        self._flusher: asyncio.Task[None] | None = None
        # Per segment, its traces not yet scored (trace id -> the segment's highest seq of it).
        self._unscored: dict[int, dict[str, int]] = {}
        self._segments_of: dict[str, set[int]] = {}
        self.on_durable: Callable[[SpoolRecord], None] = lambda record: None
        self._lock: int | None = None  # the kernel's lock: it dies with a killed process

    # Opening and replay -----------------------------------------------------------------
    def _segments(self) -> list[tuple[int, Path]]:
        found = []
        for path in self.directory.glob(f"{SEGMENT_PREFIX}*.jsonl"):
            number = path.stem[len(SEGMENT_PREFIX):]
            if number.isdigit():
                found.append((int(number), path))
        return sorted(found)

    def open(self) -> tuple[LedgerState, list[SpoolRecord]]:
        """Take the spool (one process at a time), read the ledger and every segment; the
        records are returned in ``seq`` order.

        A torn last line (killed while writing: never acknowledged) is cut off.
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock = os.open(self.directory / LOCK_FILE, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock)
            self._lock = None
            raise InputError("another referee serve process uses this spool",
                             source=str(self.directory),
                             expected="one spool directory per serve process (--spool)") from None
        state = self._read_ledger()
        records: list[SpoolRecord] = []
        segments = self._segments()
        for number, path in segments:
            records.extend(self._read_segment(number, path, is_last=number == segments[-1][0]))
        if records:
            self.next_seq = records[-1].seq + 1
        self._segment_no = segments[-1][0] + 1 if segments else 0
        oldest = records[0].seq if records else self.next_seq
        state.scored = {tid: seq for tid, seq in state.scored.items() if seq >= oldest}
        self._rewrite_ledger(state)
        self.resolve(state.scored)
        for number in list(self._unscored):
            self._delete_if_scored(number)
        return state, records

    def _read_segment(self, number: int, path: Path, *, is_last: bool) -> list[SpoolRecord]:
        data = path.read_bytes()
        lines = data.split(b"\n")
        # After the last newline: a line whose write never finished (its request was never
        # answered). Only the last segment can end so; it is cut off before appending resumes.
        torn = lines.pop()
        records = []
        for raw in lines:
            try:
                line = orjson.loads(raw)
                record = SpoolRecord(int(line["seq"]), str(line["signal"]),
                                     float(line["at"]), line["data"])
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                continue  # damage inside a segment: that line alone is lost, never the rest
            records.append(record)
            self._register(number, record)
        if torn and is_last:
            with open(path, "r+b") as fh:
                fh.truncate(len(data) - len(torn))
        return records

    def _register(self, number: int, record: SpoolRecord) -> None:
        unscored = self._unscored.setdefault(number, {})
        for tid in trace_ids(record.document):
            unscored[tid] = record.seq
            self._segments_of.setdefault(tid, set()).add(number)

    def _read_ledger(self) -> LedgerState:
        state = LedgerState()
        path = self.directory / LEDGER_FILE
        if not path.is_file():
            return state
        horizon = time.time() - SPEND_MEMORY_S
        for raw in path.read_bytes().split(b"\n"):
            try:
                line = orjson.loads(raw) if raw.strip() else None
            except orjson.JSONDecodeError:
                continue  # a torn tail; the run store has that case (reconciled by the caller)
            if not isinstance(line, dict):
                continue
            if "window" in line:
                state.window = str(line["window"])
            for tid, seq in (line.get("scored") or {}).items():
                state.scored[tid] = max(int(seq), state.scored.get(tid, -1))
            if line.get("spend") and float(line.get("at", 0)) >= horizon:
                state.spend.append((float(line["at"]), float(line["spend"])))
        return state

    def _rewrite_ledger(self, state: LedgerState) -> None:
        """The ledger cut to what still matters: traces still spooled, a day of spend."""
        path = self.directory / LEDGER_FILE
        lines: list[dict[str, Any]] = [{"scored": state.scored}] if state.scored else []
        lines += [{"at": at, "spend": usd} for at, usd in state.spend]
        if state.window is not None:
            lines.append({"window": state.window})
        staging = path.with_suffix(".tmp")
        with open(staging, "wb") as fh:
            fh.write(b"".join(orjson.dumps(line) + b"\n" for line in lines))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(staging, path)
        self._ledger = open(path, "ab")

    # Accepting requests -----------------------------------------------------------------
    async def append(self, signal: str, document: dict[str, Any]) -> int:
        """Keep a request: returns its seq once its line is on disk (fsynced)."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiting.append((signal, document, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        while self._waiting:
            batch, self._waiting = self._waiting, []
            now = time.time()
            records = []
            for signal, document, _ in batch:
                records.append(SpoolRecord(self.next_seq, signal, now, document))
                self.next_seq += 1
            try:
                lines = [orjson.dumps({"seq": r.seq, "signal": r.signal, "at": r.received_at,
                                       "data": r.document}) + b"\n" for r in records]
                number = await loop.run_in_executor(None, self._write, lines)
            except BaseException as exc:
                for _, _, future in batch:
                    if not future.done():
                        future.set_exception(exc if isinstance(exc, Exception)
                                             else OSError("spool write interrupted"))
                if not isinstance(exc, Exception):
                    raise
                continue
            for record, (_, _, future) in zip(records, batch):
                self._register(number, record)
                try:
                    self.on_durable(record)  # in seq order, before any answer goes out
                finally:
                    if not future.done():
                        future.set_result(record.seq)  # on disk: a restart scores it

    def _write(self, lines: list[bytes]) -> int:
        if self._segment is None or self._segment_size >= self.segment_bytes:
            self._rotate()
        data = b"".join(lines)
        try:
            self._segment.write(data)
            self._segment.flush()
            os.fsync(self._segment.fileno())
        except OSError:
            # Part of the batch may be on disk without its newline: the next batch goes to a
            # new segment, so no acknowledged line is ever glued to a torn one.
            with contextlib.suppress(OSError):
                self._segment.close()
            self._segment = None
            self._segment_no += 1
            raise
        self._segment_size += len(data)
        return self._segment_no

    def _rotate(self) -> None:
        previous = self._segment_no
        if self._segment is not None:
            self._segment.close()
            self._segment_no += 1
        self._segment = open(self.directory / f"{SEGMENT_PREFIX}{self._segment_no:08d}.jsonl",
                             "ab")
        self._segment_size = self._segment.tell()
        if previous != self._segment_no:
            self._delete_if_scored(previous)

    # The ledger ---------------------------------------------------------------------------
    def record_window(self, run_dir_name: str) -> None:
        """Before a window's first case: the restart knows which run directory to reconcile."""
        self.flush_ledger()
        self._ledger.write(orjson.dumps({"window": run_dir_name}) + b"\n")
        self._ledger.flush()
        os.fsync(self._ledger.fileno())

    def record_scored(self, scored: dict[str, int], *, case: str, outcome: str,
                      spend: float = 0.0) -> None:
        """After the case is in the run store: its trace items are done. Held until
        ``flush_ledger``, which the caller runs once the run store is synced: a ledger line
        never reaches the disk before the case it covers (a machine that goes down could
        otherwise keep the line and lose the case)."""
        self._unflushed.append((orjson.dumps({"scored": scored, "case": case,
                                              "outcome": outcome, "at": time.time(),
                                              "spend": spend}) + b"\n", scored))

    @property
    def ledger_pending(self) -> int:
        return len(self._unflushed)

    def flush_ledger(self) -> None:
        """Write and sync the held ledger lines; then their segments may go."""
        if not self._unflushed:
            return
        held, self._unflushed = self._unflushed, []
        self._ledger.write(b"".join(line for line, _ in held))
        self._ledger.flush()
        os.fsync(self._ledger.fileno())
        for _, scored in held:
            self.resolve(scored)

    def resolve(self, scored: dict[str, int]) -> None:
        """Forget scored traces per segment; delete a closed segment with none left."""
        touched: set[int] = set()
        for tid, seq in scored.items():
            segments = self._segments_of.get(tid, set())
            for number in list(segments):
                unscored = self._unscored.get(number, {})
                if unscored.get(tid, seq + 1) <= seq:
                    del unscored[tid]
                    touched.add(number)
                if tid not in unscored:
                    segments.discard(number)
            if not segments:
                self._segments_of.pop(tid, None)  # memory follows the spool, not all history
        for number in touched:
            self._delete_if_scored(number)

    def _delete_if_scored(self, number: int) -> None:
        current = self._segment_no if self._segment is not None else None
        if number == current or self._unscored.get(number):
            return
        self._unscored.pop(number, None)
        with contextlib.suppress(FileNotFoundError):
            (self.directory / f"{SEGMENT_PREFIX}{number:08d}.jsonl").unlink()

    def segment_count(self) -> int:
        return len(self._segments())

    def close(self) -> None:
        """Close the files (the caller flushes the ledger first, once the store is synced)."""
        for fh in (self._segment, self._ledger):
            if fh is not None:
                with contextlib.suppress(OSError):
                    fh.flush()
                    os.fsync(fh.fileno())
                fh.close()
        self._segment = self._ledger = None
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None
