"""One case as a cases.jsonl line, and back: every reader of a stored case goes through here.

A line is the ``CaseResult``'s JSON without the fields that hold their default (reading fills
them back in), and without the trajectory criterion's copies of the line's own tool calls: its
``details["expected_trajectory"]`` is the dump of the case's expected calls and
``details["actual_trajectory"]`` that of the execution's calls (flattened with
``include_nested``), which the line holds anyway as ``case`` and ``execution``. Such a value
is stored as ``null`` (so the details keep their order), and the line's last key names it::

    "_restore": {"criterion_results.1.details.expected_trajectory": "case.expected_tool_trajectory",
                 "criterion_results.1.details.actual_trajectory": "execution.tool_calls"}

Reading validates the line as it always did, then puts each named value back: the JSON dump
of the calls just read. A value is left out only when it is that dump of the same calls as
JSON text (types and key order included); a value JSON cannot hold as it is (a NaN, a set, an
object), or any other value, is stored as it is. Calls read back from their stored JSON dump
as they did before it was written (tests/test_run_store_line.py holds the odd values: floats,
nested arguments, unrecorded arguments, results, nested calls, stand-ins). Lines without
``"_restore"`` (every run stored before) read as they always did.

On the scale benchmark's case (benchmarks/scale.py) the two copies were 700 of 2,608 bytes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from referee.case import EvalCase
from referee.messages import ToolCall, flattened
from referee.record import CaseResult

RESTORE_KEY = "_restore"
_RESTORE_MARK = ',"' + RESTORE_KEY + '":'
# Where a left-out value was: in a criterion result of the case, or of one of its runs
# (``run_results``, which carry no case of their own: the line's case is theirs).
_LEFT_OUT = re.compile(r"(?:run_results\.(\d+)\.)?criterion_results\.(\d+)\.details\."
                       r"(expected_trajectory|actual_trajectory)")
_Calls = Callable[[CaseResult, "EvalCase | None"], "list[ToolCall] | None"]
# The calls a details value may copy, by the name "_restore" gives them: from a record (the
# case or one of its runs) and the line's case.
_SOURCES: dict[str, _Calls] = {
    "case.expected_tool_trajectory": lambda record, case: _expected(case),
    "execution.tool_calls": lambda record, case: _executed(record),
    "execution.tool_calls, flattened": lambda record, case: _flattened(_executed(record)),
}
# Which sources each details key may copy, tried in this order.
_COPIES = {"expected_trajectory": ("case.expected_tool_trajectory",),
           "actual_trajectory": ("execution.tool_calls", "execution.tool_calls, flattened")}


def case_line(result: CaseResult) -> str:
    """``result`` as one cases.jsonl line, without its trailing newline."""
    restore: dict[str, str] = {}
    stored = _without_copies(result, result.case, "", restore)
    line = stored.model_dump_json(exclude_defaults=True)
    if '"index":' not in line[:9]:  # a line always names its case's place, 0 too
        line = f'{{"index":{result.index},{line[1:]}'
    if not restore:
        return line
    return f'{line[:-1]}{_RESTORE_MARK}{_json(restore)}}}'


def read_case_line(raw: bytes | str) -> CaseResult:
    """The ``CaseResult`` of one line: ``ValidationError`` or ``ValueError`` when unreadable."""
    result = CaseResult.model_validate_json(raw)  # ``_restore`` is no field: it is ignored
    marked = _RESTORE_MARK.encode() in raw if isinstance(raw, bytes) else _RESTORE_MARK in raw
    if marked:
        restore = _restore_of(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
        if restore is not None:
            _put_back_copies(result, restore)
    return result


# Writing ---------------------------------------------------------------------------------

def _without_copies(record: CaseResult, case: EvalCase | None, prefix: str,
                    restore: dict[str, str]) -> CaseResult:
    """``record`` with ``None`` for each details value that is a copy of its calls (each
    named in ``restore``); ``record`` itself when it holds none."""
    dumps: dict[str, list[Any] | None] = {}
    criteria = list(record.criterion_results)
    for number, criterion in enumerate(criteria):
        details = criterion.details
        for key, names in _COPIES.items():
            value = details.get(key)
            if not value or not isinstance(value, list):
                continue
            for name in names:
                if name not in dumps:
                    calls = _SOURCES[name](record, case)
                    dumps[name] = None if calls is None else _dump(calls)
                dump = dumps[name]
                if dump and _same(value, dump):
                    details = {**details, key: None}
                    restore[f"{prefix}criterion_results.{number}.details.{key}"] = name
                    break
        if details is not criterion.details:
            criteria[number] = criterion.model_copy(update={"details": details})
    # The runs of a case run several times (a run has no runs of its own).
    runs = [_without_copies(run, case, f"run_results.{number}.", restore) if not prefix else run
            for number, run in enumerate(record.run_results)]
    if all(a is b for a, b in zip(criteria, record.criterion_results)) and all(
            a is b for a, b in zip(runs, record.run_results)):
        return record
    return record.model_copy(update={"criterion_results": criteria, "run_results": runs})


def _same(value: Any, dump: list[Any]) -> bool:
    """Equal as JSON text (1, 1.0 and true differ, and so does the order of keys); a value
    JSON cannot hold as it is (a NaN, a set, an object) is never the same."""
    try:
        return _json(value) == _json(dump)
    except (TypeError, ValueError):
        return False


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


# Reading ---------------------------------------------------------------------------------

def _restore_of(text: str) -> dict[str, str] | None:
    """The line's own ``"_restore"``: its last key. A key of that name anywhere else (inside
    a value of the user's) is followed by more than the line's closing brace."""
    at = text.rfind(_RESTORE_MARK)
    tail = text[at + len(_RESTORE_MARK):]
    try:
        restore, end = json.JSONDecoder().raw_decode(tail)
    except ValueError:
        return None
    if tail[end:].strip() != "}" or not isinstance(restore, dict):
        return None
    return restore


def _put_back_copies(result: CaseResult, restore: dict[str, Any]) -> None:
    for where, name in restore.items():
        place = _LEFT_OUT.fullmatch(where)
        if place is None or name not in _COPIES.get(place.group(3), ()):
            raise ValueError(f"{RESTORE_KEY} names {where!r} from {name!r}, which no line holds")
        run, number, key = place.groups()
        try:
            record = result if run is None else result.run_results[int(run)]
            details = record.criterion_results[int(number)].details
        except IndexError:
            details = {}
        calls = _SOURCES[name](record, result.case) if key in details else None
        if calls is None or details[key] is not None:
            raise ValueError(f"{RESTORE_KEY} names {where!r}, which this line does not hold")
        details[key] = _dump(calls)


# The calls a left-out value copied --------------------------------------------------------

def _expected(case: EvalCase | None) -> list[ToolCall] | None:
    return None if case is None else case.expected_tool_trajectory


def _executed(record: CaseResult) -> list[ToolCall] | None:
    return None if record.execution is None else list(record.execution.tool_calls)


def _flattened(calls: list[ToolCall] | None) -> list[ToolCall] | None:
    return None if calls is None else flattened(calls)


def _dump(calls: list[ToolCall]) -> list[Any]:
    # What the trajectory criterion stores (``model_dump()`` of each call) as it reads back:
    # JSON values, which is what the details of a line read back hold.
    return [call.model_dump() for call in calls]
