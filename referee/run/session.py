"""One stored run from start to finish: shared by every front door.

Opens (or reopens, for ``resume``) the run directory, drives the engine, writes report.json and
any requested formats, and prints the summary. Gates are applied by the caller afterwards, so a
rejected run is still fully stored and reported.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from referee.case import EvalCase, canonical_json
from referee.errors import InputError
from referee.report.console import render_console
from referee.report.model import CaseResult, EvalReport
from referee.report.store import DEFAULT_RUNS_DIR, RunStore, case_fingerprint
from referee.report.writers import parse_formats, write_reports
from referee.result import unique_labels
from referee.run.engine import DEFAULT_CONCURRENCY, Engine, Execute, case_keys
from referee.run.progress import make_progress

RUNS_DIR_ENV = "REFEREE_RUNS_DIR"

# The run directory of the last run that was interrupted (Ctrl-C, cancellation) in this
# process, so the CLI can say which directory to --resume; None once a run starts.
last_interrupted_run_dir: Path | None = None


def default_runs_dir() -> Path:
    return Path(os.environ.get(RUNS_DIR_ENV) or DEFAULT_RUNS_DIR)


@dataclass
class RunOptions:
    """How to run, shared by every front door's ``run``/``evaluate`` keyword arguments."""

    concurrency: int = DEFAULT_CONCURRENCY
    timeout: float | None = None
    verbose: bool = True
    save: bool = True
    runs_dir: str | Path | None = None
    resume: str | Path | None = None
    # With resume: run again the cases that ended in an error (an outage, a timeout), not only
    # the unfinished ones.
    retry_errors: bool = False
    formats: Sequence[str] = ()
    metadata: dict[str, Any] = field(default_factory=dict)


def describe_judges(criteria: Sequence[Any]) -> dict[str, Any]:
    """The judge of the run for meta.json and the report (secrets are removed by the store).

    One judge shared by every judged criterion is reported as that config; several are
    reported per criterion under ``per_criterion``.
    """
    per: dict[str, dict[str, Any]] = {}
    labels = unique_labels([str(getattr(c, "name", type(c).__name__)) for c in criteria])
    for name, criterion in zip(labels, criteria):
        judge = _resolved_judge(criterion)
        if judge is not None:
            per[name] = judge
            continue
        model = getattr(getattr(criterion, "config", None), "judge_model", None)
        if model and _is_llm_criterion(criterion):
            per[name] = {"model": model}
    distinct = {canonical_json(v) for v in per.values()}
    if len(distinct) == 1:
        return dict(next(iter(per.values())))
    return {"per_criterion": per} if per else {}


_JUDGE_FIELDS = ("provider", "model", "base_url", "api_style", "temperature", "max_tokens")


def _resolved_judge(criterion: Any) -> dict[str, Any] | None:
    """A document-001 evaluator's effective judge (per-evaluator > configure() > env > default)."""
    resolve = getattr(criterion, "judge_config", None)
    config = None
    if callable(resolve):
        try:
            config = resolve()
        except Exception:  # an unresolvable judge shows up as the case errors, not here
            config = None
    if config is None:
        config = getattr(criterion, "judge", None)
    if config is None or not hasattr(config, "model_dump"):
        return None
    data = config.model_dump(mode="json")
    return {k: data[k] for k in _JUDGE_FIELDS if data.get(k) not in (None, "")}


def _is_llm_criterion(criterion: Any) -> bool:
    return any(cls.__name__ in ("LLMCallerMixin", "TemplatedLLMCriterion")
               for cls in type(criterion).__mro__)


async def run_stored(*, name: str, model_id: str, cases: Sequence[EvalCase],
                     criteria: Sequence[Any], execute: Execute, options: RunOptions,
                     config_used: dict[str, Any] | None = None) -> EvalReport:
    global last_interrupted_run_dir
    formats = parse_formats(options.formats)
    file_formats = [f for f in formats if f != "console"]
    if options.retry_errors and options.resume is None:
        raise ValueError("retry_errors=True goes with resume=RUN_DIR (the run whose errors to retry)")
    if file_formats and not options.save and options.resume is None:
        raise ValueError(f"report formats {', '.join(file_formats)} need a stored run (save=True)")
    keys = case_keys(cases)
    finished: dict[str, CaseResult] = {}
    store: RunStore | None = None
    report = EvalReport(name=name, eval_set_id=name, model_id=model_id,
                        judge=describe_judges(criteria), config_used=config_used or {},
                        metadata=dict(options.metadata))
    # Built before the run directory is touched: a bad setting (REFEREE_CACHE, concurrency)
    # must neither leave a half-made run behind nor unfinish a stored one.
    engine = Engine(criteria, concurrency=options.concurrency, timeout=options.timeout,
                    progress=make_progress(options.verbose, name))
    if options.resume is not None:
        # Checked before reopen(), which drops a finished run's report.json: a refused
        # resume must leave the run as it was.
        meta = RunStore(options.resume).read_meta()
        if meta.get("case_fingerprint") != case_fingerprint(keys):
            raise InputError(
                f"these {len(keys)} case(s) are not the ones the interrupted run was started with "
                f"({len(meta.get('case_ids') or [])} case(s))", source=str(options.resume),
                expected="the same cases, in the same order")
        store = RunStore.reopen(options.resume)
        finished = {c.eval_id: c for c in store.read_cases()
                    if not (options.retry_errors and c.status.is_error)}
        report.run_id = str(meta.get("run_id") or store.run_dir.name)
        report.started_at = float(meta.get("started_at") or report.started_at)
        report.metadata["resumed"] = True
    elif options.save:
        store = RunStore.create(options.runs_dir or default_runs_dir(), report, case_ids=keys)
    if store is not None:
        report.metadata["run_dir"] = str(store.run_dir)

    engine.store = store
    last_interrupted_run_dir = None
    try:
        report.cases = await engine.run(cases, execute, finished=finished)
    except (asyncio.CancelledError, KeyboardInterrupt):
        if store is not None:
            last_interrupted_run_dir = store.run_dir
        raise
    finally:
        if store is not None:
            store.close()  # an interrupted run keeps every case it finished, synced
    report.finished_at = time.time()

    if store is not None:
        store.write_report(report)
        if file_formats:
            write_reports(report, store.run_dir, file_formats)
    # Formats, when given, decide what is printed; without them ``verbose`` does (Python API).
    if "console" in formats or (options.verbose and not formats):
        print_summary(report)
    return report


def print_summary(report: EvalReport) -> None:
    render_console(report)


def summary_line(report: EvalReport) -> str:
    kinds = ", ".join(f"{k}={n}" for k, n in report.errors_by_kind.items())
    errors = f" ({kinds})" if kinds else ""
    return (f"{report.name or 'run'}: {report.passed} passed, {report.failed} failed, "
            f"{report.errors} errors{errors}, {report.skipped} skipped of {report.total}; "
            f"pass_rate {report.pass_rate:.1%}, error_rate {report.error_rate:.1%}")
