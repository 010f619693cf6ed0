"""A run's finished cases read from cases.jsonl on demand, so a report never holds them all.

``StoredCases`` is the ``report.cases`` of a stored run: a read-only sequence in case order.
Opening it costs nothing; the first access that needs positions scans the file once and keeps
one byte offset per case (8 bytes each), and every case is parsed only when it is read. Runs of
up to ``CACHED_CASES_UP_TO`` cases are parsed once and kept, so small runs behave exactly like
the plain list they used to be (the same objects on every access).

Order and duplicates follow the run store's rules: cases are ordered by their position in the
run (``CaseResult.index``); when a case was recorded twice (a resume with ``retry_errors``),
the later line wins; a torn final line (the process died mid-write) is ignored.
"""

from __future__ import annotations

import json
import re
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, overload

from pydantic import ValidationError

from referee.errors import InputError
from referee.record import CaseResult, RunTally
from referee.store._case_line import read_case_line

CACHED_CASES_UP_TO = 2_000

# CaseResult's first field is ``index``, so its position is readable without parsing the line.
_INDEX_PREFIX = re.compile(rb'^\{"index":(-?\d+),')
_EXPECTED = "one CaseResult JSON object per line"


class StoredCases(Sequence[CaseResult]):
    """The cases of one cases.jsonl, in case order, parsed as they are read."""

    def __init__(self, path: str | Path, *, tally: RunTally | None = None) -> None:
        self.path = Path(path)
        self._tally = tally
        self._offsets: array[int] | None = None
        self._cached: list[CaseResult] | None = None

    # Index ----------------------------------------------------------------------------------
    def _index(self) -> array[int]:
        if self._offsets is None:
            offsets = scan_offsets(self.path)
            if self._tally is not None and len(offsets) != self._tally.cases:
                # The counts of a finished run would no longer be about the cases it shows.
                raise InputError(
                    f"holds {len(offsets)} case(s) where the finished run recorded "
                    f"{self._tally.cases}: case lines were lost or added since; rerun with "
                    f"--resume {self.path.parent} to run any missing cases again",
                    source=str(self.path))
            self._offsets = offsets
        return self._offsets

    def _parse_at(self, fh: Any, offset: int) -> CaseResult:
        fh.seek(offset)
        line = fh.readline()
        try:
            return read_case_line(line)
        except (ValidationError, ValueError) as exc:
            raise InputError(f"unreadable case record: {_first_error(exc)}", source=str(self.path),
                             expected=_EXPECTED) from None

    def _all(self) -> list[CaseResult] | None:
        """The parsed list when the run is small enough to keep; None for a large run."""
        if self._cached is None and len(self._index()) <= CACHED_CASES_UP_TO:
            self._cached = list(self._stream())
        return self._cached

    def kept_list(self) -> list[CaseResult] | None:
        """The parsed cases as the plain list this run keeps anyway (up to
        CACHED_CASES_UP_TO cases); None for a larger run, which is never held whole."""
        return self._all()

    def _stream(self) -> Iterator[CaseResult]:
        offsets = self._index()
        if not offsets:
            return
        with open(self.path, "rb") as fh:
            for offset in offsets:
                yield self._parse_at(fh, offset)

    # Sequence -------------------------------------------------------------------------------
    def __len__(self) -> int:
        if self._offsets is None and self._tally is not None:
            return self._tally.cases  # a finished run's count, without scanning its file
        return len(self._index())

    @overload
    def __getitem__(self, i: int) -> CaseResult: ...
    @overload
    def __getitem__(self, i: slice) -> list[CaseResult]: ...

    def __getitem__(self, i: int | slice) -> CaseResult | list[CaseResult]:
        cached = self._all()
        if cached is not None:
            return cached[i]
        offsets = self._index()
        if isinstance(i, slice):
            with open(self.path, "rb") as fh:
                return [self._parse_at(fh, offsets[j]) for j in range(*i.indices(len(offsets)))]
        with open(self.path, "rb") as fh:
            return self._parse_at(fh, offsets[i])

    def __iter__(self) -> Iterator[CaseResult]:
        cached = self._all()
        return iter(cached) if cached is not None else self._stream()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, StoredCases)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to lists, so not hashable either

    def __repr__(self) -> str:
        return f"StoredCases({str(self.path)!r}, {len(self)} case(s))"

    # Aggregates -----------------------------------------------------------------------------
    @property
    def tally(self) -> RunTally:
        """Counts and per-criterion statistics: from the run itself, else one pass over the file."""
        if self._tally is None:
            self._tally = RunTally.of(self)
        return self._tally


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        return f"{err['msg']}" + (f" at {where}" if where else "")
    return str(exc)


def _line_index(line: bytes) -> int | None:
    match = _INDEX_PREFIX.match(line)
    if match is not None:
        return int(match.group(1))
    try:
        value = json.loads(line)
    except ValueError:
        return None
    index = value.get("index", 0) if isinstance(value, dict) else None
    return index if isinstance(index, int) else None


def scan_offsets(path: Path) -> array[int]:
    """One byte offset per case, in case order; later records of a case replace earlier ones."""
    positions: array[int] = array("q")
    offsets: array[int] = array("q")
    if not path.is_file():
        return offsets
    offset = 0
    pending_error: tuple[int, str] | None = None
    with open(path, "rb") as fh:
        for number, line in enumerate(fh, start=1):
            start, offset = offset, offset + len(line)
            if not line.strip():
                continue
            if pending_error is not None:
                # A damaged line followed by more records is corruption, not a torn tail.
                raise InputError("unreadable case record", source=str(path), line=pending_error[0],
                                 expected=_EXPECTED)
            index = _line_index(line)
            if index is None or not line.endswith(b"\n") and not _parses(line):
                pending_error = (number, "")
                continue
            positions.append(index)
            offsets.append(start)
    if all(positions[i] < positions[i + 1] for i in range(len(positions) - 1)):
        return offsets
    # Written in completion order, or a case recorded twice: order by position, keep the last.
    order = sorted(range(len(positions)), key=positions.__getitem__)
    ordered: array[int] = array("q")
    for j, i in enumerate(order):
        if j + 1 < len(order) and positions[order[j + 1]] == positions[i]:
            continue
        ordered.append(offsets[i])
    return ordered


def _parses(line: bytes) -> bool:
    try:
        read_case_line(line)
    except (ValidationError, ValueError):
        return False
    return True
