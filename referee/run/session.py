"""One stored run from start to finish: shared by every front door.

Opens (or reopens, for ``resume``) the run directory, drives the engine, writes report.json and
any requested formats, and prints the summary. Gates are applied by the caller afterwards, so a
rejected run is still fully stored and reported.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import IO, Any

from referee.case import EvalCase, canonical_json
from referee.criteria.base import Criterion, JudgedCriterion, criterion_label, judge_surface
from referee.errors import InputError
from referee.judge.served import ServedLog, collect_served
from referee.record import CaseResult, CaseStatus, EvalReport, RunTally
from referee.redact import mask_url, mask_url_passwords, redact, redact_secrets
from referee.report.console import render_console
from referee.report.writers import parse_formats, write_reports
from referee.result import unique_labels
from referee.run.backends import resolve_backend
from referee.run.engine import DEFAULT_CONCURRENCY, Engine, Execute, StoredOutput, case_keys
from referee.run.judge_calibration import calibration_records
from referee.run.progress import make_progress
from referee.store import (
    DEFAULT_RUNS_DIR,
    VERSION_KEY,
    RunStore,
    StoredCases,
    case_fingerprint,
    version_number,
)
from referee.store import describe as describe_versions
from referee.terminal import terminal_safe

RUNS_DIR_ENV = "REFEREE_RUNS_DIR"
# meta.json's mark of a re-score under way; the finished re-score's meta.json has none.
RESCORING = "rescoring"

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
    # With resume: score the stored outputs with the criteria given now (which may differ from
    # the stored run's) instead of refusing; the model is called only for cases without one.
    rescore: bool = False
    formats: Sequence[str] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    # Where the cases execute: None/"local" (this process), "ray", or an executor object.
    backend: Any = None
    # multivon's JudgeRetry: run a case again when it ends in a transient status.
    judge_retry: Any = None
    # multivon's runs=N: each case runs N times, and the report measures how stable it is.
    runs: int = 1
    # multivon's evaluator_concurrency: at most this many criteria score at once in the run.
    criterion_concurrency: int | None = None
    # With runs > 1: stop running a case once its runs settle it (a sequential test).
    early_stop: bool = False


NO_PROVIDER = "no provider available"


def judges_by_criterion(criteria: Sequence[Criterion]) -> dict[str, dict[str, Any]]:
    """The judge each judged criterion will call (provider, model, endpoint; no secrets).

    An AgentEvaluator-style criterion whose ``judge_model`` no provider can serve is listed with
    ``"judge": "no provider available"``: it will score the 10xgraph-style API's 0.5 placeholder.
    """
    per: dict[str, dict[str, Any]] = {}
    labels = unique_labels([criterion_label(c) for c in criteria])
    for name, criterion in zip(labels, criteria):
        judge = _resolved_judge(criterion)
        if judge is not None:
            per[name] = judge
            continue
        model = getattr(getattr(criterion, "config", None), "judge_model", None)
        if model and judge_surface(criterion) == "AgentEvaluator":
            per[name] = {"model": model, "judge": NO_PROVIDER}
    return per


def describe_judges(criteria: Sequence[Criterion]) -> dict[str, Any]:
    """The judge of the run for meta.json and the report (secrets are removed by the store).

    One judge shared by every judged criterion is reported as that config; several are
    reported per criterion under ``per_criterion``.
    """
    per = judges_by_criterion(criteria)
    distinct = {canonical_json(v) for v in per.values()}
    if len(distinct) == 1:
        return dict(next(iter(per.values())))
    return {"per_criterion": per} if per else {}


_JUDGE_FIELDS = ("provider", "model", "base_url", "api_style", "temperature", "max_tokens")


def _resolved_judge(criterion: Criterion) -> dict[str, Any] | None:
    """An EvalSuite-style evaluator's effective judge (per-evaluator > configure() > env >
    default)."""
    panel = getattr(criterion, "judge_panel", None)
    panel = panel() if callable(panel) else None
    if panel is not None:  # every member, resolved, and how their answers combine
        try:
            # An AgentEvaluator-style criterion calls its members as given (no resolution).
            members = [_judge_fields(m) for m in (
                panel.members if judge_surface(criterion) == "AgentEvaluator"
                else panel.resolved_members())]
        except ValueError:  # as below: an unresolvable judge shows up as the case errors
            return None
        return {"members": members, "aggregate": panel.aggregate,
                "quorum": panel.effective_quorum,
                **({"weights": panel.weights} if panel.aggregate == "weighted" else {})}
    config = None
    if isinstance(criterion, JudgedCriterion):
        try:
            config = criterion.judge_config()
        except Exception:  # an unresolvable judge shows up as the case errors, not here
            config = None
    if config is None:
        config = getattr(criterion, "judge", None)
    if config is None or not hasattr(config, "model_dump"):
        return None
    return _judge_fields(config)


def _judge_fields(config: Any) -> dict[str, Any]:
    data = config.model_dump(mode="json")
    if data.get("base_url"):
        data["base_url"] = mask_url(data["base_url"])
    return {k: data[k] for k in _JUDGE_FIELDS if data.get(k) not in (None, "")}


# How the judge line names the OpenAI API a judge is called through (a local server may serve
# only one of them, or serve JSON mode on only one).
_API_NAMES = {"chat": "Chat Completions (/chat/completions)",
              "responses": "the Responses API (/responses)"}


def announce_judges(criteria: Sequence[Criterion], stream: IO[str] | None = None) -> None:
    """Say, before the first case, which judge each judged criterion will use: a judge that
    is not the one the user meant (or none at all) should not take a whole run to notice."""
    per = judges_by_criterion(criteria)
    for name, judge in per.items():
        if judge.get("judge") == NO_PROVIDER:
            what = f"{judge['model']}: {NO_PROVIDER} (see below)"
        else:
            what = f"{judge.get('provider', '?')}/{judge.get('model', '?')}"
            if judge.get("base_url"):
                what += f" at {judge['base_url']}"
            if judge.get("provider") == "openai" and judge.get("api_style") in _API_NAMES:
                what += f" via {_API_NAMES[judge['api_style']]}"
        line = f"referee: judge for {name}: {what}"
        print(terminal_safe(redact(line)), file=stream or sys.stderr, flush=True)
    unreachable = dict.fromkeys(judge["model"] for judge in per.values()
                                if judge.get("judge") == NO_PROVIDER)
    for line in _no_judge_reachable(list(unreachable)):
        print(terminal_safe(redact(line)), file=stream or sys.stderr, flush=True)


# Each provider's name and where its credentials come from, for the "no judge is reachable"
# advice.
_CREDENTIALS = {"google": ("Google", "GOOGLE_API_KEY (or GEMINI_API_KEY)"),
                "openai": ("OpenAI", "OPENAI_API_KEY (or OPENAI_BASE_URL)"),
                "anthropic": ("Anthropic", "ANTHROPIC_API_KEY")}


def _no_judge_reachable(models: list[str]) -> list[str]:
    """Before the first case: why no judge can be reached, and how to pick one, or to go
    without. Nothing changes in the run itself (its judged scores stay the documented 0.5
    placeholder, counted as JUDGE_ERROR)."""
    if not models:
        return []
    from referee.judge.config import split_judge_model

    reasons = []
    for model in models:
        provider, _ = split_judge_model(model)
        if provider is None:
            reasons.append(f"{model}: no provider follows from the name (write it as "
                           f"openai/{model} for an OpenAI-compatible server)")
        else:
            name, credentials = _CREDENTIALS.get(provider, (provider, "its key"))
            reasons.append(f"{model}: a {name} model, and {credentials} is not set")
    return [
        f"referee: no judge is reachable ({'; '.join(reasons)}): each score of those criteria "
        "will be the 0.5 placeholder \"No LLM provider available\", counted as JUDGE_ERROR, "
        "not a verdict",
        "referee: to pick a judge, set that variable, or name one you can reach as judge_model "
        "in an EvalConfig (referee run --config EVAL_CONFIG.json), e.g. openai/gpt-4o-mini with "
        "OPENAI_API_KEY, or openai/MODEL with OPENAI_BASE_URL=http://localhost:11434/v1 for a "
        "local server (Ollama, vLLM); or run deterministic criteria only (trajectory, "
        "node_order, rouge_match, contains_keywords: see examples/quickstart/eval_config.json)",
    ]


def describe_criteria(criteria: Sequence[Criterion]) -> list[dict[str, Any]]:
    """What each criterion is and how it is set up, for meta.json: resume compares it.

    A criterion's public attributes (its config, substrings, rubric questions, judge...) are
    its settings; private ones are state it builds (generated questions, locks).
    """
    return [{"name": criterion_label(c),
             "class": f"{type(c).__module__}.{type(c).__qualname__}",
             "settings": _settings(c)} for c in criteria]


def _settings(criterion: Any, depth: int = 0) -> dict[str, Any]:
    try:
        attrs = vars(criterion)
    except TypeError:  # __slots__ or a C type: nothing to compare but the class
        attrs = {}
    settings = {k: _plain(v, depth) for k, v in sorted(attrs.items()) if not k.startswith("_")}
    threshold = getattr(criterion, "threshold", None)
    if isinstance(threshold, (int, float)):
        settings["threshold"] = threshold
    if judge_surface(criterion) == "EvalSuite":
        _record_resolved_judge(criterion, settings)
    return redact_secrets(settings)


def _record_resolved_judge(criterion: Criterion, settings: dict[str, Any]) -> None:
    """An EvalSuite-style evaluator is judged by its resolved judge (judge= > configure() >
    environment > default), never by its config's judge_model: record that judge as
    ``resolved_judge``, and of its config only what was set (the threshold), so meta.json
    names no judge that does not judge."""
    config = getattr(criterion, "config", None)
    if isinstance(settings.get("config"), dict) and config is not None \
            and hasattr(config, "model_fields_set"):
        settings["config"] = {k: v for k, v in settings["config"].items()
                              if k in config.model_fields_set}
    resolved = _resolved_judge(criterion)
    if resolved is not None:
        settings["resolved_judge"] = {k: v for k, v in resolved.items() if k not in _OPERATIONAL}


# How a judge is reached and paced, not what it judges: a resume may change these freely
# (a restarted local server, more retries after an outage).
_OPERATIONAL = frozenset({"base_url", "timeout", "max_concurrency", "max_retries",
                          "retry_max_total_s", "cache", "cache_path", "rpm", "tpm"})

def _plain(value: Any, depth: int = 0) -> Any:
    """A JSON value that names ``value`` the same way in every process."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return mask_url_passwords(value)  # a judge's base_url password never reaches meta.json
    if hasattr(value, "model_dump"):
        try:
            data = value.model_dump(mode="json")
        except Exception:
            return type(value).__qualname__
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if k not in _OPERATIONAL}
        return _plain(data, depth)
    if isinstance(value, dict):
        return {str(k): _plain(v, depth) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_plain(v, depth) for v in value]
        return sorted(items, key=canonical_json) if isinstance(value, (set, frozenset)) else items
    if isinstance(value, Enum):
        return _plain(value.value, depth)
    if callable(getattr(value, "evaluate", None)) and depth < 4:
        # A criterion inside a criterion (composite, weighted): its own settings count too.
        return {"class": type(value).__qualname__, "settings": _settings(value, depth + 1)}
    # Callables and other objects: by name, never by repr (it holds a memory address).
    return getattr(value, "__qualname__", None) or type(value).__qualname__


def criteria_difference(stored: list[dict[str, Any]], current: list[dict[str, Any]]) -> str | None:
    """The first difference between two ``describe_criteria`` lists, in words; None if equal."""
    if [c.get("name") for c in stored] != [c.get("name") for c in current]:
        return (f"the stored run has {len(stored)} criteria "
                f"({', '.join(str(c.get('name')) for c in stored) or 'none'}), this one has "
                f"{len(current)} ({', '.join(str(c.get('name')) for c in current) or 'none'})")
    for before, now in zip(stored, current):
        name = before.get("name")
        if before.get("class") != now.get("class"):
            return f"criterion {name!r} is now a {now.get('class')} (was {before.get('class')})"
        found = _first_difference(*_comparable(before.get("settings") or {},
                                                now.get("settings") or {}), "")
        if found is not None:
            where, old, new = found
            return f"criterion {name!r} {where}: {_short(old)} -> {_short(new)}"
    return None


def _comparable(old: dict[str, Any], new: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two criteria settings as both record them: a run stored before an EvalSuite-style
    evaluator's resolved judge was recorded (it has no ``resolved_judge`` and its whole
    config) resumes as before. The resolved judge is left to the run's judge check, which
    names a changed judge in its own words."""
    old, new = dict(old), dict(new)
    old.pop("resolved_judge", None)
    new.pop("resolved_judge", None)
    if isinstance(old.get("config"), dict) and isinstance(new.get("config"), dict):
        shared = old["config"].keys() & new["config"].keys()
        old["config"] = {k: v for k, v in old["config"].items() if k in shared}
        new["config"] = {k: v for k, v in new["config"].items() if k in shared}
    return old, new


def _first_difference(old: Any, new: Any, where: str) -> tuple[str, Any, Any] | None:
    """(dotted path, old, new) of the first setting that differs, going into nested settings."""
    if canonical_json(old) == canonical_json(new):
        return None
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            found = _first_difference(old.get(key), new.get(key), f"{where}.{key}" if where else key)
            if found is not None:
                return found
    return where, old, new


def _short(value: Any, limit: int = 80) -> str:
    text = canonical_json(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def run_stored(*, name: str, model_id: str, cases: Sequence[EvalCase],
                     criteria: Sequence[Criterion], execute: Execute, options: RunOptions,
                     config_used: dict[str, Any] | None = None) -> EvalReport:
    """Run and store. Raises ``RunStoreWriteError`` when the run directory cannot be written
    (the finished cases are kept, and resuming completes the run)."""
    global last_interrupted_run_dir
    formats = parse_formats(options.formats)
    file_formats = [f for f in formats if f != "console"]
    if options.retry_errors and options.resume is None:
        raise ValueError("retry_errors=True goes with resume=RUN_DIR (the run whose errors to retry)")
    if options.rescore and options.resume is None:
        raise ValueError("rescore=True goes with resume=RUN_DIR (the run whose outputs to re-score)")
    if file_formats and not options.save and options.resume is None:
        raise ValueError(f"report formats {', '.join(file_formats)} need a stored run (save=True)")
    keys = case_keys(cases)
    finished: set[str] = set()
    outputs: dict[str, StoredOutput] = {}
    store: RunStore | None = None
    criteria_spec = describe_criteria(criteria)
    report = EvalReport(name=name, eval_set_id=name, model_id=model_id,
                        judge=describe_judges(criteria), config_used=config_used or {},
                        metadata=dict(options.metadata), runs=options.runs)
    # Built before the run directory is touched: a bad setting (REFEREE_CACHE, concurrency)
    # must neither leave a half-made run behind nor unfinish a stored one.
    engine = Engine(criteria, concurrency=options.concurrency, timeout=options.timeout,
                    progress=make_progress(options.verbose, name), case_retry=options.judge_retry,
                    runs=options.runs, criterion_concurrency=options.criterion_concurrency,
                    early_stop=options.early_stop)
    run_meta: dict[str, Any] = {"criteria": criteria_spec}
    if options.runs > 1:
        run_meta["runs"] = options.runs
    executor = resolve_backend(options.backend)
    if options.resume is not None:
        # Checked before reopen(), which drops a finished run's report.json: a refused
        # resume must leave the run as it was.
        meta = RunStore(options.resume).read_meta()
        _check_resumable(meta, keys, criteria_spec, report.judge, options)
        retried = False
        if not options.rescore:
            finished, retried = _cases_to_keep(RunStore(options.resume), cases, keys, options)
        # Scores that a re-score or a retry replaces stay readable as an earlier scoring.
        store = RunStore.reopen(options.resume, new_version=options.rescore or retried)
        try:
            run_meta[VERSION_KEY] = version_number(store.read_meta())
            if options.rescore:
                # Until the end rewrites meta.json, cases.jsonl mixes scores of the stored
                # criteria and of these: only finishing the re-score may make it one run.
                store.update_meta(**{RESCORING: True})
                for stored in StoredCases(store.cases_path):
                    if stored.run_results and any(map(_has_output, stored.run_results)):
                        # Each run's own output, scored again; a run without one runs again.
                        outputs[stored.eval_id] = [r.execution if _has_output(r) else None
                                                   for r in stored.run_results]
                    elif (_has_output(stored) and not stored.run_results
                          and stored.execution is not None):
                        outputs[stored.eval_id] = stored.execution
                    elif not (options.retry_errors and stored.status.is_error):
                        finished.add(stored.eval_id)
        except BaseException:
            store.release()
            raise
        report.run_id = str(meta.get("run_id") or store.run_dir.name)
        report.started_at = float(meta.get("started_at") or report.started_at)
        report.metadata["resumed"] = True
        report.metadata.update(describe_versions(store.run_dir, run_meta[VERSION_KEY]))
        if options.rescore:
            report.metadata["rescored"] = True
    elif options.save:
        store = RunStore.create(options.runs_dir or default_runs_dir(), report, case_ids=keys,
                                extra_meta=run_meta)
    if store is not None:
        report.metadata["run_dir"] = str(store.run_dir)
    if options.verbose:
        announce_judges(criteria)

    engine.store = store
    last_interrupted_run_dir = None
    # A stored run keeps its cases in cases.jsonl and only their counts here; an unsaved run
    # has nowhere else to keep them.
    tally = RunTally()
    in_memory: list[CaseResult] = []
    keep = tally.add if store is not None else in_memory.append
    served = ServedLog()  # the model versions the judges' replies named, over the run

    def record(result: CaseResult) -> None:
        collect_served(_scored_results(result), served)
        keep(result)

    try:
        try:
            await executor.stream(engine, cases, execute, keys=keys, skip=finished,
                                  on_result=record, outputs=outputs)
        except (asyncio.CancelledError, KeyboardInterrupt):
            if store is not None:
                last_interrupted_run_dir = store.run_dir
            raise
        report.finished_at = time.time()
        report.preparation_token_usage = dict(engine.preparation_usage)
        report.judge_calibration = calibration_records(criteria, served=served)
        if options.verbose:
            warn_judge_drift(report)
        if store is not None:
            if options.resume is not None:
                store.compact_cases()  # a case run again leaves one line, not two
            store.close()  # synced before it is read back
            # After a resume, cases.jsonl also holds the earlier cases: count from the file then.
            report.cases = StoredCases(  # type: ignore[assignment]  # any sequence at run time
                store.cases_path, tally=None if options.resume is not None else tally)
        else:
            report.cases = sorted(in_memory, key=lambda c: c.index)
        if store is not None:
            if options.rescore:
                # Only now: an interrupted re-score must not pass for a run of the new criteria.
                store.write_meta(report, case_ids=keys, extra=run_meta)
            store.write_report(report)
            if file_formats:
                with store.writing():
                    write_reports(report, store.run_dir, file_formats)
    finally:
        if store is not None:
            store.release()  # an interrupted run keeps every case it finished, synced
    # Formats, when given, decide what is printed; without them ``verbose`` does (Python API).
    if "console" in formats or (options.verbose and not formats):
        print_summary(report)
    return report


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


def _has_output(stored: CaseResult) -> bool:
    """Whether a stored case holds what the model produced (re-scoring needs nothing more)."""
    return stored.execution is not None and not stored.execution.error and \
        stored.status is not CaseStatus.MODEL_ERROR


def _cases_to_keep(store: RunStore, cases: Sequence[EvalCase], keys: list[str],
                   options: RunOptions) -> tuple[set[str], bool]:
    """The ids of the stored cases a resume keeps (all, or all but those whose last record
    ended in an error), and whether any stored case runs again.

    The case fingerprint covers ids only, and a case given its own id keeps it when edited: a
    kept result recorded for other content would be reported as this case's, so it is refused.
    """
    position = {key: i for i, key in enumerate(keys)}
    errored: dict[str, bool] = {}  # by id, as its last record says (later records win)
    changed: dict[str, tuple[str, Any, Any]] = {}
    for stored in store.stream_cases():
        key = stored.eval_id
        errored[key] = stored.status.is_error
        found = None if key not in position else _changed_field(stored, cases[position[key]])
        if found is None:
            changed.pop(key, None)
        else:
            changed[key] = found
    kept = {key for key, error in errored.items() if not (options.retry_errors and error)}
    for key, (name, old, new) in changed.items():
        if key in kept:
            raise InputError(
                f"case {key!r} is not the one the stored run recorded: its {name} changed "
                f"({_short(old)} -> {_short(new)}); resume with the cases the run was started "
                f"with, or add --rescore (rescore=True) to score the stored outputs against "
                f"these", source=str(options.resume))
    return kept, len(kept) < len(errored)


def _changed_field(stored: CaseResult, case: EvalCase) -> tuple[str, Any, Any] | None:
    """(field, stored value, current value) where the stored case differs from ``case``."""
    if stored.case is None or stored.case == case or any(
            c.path.startswith("case") for c in stored.converted):
        return None  # an old record without its case, or stand-ins for unstorable values
    try:  # read back as the stored one was: reading fills in views (ADK metadata, turns)
        now = EvalCase.model_validate_json(case.model_dump_json()).model_dump(mode="json")
    except ValueError:
        return None
    before = stored.case.model_dump(mode="json")
    return next(((name, before.get(name), now.get(name)) for name in type(case).model_fields
                 if canonical_json(before.get(name)) != canonical_json(now.get(name))), None)


def _check_resumable(meta: dict[str, Any], keys: list[str], criteria_spec: list[dict[str, Any]],
                     judge: dict[str, Any], options: RunOptions) -> None:
    if meta.get("case_fingerprint") != case_fingerprint(keys):
        state = ("finished" if options.resume is not None and RunStore(options.resume).is_finished
                 else "interrupted")
        raise InputError(
            f"these {len(keys)} case(s) are not the ones the {state} run was started with "
            f"({len(meta.get('case_ids') or [])} case(s))", source=str(options.resume),
            expected="the same cases, in the same order")
    if meta.get(RESCORING) and not options.rescore:
        raise InputError(
            "a re-score of this run was interrupted, so its cases hold scores of two sets of "
            "criteria; finish it with --rescore (rescore=True)", source=str(options.resume))
    stored_runs = meta.get("runs") or 1
    if stored_runs != options.runs:
        raise InputError(
            f"the stored run ran each case {stored_runs} time(s), this one asks for "
            f"{options.runs}", source=str(options.resume), expected=f"runs={stored_runs}")
    stored = meta.get("criteria")
    if options.rescore or not isinstance(stored, list):  # runs stored before this check
        return
    difference = criteria_difference(stored, criteria_spec)
    if difference:
        raise InputError(
            f"the criteria differ from the stored run's: {difference}; resume with the same "
            f"criteria, or add --rescore (rescore=True) to score the stored outputs with these",
            source=str(options.resume))
    # A judge chosen outside the criteria (configure(), JUDGE_MODEL) is in none of their
    # settings: the run's resolved judge must match too, or the report would name one judge
    # for cases that another one scored. Where it is reached (base_url) may change.
    found = _first_difference(_without_base_url(redact_secrets(meta.get("judge") or {})),
                              _without_base_url(redact_secrets(judge)), "judge")
    if found is not None:
        where, old, new = found
        raise InputError(
            f"the judge differs from the stored run's: {where.replace('.', ' ')}: {_short(old)} "
            f"-> {_short(new)}; resume with the same judge, or add --rescore (rescore=True) to "
            f"score the stored outputs with this one", source=str(options.resume))


def _without_base_url(judge: Any) -> Any:
    if not isinstance(judge, dict):
        return judge
    return {k: _without_base_url(v) for k, v in judge.items() if k != "base_url"}


def print_summary(report: EvalReport) -> None:
    render_console(report)

