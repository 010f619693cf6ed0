"""What every adapter shares: the recorded run, the reader protocol and the extras check.

Adapters depend on the data model only (``case``/``execution``); scoring goes through
``referee.run``. Nothing in the core imports this package.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

from referee.case import EvalCase
from referee.execution import UNRECORDED_KEY, ExecutionResult

# Where a recorded run stores what its trace did not say (opt-in attributes left out, results
# without a call): kept with the run, shown in the report, never filled in by guessing.
TRACE_NOTES_KEY = "trace_notes"


@dataclass
class RecordedRun:
    """One run read from a trace file: what the agent did, and where it came from.

    ``run_id`` pairs it with a case of the same ``eval_id``; ``case`` is set when the record
    carries its own case (user turns and any expectations written next to the recording).
    """

    run_id: str | None
    execution: ExecutionResult
    where: str
    case: EvalCase | None = None
    notes: list[str] = field(default_factory=list)
    # What the user said, turn by turn: text, or a list of parts where a turn holds images.
    user_turns: list[Any] = field(default_factory=list)


# A parsed record of a trace file and its line (None for a record inside one JSON document).
NumberedRecord = tuple["int | None", Any]


@runtime_checkable
class TraceReader(Protocol):
    """A trace format: ``sniff`` says whether parsed records are in it, ``read`` converts them."""

    name: str

    def sniff(self, records: list[Any]) -> bool: ...

    def read(self, records: list[NumberedRecord], source: str) -> list[RecordedRun]: ...


def record_location(source: str, line: int | None, index: int, count: int) -> str:
    """``file:line`` for JSONL, ``file: record N`` inside a JSON list, the file for one record."""
    if line is not None:
        return f"{source}:{line}"
    return f"{source}: record {index}" if count > 1 else source


TRACE_READERS: list[TraceReader] = []


def register_trace_reader(reader: TraceReader) -> TraceReader:
    """Add a trace format; readers are tried in registration order, the first sniff wins."""
    if not isinstance(reader, TraceReader):
        raise TypeError(f"{reader!r} is not a TraceReader "
                        f"(name, sniff(records), read(records, source))")
    TRACE_READERS.append(reader)
    return reader


def require_extra(module: str, extra: str) -> ModuleType:
    """Import an optional framework, or fail in one line that names the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"this adapter needs the '{extra}' extra: pip install 'referee[{extra}]' "
            f"(could not import {module}: {exc})") from None


def with_notes(execution: ExecutionResult, notes: list[str],
               unrecorded: dict[str, str] | None = None) -> ExecutionResult:
    """Keep what the recording left unsaid; ``unrecorded`` names the fields its format could
    not carry (``UNRECORDED_KEY``), so the criteria that read them are skipped with that reason
    instead of failing on what is not there."""
    if notes:
        execution.metadata[TRACE_NOTES_KEY] = notes
    if unrecorded:
        execution.metadata[UNRECORDED_KEY] = dict(unrecorded)
    return execution
