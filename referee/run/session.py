"""One stored run from start to finish: shared by every front door.

``run_stored`` opens the run (a new run directory, or the stored one a ``ResumePlan`` reopens),
drives the engine over the cases, re-asks a sample of them when the judge config has
``reliability_check`` (run/reliability.py), and finishes: report.json and the requested formats are
written and the summary printed. The options arrive checked (``RunOptions``) and the criteria
and judges are described once (``describe_run``). Gates are applied by the caller afterwards,
so a rejected run is still fully stored and reported.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from referee.case import EvalCase
from referee.content._vision import refuse_blind_judges
from referee.criteria.base import Criterion, criterion_label
from referee.judge.batch import batch_journal, batch_progress
from referee.judge.providers import rules_for
from referee.judge.served import ServedLog, collect_served
from referee.record import CaseResult, EvalReport, RunTally
from referee.redact import redact
from referee.report.console import render_console
from referee.report.writers import write_reports
from referee.result import unique_labels
from referee.run.backends import CaseExecutor, resolve_backend
from referee.run.describe import (  # noqa: F401  # importable here, their earlier home
    NO_PROVIDER,
    announce_judges,
    asks_by_batch_api,
    criteria_difference,
    describe_criteria,
    describe_judges,
    describe_run,
    judges_by_criterion,
)
from referee.run.engine import Engine, Execute, case_keys, check_judge_environment
from referee.run.judge_calibration import calibration_records
from referee.run.options import RunOptions
from referee.run.progress import make_progress
from referee.run.reliability import check_judge_reliability
from referee.run.resume import ResumePlan
from referee.run.sequential import SEQUENTIAL_KEY, corrected_criteria, sequential_gate
from referee.store import RUNS_DIR_ENV as RUNS_DIR_ENV
from referee.store import VERSION_KEY, RunStore, StoredCases, runs_dir_or_default
from referee.store import describe as describe_versions
from referee.terminal import terminal_safe


def default_runs_dir() -> Path:
    """Where run directories go when no runs_dir is given (store.runs_dir_or_default)."""
    return runs_dir_or_default()


@dataclass(frozen=True)
class _OpenRun:
    """A run whose directory is open (when it is stored) and whose engine writes to it."""

    report: EvalReport
    engine: Engine
    executor: CaseExecutor
    store: RunStore | None
    resume: ResumePlan | None
    keys: list[str]
    run_meta: dict[str, Any]  # meta.json's run fields (criteria, runs, scoring number)
    judges: dict[str, dict[str, Any]]  # each judged criterion's judge, resolved once
    reliability_samples: dict[str, int]  # the criteria the reliability check re-asks


async def run_stored(*, name: str, model_id: str, cases: Sequence[EvalCase],
                     criteria: Sequence[Criterion], execute: Execute, options: RunOptions,
                     config_used: dict[str, Any] | None = None,
                     metadata: dict[str, Any] | None = None,
                     default_model_id: str = "") -> EvalReport:
    """Run and store. ``metadata`` is what the front door adds to the options' own.

    ``model_id`` is the label the user gave, ``default_model_id`` the one the front door
    would name the run after otherwise (the model function's name): a resume without a label
    keeps the stored run's own.

    Raises ``RunStoreWriteError`` when the run directory cannot be written (the finished cases
    are kept, and resuming completes the run)."""
    run = _open(name=name, model_id=model_id or default_model_id, cases=cases,
                criteria=criteria, options=options, config_used=config_used,
                metadata={**options.metadata, **(metadata or {})},
                label_given=bool(model_id))
    try:
        # Batch seam: judge batches are journalled in the run directory, so a resume follows
        # the batches already submitted instead of sending their requests again.
        with batch_journal(run.store.run_dir if run.store is not None else None), \
                batch_progress(options.verbose):
            await _drive(run, cases, execute, options)
            await check_judge_reliability(run.report, run.engine, run.reliability_samples)
        _finish(run, options)
    finally:
        if run.store is not None:
            run.store.release()  # an interrupted run keeps every case it finished, synced
    if options.prints_summary:
        print_summary(run.report)
    return run.report


def _open(*, name: str, model_id: str, cases: Sequence[EvalCase], criteria: Sequence[Any],
          options: RunOptions, config_used: dict[str, Any] | None,
          metadata: dict[str, Any], label_given: bool = True) -> _OpenRun:
    """Describe the run, open (or reopen) its directory, and build the engine that writes to it.

    Everything that can refuse the run is checked before the run directory is touched: a bad
    setting must neither leave a half-made run behind nor unfinish a stored one.
    """
    keys = case_keys(cases)
    description = describe_run(criteria)
    # A text-only judge and a case that holds images, or a criterion that grades images
    # whatever the case holds: refused before anything runs.
    labels = unique_labels([criterion_label(c) for c in criteria])
    refuse_blind_judges(description.judges, cases, lambda p: rules_for(p).content_rules,
                        {label for label, c in zip(labels, criteria)
                         if getattr(c, "grades_media", False)})
    named = {"run_id": options.run_id} if options.run_id is not None else {}
    report = EvalReport(name=name, eval_set_id=name, model_id=model_id,
                        judge=description.judge, judged_criteria=description.judged_criteria,
                        config_used=config_used or {}, metadata=metadata, runs=options.runs,
                        **named)
    run_meta: dict[str, Any] = {"criteria": description.criteria}
    if options.runs > 1:
        run_meta["runs"] = options.runs
    if options.command is not None:
        run_meta["command"] = options.command
    check_judge_environment()
    executor = resolve_backend(options.backend)
    plan: ResumePlan | None = None
    store: RunStore | None = None
    if options.resume is not None:
        plan, store = ResumePlan.open(options, cases, keys, description)
        run_meta[VERSION_KEY] = plan.version
        report.run_id = str(plan.meta.get("run_id") or plan.run_dir.name)
        if not label_given and plan.meta.get("model_id"):
            # The stored outputs are that model's: a resume names them after it, not after
            # whatever function this resume happens to call.
            report.model_id = str(plan.meta["model_id"])
        report.started_at = float(plan.meta.get("started_at") or report.started_at)
        if plan.meta.get("command"):  # how the run began, not how it was resumed
            run_meta["command"] = plan.meta["command"]
        report.metadata["resumed"] = True
        report.metadata.update(describe_versions(plan.run_dir, plan.version))
        if plan.rescore:
            report.metadata["rescored"] = True
    elif options.save:
        store = RunStore.create(options.runs_dir, report, case_ids=keys,
                                extra_meta=run_meta)
    try:
        engine = Engine(criteria, concurrency=_case_concurrency(options, criteria),
                        timeout=options.timeout,
                        progress=make_progress(options.verbose, name), store=store,
                        case_retry=options.judge_retry, runs=options.runs,
                        criterion_concurrency=options.criterion_concurrency,
                        early_stop=options.early_stop,
                        stored_outputs=plan.outputs if plan is not None else None,
                        settings_checked=True)
    except BaseException:
        if store is not None:
            store.release()
        raise
    if store is not None:
        report.run_dir = store.run_dir
        report.metadata["run_dir"] = str(store.run_dir)  # the text, for report.json's readers
    if options.verbose:
        description.announce()
    return _OpenRun(report=report, engine=engine, executor=executor, store=store, resume=plan,
                    keys=keys, run_meta=run_meta, judges=description.judges,
                    reliability_samples=description.reliability_samples)


async def _drive(run: _OpenRun, cases: Sequence[EvalCase], execute: Execute,
                 options: RunOptions) -> None:
    """Run every case the resume plan does not keep, through the backend, into the store."""
    # A stored run keeps its cases in cases.jsonl and only their counts here; an unsaved run
    # has nowhere else to keep them.
    tally = RunTally()
    in_memory: list[CaseResult] = []
    keep = tally.add if run.store is not None else in_memory.append
    served = ServedLog()  # the model versions the judges' replies named, over the run

    def record(result: CaseResult) -> None:
        collect_served(_scored_results(result), served)
        keep(result)

    plan = run.resume
    skip = plan.finished if plan is not None else frozenset()
    # Interrupted (Ctrl-C, cancellation), the run keeps what it finished; the caller knows the
    # directory from its options (RunOptions.run_id, run_dir) or from report.run_dir.
    if options.sequential:  # seam: run/sequential.py decides the order and when to stop
        await run.engine.prepare()
        gate = sequential_gate(options, run.store, skip, corrected=corrected_criteria(
            options, run.engine.criteria, run.judges))
        await run.engine.stream(cases, execute, keys=run.keys, skip=skip,
                                on_result=gate.observing(record), order=gate.order(run.keys))
        run.report.metadata[SEQUENTIAL_KEY] = gate.to_metadata(len(run.keys))
    else:
        await run.executor.stream(run.engine, cases, execute, keys=run.keys, skip=skip,
                                  on_result=record)
    report = run.report
    report.finished_at = time.time()
    report.preparation_token_usage = dict(run.engine.preparation_usage)
    report.judge_calibration = calibration_records(run.engine.criteria, served=served,
                                                   judges=run.judges)
    if run.store is None:
        report.cases = sorted(in_memory, key=lambda c: c.index)
    else:
        if plan is not None:
            run.store.compact_cases()  # a case run again leaves one line, not two
        run.store.close()  # synced before it is read back
        # After a resume, cases.jsonl also holds the earlier cases: count from the file then.
        report.cases = StoredCases(  # type: ignore[assignment]  # any sequence at run time
            run.store.cases_path, tally=None if plan is not None else tally)


def _finish(run: _OpenRun, options: RunOptions) -> None:
    """Warn of judge drift, and write meta.json (a re-score), report.json and the formats."""
    if options.verbose:
        warn_judge_drift(run.report)
    store = run.store
    if store is None:
        return
    if run.resume is not None and run.resume.rescore:
        # Only now: an interrupted re-score must not pass for a run of the new criteria.
        store.write_meta(run.report, case_ids=run.keys, extra=run.run_meta)
    store.write_report(run.report)
    if options.file_formats:
        with store.writing():
            write_reports(run.report, store.run_dir, list(options.file_formats))


def _scored_results(case: CaseResult) -> list[Any]:
    """The criterion results a case's judges answered: each run's, for a case run N times."""
    if case.run_results:
        return [r for run in case.run_results for r in run.criterion_results]
    return list(case.criterion_results)


def warn_judge_drift(report: EvalReport, stream: IO[str] | None = None) -> None:
    """One line per judged criterion whose provider served another model version than the
    one its calibration entry was measured with."""
    for label, record in report.judge_calibration.items():
        if record.drift:
            line = f"referee: judge drift: {label} ({record.judge}): {record.drift}"
            print(terminal_safe(redact(line)), file=stream or sys.stderr, flush=True)


def print_summary(report: EvalReport) -> None:
    render_console(report)


def summary_line(report: EvalReport) -> str:
    kinds = ", ".join(f"{k}={n}" for k, n in report.errors_by_kind.items())
    errors = f" ({kinds})" if kinds else ""
    return (f"{report.name or 'run'}: {report.passed} passed, {report.failed} failed, "
            f"{report.errors} errors{errors}, {report.skipped} skipped of {report.total}; "
            f"pass_rate {report.pass_rate:.1%}, error_rate {report.error_rate:.1%}")


# A case waiting on a provider batch holds its slot for minutes or hours, so a batch is only as
# large as the cases in flight: at the default of 8, a run went out in waves of 8 cases, one
# batch after another. Unless the caller chose a concurrency, a run whose judge asks by batch
# API keeps this many cases in flight (each a few KB while it waits).
BATCH_API_CASE_CONCURRENCY = 1000


def _case_concurrency(options: RunOptions, criteria: Sequence[Criterion]) -> int:
    if not options.concurrency_chosen and asks_by_batch_api(criteria):
        return max(options.concurrency, BATCH_API_CASE_CONCURRENCY)
    return options.concurrency
