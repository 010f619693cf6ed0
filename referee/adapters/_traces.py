"""Recorded runs: read a trace file, pair its runs with cases, and score them.

Nothing is re-run: each case's "execution" is the recorded run, so the report's model is
``recorded``. Runs pair with cases by id (a record's ``eval_id``/``id``/``conversation_id``...,
or a trace's ``gen_ai.conversation.id``, else its trace id); without a case file, each record is
its own case (its user turns, plus any case fields written next to the recording).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from referee.adapters._base import (
    TRACE_READERS,
    NumberedRecord,
    RecordedRun,
    record_location,
    register_trace_reader,
)
from referee.adapters._messages import read_messages, usage_from
from referee.adapters._otel import OtlpReader, read_otlp
from referee.case import EvalCase
from referee.errors import InputError, beyond_python_limits
from referee.execution import ExecutionResult

RECORDED_MODEL_ID = "recorded"
# Keys that name a recorded run, in the order they are looked for.
RUN_ID_KEYS = ("eval_id", "id", "case_id", "conversation_id", "thread_id", "session_id")
_RECORDING_KEYS = ("messages", "usage")


def _load_json_records(path: Path) -> list[NumberedRecord]:
    """(line, value) of each record: JSONL lines, the items of a JSON list of runs, or one run."""
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # as case files: Windows tools write a BOM
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                         source=source) from None
    try:
        whole = json.loads(text)
    except json.JSONDecodeError as whole_error:
        lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
        if len(lines) < 2:
            raise InputError(f"not valid JSON ({whole_error.msg})", source=source,
                             line=whole_error.lineno) from None
        records: list[NumberedRecord] = []
        for number, line in lines:
            try:
                records.append((number, json.loads(line)))
            except json.JSONDecodeError as exc:
                raise InputError(f"not valid JSON ({exc.msg} at column {exc.colno})",
                                 source=source, line=number,
                                 expected="one JSON value per line (JSONL)") from None
            except (ValueError, RecursionError) as exc:
                raise beyond_python_limits(exc, source=source, text=line, line=number) from None
        return records
    except (ValueError, RecursionError) as exc:
        raise beyond_python_limits(exc, source=source, text=text) from None
    if isinstance(whole, list) and whole and not _looks_like_message(whole[0]):
        return [(None, item) for item in whole]
    return [(None, whole)]


def _looks_like_message(value: Any) -> bool:
    return isinstance(value, Mapping) and "messages" not in value and "resourceSpans" not in value \
        and any(k in value for k in ("role", "type", "lc"))


def _run_id(record: Mapping[str, Any]) -> str | None:
    for key in RUN_ID_KEYS:
        if record.get(key) not in (None, ""):
            return str(record[key])
    return None


def _case_from(fields: Mapping[str, Any], run_id: str | None, user_turns: list[Any],
               where: str) -> EvalCase:
    """The record's own case: its user turns (text, or parts where a turn holds images), plus
    case fields written next to the recording."""
    data = dict(fields)
    if "conversation" not in data and "input" not in data:
        if len(user_turns) == 1:
            # Text, or the parts the turn was sent: the case's identity covers its images.
            data["input"] = user_turns[0]
        elif user_turns:
            data["conversation"] = [{"user_content": said} for said in user_turns]
    if run_id is not None:
        data.setdefault("eval_id", run_id)
    data.setdefault("name", "" if run_id or user_turns else where)
    try:
        case = EvalCase.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise InputError(str(first["msg"]).removeprefix("Value error, "), source=where,
                         field=field) from None
    return case


class MessageListReader:
    """JSON/JSONL of OpenAI-style message lists, bare or as ``{"id": ..., "messages": [...]}``."""

    name = "messages"

    def sniff(self, records: list[Any]) -> bool:
        first = records[0] if records else None
        return isinstance(first, list) or (isinstance(first, Mapping) and "messages" in first)

    def read(self, records: list[NumberedRecord], source: str) -> list[RecordedRun]:
        return [self._read_one(value, record_location(source, line, index, len(records)))
                for index, (line, value) in enumerate(records)]

    @staticmethod
    def _read_one(value: Any, where: str) -> RecordedRun:
        record = {"messages": value} if isinstance(value, list) else value
        if not isinstance(record, Mapping) or "messages" not in record:
            error = InputError(f"got {type(value).__name__}", source=where,
                               expected="a list of messages or an object with 'messages'")
            return RecordedRun(None, ExecutionResult(error=str(error)), where)
        run_id = _run_id(record)
        try:
            conversation = read_messages(record["messages"], where)
            if not conversation.turns:
                # Nothing recorded is no evidence; scored, it passes every check expecting none.
                raise InputError("no user, assistant or tool message", source=where,
                                 field="messages", expected="a recorded conversation")
            unrecorded = {} if any(turn.node_visits for turn in conversation.turns) else {
                "node_visits": f"{where}: no assistant message names its agent ('name'), so "
                               f"the messages carry no node visits"}
            execution = conversation.execution(unrecorded)
            if record.get("usage") is not None:
                execution.token_usage = usage_from(record["usage"]) or execution.token_usage
            users = [content for content in conversation.said if content]
            fields = {k: v for k, v in record.items()
                      if k not in _RECORDING_KEYS and k not in RUN_ID_KEYS[1:]}
            case = _case_from(fields, run_id, users, where)
        except InputError as exc:
            return RecordedRun(run_id, ExecutionResult(error=str(exc)), where)
        return RecordedRun(run_id, execution, where, case=case,
                           notes=conversation.notes, user_turns=users)


MESSAGE_LIST_READER = register_trace_reader(MessageListReader())
OTLP_READER = register_trace_reader(OtlpReader())


def read_traces(path: str | Path, logs: str | Path | None = None) -> list[RecordedRun]:
    """Every recorded run in a trace file (message lists or OTLP/JSON, JSON or JSONL).

    ``logs``: the OTLP/JSON logs export of the same runs, where a GenAI instrumentation of the
    v1.28-1.36 conventions put the message content (``gen_ai.*.message``/``gen_ai.choice``
    events); a trace file holding both signals needs none. A record that cannot be read becomes
    a run with ``execution.error`` set (one line naming the file, the line or span, and the
    field), so the other runs are still scored.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError("no such file", source=str(path))
    numbered = _load_json_records(path)
    values = [value for _, value in numbered]
    if logs is not None:
        logs = Path(logs)
        if not logs.is_file():
            raise InputError("no such file", source=str(logs))
        log_records = _load_json_records(logs)
        if not OTLP_READER.sniff(values) or not all(
                isinstance(value, Mapping) and "resourceLogs" in value for _, value in log_records):
            raise InputError("a logs companion goes with OTLP/JSON spans", source=str(logs),
                             expected="an OTLP/JSON logs export ('resourceLogs') next to an "
                                      "OTLP/JSON trace export")
        return read_otlp(numbered, str(path), logs=(log_records, str(logs)))
    for reader in TRACE_READERS:
        if reader.sniff(values):
            return reader.read(numbered, str(path))
    raise InputError("neither OpenAI-style message lists nor OTLP/JSON spans", source=str(path),
                     expected="a list of messages, objects with 'messages', or an OTLP export "
                              "with 'resourceSpans'")


def pair_runs(runs: Sequence[RecordedRun], cases: Sequence[EvalCase] | None = None, *,
              source: str = "the traces",
              ) -> tuple[list[tuple[EvalCase, ExecutionResult]], list[str]]:
    """(case, recorded execution) pairs, and notes on what could not be paired.

    With ``cases``, each case takes the run with its ``eval_id``; a case without one is kept
    and fails as a model error ("no recorded run"), never silently dropped.
    """
    notes: list[str] = []
    if cases is None:
        pairs = []
        for index, run in enumerate(runs):
            case = run.case or _case_from({}, run.run_id or f"record-{index}", run.user_turns,
                                          run.where)
            pairs.append((case, run.execution))
        return pairs, notes
    by_id: dict[str, RecordedRun] = {}
    for run in runs:
        if run.run_id is None:
            notes.append(f"{run.where}: the record has no id ({', '.join(RUN_ID_KEYS)}); it "
                         f"cannot be paired with a case and is not scored")
        elif run.run_id in by_id:
            raise InputError(f"a second recorded run with id {run.run_id!r} (the first is at "
                             f"{by_id[run.run_id].where})", source=run.where,
                             expected="one recorded run per case id")
        else:
            by_id[run.run_id] = run
    pairs = []
    for case in cases:
        paired = by_id.pop(case.eval_id, None)
        execution = paired.execution if paired is not None else ExecutionResult(
            error=f"no recorded run with id {case.eval_id!r} in {source}")
        pairs.append((case, execution))
    notes.extend(f"{run.where}: recorded run {run_id!r} matches no case id; not scored"
                 for run_id, run in by_id.items())
    return pairs, notes


def _load_cases(cases: Any) -> tuple[str | None, list[EvalCase] | None]:
    """(name, cases) of an EvalSet, case file or list of cases; (None, None) for none."""
    if cases is None:
        return None, None
    from referee.run.agent import load_cases

    return load_cases(cases)


async def score_traces_async(traces: str | Path | Iterable[RecordedRun], *, cases: Any = None,
                             logs: str | Path | None = None,
                             criteria: Sequence[Any] | None = None, config: Any = None,
                             name: str | None = None, verbose: bool = True, save: bool = True,
                             runs_dir: str | Path | None = None, concurrency: int | None = None,
                             formats: Sequence[str] | None = None, resume: str | Path | None = None,
                             fail_threshold: float | None = None,
                             max_error_rate: float | None = None,
                             on_note: Callable[[list[str]], None] | None = None,
                             options: Any = None) -> Any:
    """Score recorded runs with any criteria; nothing is re-run (the report's model: recorded).

    ``traces``: a trace file or RecordedRuns; ``logs``: the OTLP logs export that holds their
    message content, for GenAI instrumentations that write it there. ``cases``: an EvalSet,
    case file or list of cases to pair by id (default: each record is its own case). ``criteria``: criterion or
    evaluator instances; ``config``: an EvalConfig whose criteria are added (the default
    config when neither is given). ``on_note`` receives, before scoring, what the traces left
    unsaid or unpaired (each note is also kept in the report). ``options`` (a
    ``RunOptions``) replaces the run settings (``verbose`` ... ``max_error_rate``).
    """
    from referee.config import EvalConfig
    from referee.criteria.registry import build_criteria
    from referee.run.engine import ModelCaller
    from referee.run.evaluation import RunRequest, run_evaluation
    from referee.run.options import RunOptions

    if options is None:
        options = RunOptions(concurrency=concurrency, verbose=verbose, save=save,
                             runs_dir=runs_dir, resume=resume, formats=formats,
                             fail_threshold=fail_threshold, max_error_rate=max_error_rate)
    source = str(traces) if isinstance(traces, (str, Path)) else "the recorded runs"
    runs = read_traces(traces, logs) if isinstance(traces, (str, Path)) else list(traces)
    set_name, case_list = _load_cases(cases)
    pairs, notes = pair_runs(runs, case_list, source=source)
    if on_note is not None:
        run_notes = [note for run in runs for note in run.notes]
        errors = [f"{run.where}: {run.execution.error}" if not run.execution.error.startswith(
            run.where) else run.execution.error for run in runs if run.execution.error]
        if errors or run_notes or notes:
            on_note(errors + run_notes + notes)
    chosen = list(criteria or [])
    if config is not None or not chosen:
        chosen = build_criteria(config if config is not None else EvalConfig.default()) + chosen
    recorded = {id(case): execution for case, execution in pairs}

    async def execute(case: EvalCase, caller: ModelCaller) -> ExecutionResult:
        return recorded[id(case)]

    config_used = config.model_dump(mode="json") if hasattr(config, "model_dump") else None
    return await run_evaluation(RunRequest(
        name=name or set_name or Path(source).stem, model_id=RECORDED_MODEL_ID,
        cases=[case for case, _ in pairs], criteria=chosen, execute=execute,
        config_used=config_used,
        metadata={"traces": source, "trace_notes": notes} if notes else {"traces": source}),
        options)


def score_traces(traces: str | Path | Iterable[RecordedRun], **kwargs: Any) -> Any:
    """``score_traces_async`` for synchronous code (also inside a running event loop)."""
    from referee.run.sync import run_sync

    return run_sync(score_traces_async(traces, **kwargs))
