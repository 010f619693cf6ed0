"""The ``referee`` command: run, view, compare and list stored runs; calibrate evaluators.

``referee run`` accepts either

* a Python file that defines ``suite`` (an EvalSuite) and ``model`` (the function under test),
  or ``evaluator`` (an AgentEvaluator) and ``eval_set`` (an EvalSet, a case file path or a list
  of cases); or
* a case file (.evalset.json, .json, .jsonl, .yaml, .csv) with ``--agent FILE.py:FUNCTION``
  and ``--config EVAL_CONFIG.json`` (the AgentEvaluator API's EvalConfig).

Exit codes (``referee run --help`` lists them for users): 0 success, 1 a gate rejected the run
or ``compare`` found regressions (or an unfinished candidate), 2 bad input, 3 nothing could be
evaluated, 130 interrupted (Ctrl-C, or the run store could not be written; ``--resume``
completes it). Errors are one line on stderr; set REFEREE_DEBUG=1 for a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import importlib.util
import logging
import math
import os
import signal
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from referee import __version__
from referee.errors import EvalGateFailure, InputError
from referee.pairwise._defaults import DEFAULT_PAIRWISE_CRITERION
from referee.redact import redact
from referee.report_formats import DEFAULT_FORMATS
from referee.terminal import terminal_safe

if TYPE_CHECKING:
    from referee.record import EvalReport
    from referee.run.evaluation import RunRequest
    from referee.run.options import RunOptions

EXIT_GATE = 1
EXIT_INPUT = 2
EXIT_NOTHING_EVALUATED = 3
EXIT_INTERRUPTED = 130
# The reader of stdout went away (`referee list | head -1`): what a process ended by SIGPIPE
# reports (128 + 13), as cat and git do, with nothing printed.
EXIT_OUTPUT_CLOSED = 141
CASE_FILE_SUFFIXES = (".json", ".jsonl", ".yaml", ".yml", ".csv")

RUN_DESCRIPTION = """\
Run a model or agent over its cases, score them, and store the run.

TARGET is either
  * a Python file defining `suite` (an EvalSuite) and `model` (the function under test),
    or `evaluator` (an AgentEvaluator) and `eval_set` (an EvalSet, a case file path or a
    list of cases); or
  * a case file (.evalset.json, .json, .jsonl, .yaml, .csv) run with
    --agent FILE.py:FUNCTION and, optionally, --config EVAL_CONFIG.json (an EvalConfig of
    the 10xgraph-style AgentEvaluator API).

With --traces FILE nothing is run: recorded runs (message lists or OTLP/JSON spans) are
scored as they are, paired by id with TARGET's cases when TARGET is given, and the report's
model is "recorded". --traces-logs FILE adds the OTLP/JSON logs of the same runs, where GenAI
instrumentations of the v1.28-1.36 conventions record the message content.

The run directory (meta.json, cases.jsonl, report.json and the reports) goes under --out.

Exit codes:
  0    the run finished and no gate rejected it
  1    a gate rejected the run (--fail-threshold, --max-error-rate, --require-calibrated,
       --min-kappa)
  2    bad input (the target, a case or config file, an option; or the run directory is
       being written by another live process); nothing was run
  3    nothing could be evaluated: no cases, or every case errored or was skipped
       (with or without a gate; the run is still stored and reported)
  130  interrupted: Ctrl-C, or the run directory could not be written (a full disk);
       finished cases are kept and --resume RUN_DIR completes the run"""
VIEW_DESCRIPTION = (
    "Serve stored runs on 127.0.0.1: an index of runs with pass and error rates "
    "(error rate >= 10% flagged), each run in detail, and two runs side by side. Give a run "
    "directory or report file to open it directly. A run's 'label verdicts' page lets a person "
    "mark each judged verdict right or wrong (or give pass/fail and a comment) from the "
    "keyboard; labels go to the run's labels.jsonl (see `referee labels export`). On the "
    "compare page a judge can say, case by case, which run's output is better (as `referee "
    "compare --judge`, with the configured judge by default); the result is kept beside run B. "
    "Ctrl-C stops the viewer.")
COMPARE_DESCRIPTION = (
    "Compare run B (candidate) with run A (baseline) case by case: regressions, improvements, "
    "cases added and removed, and paired tests that say in words which differences are real "
    "(McNemar for verdicts, Wilcoxon and a paired bootstrap for scores, Holm across criteria, "
    "effect sizes, the smallest detectable change; docs/statistics.md). Exit code 1 when any case regressed or B is an unfinished "
    "(interrupted) run, 0 otherwise, 2 on bad input. With --judge PROVIDER/MODEL a judge also "
    "says, case by case, which run's output better meets --criterion, asking each pair in both "
    "orders (a preference that flips with the order is a tie); --judge repeated makes a judge "
    "panel, each member judging every pair and the majority deciding (a split is a tie); "
    "exit 3 when the judge judged no pair. The judged pairs are kept beside run B and a "
    "comparison run again asks only the pairs not judged yet.")
LIST_DESCRIPTION = (
    "List the runs stored under a runs directory, newest first, with pass rate, error rate "
    "(error rate >= 10% flagged), whether the run was interrupted, and what is damaged in a "
    "run that cannot be read whole (every other run is listed as usual).")
CACHE_MERGE_DESCRIPTION = (
    "Copy into DST every judge reply of the SRC cache files that DST lacks (DST is created if "
    "missing; default: this machine's cache, which honours $REFEREE_CACHE_DIR). Each node of a "
    "cluster keeps its own cache file; merging them lets a rerun hit the cache wherever its "
    "cases land. Keys are hashes of the whole request, so where two files hold a key DST keeps "
    "its own reply. Run it while no referee process writes the files. Exit 0 done, 2 bad input.")


CACHE_STATS_DESCRIPTION = (
    "Count the judge replies in a cache file, in all and by judge: provider, endpoint (the base "
    "URL, or the provider's own API) and model, with the oldest and newest of each. The filters "
    "select which replies are counted. Replies stored before referee recorded endpoints are "
    "listed as '(not recorded)'.")
CACHE_CLEAR_DESCRIPTION = (
    "Delete judge replies from a cache file: every reply, or those the filters select (all "
    "that are given must match). Use it when a judge changed behind the same name and endpoint "
    "(a local server now serving another model), so that reruns ask it again. Replies stored "
    "before referee recorded endpoints match no --endpoint filter.")


class CliError(Exception):
    """A problem to report in one line, with an exit code."""

    def __init__(self, message: str, code: int = EXIT_INPUT) -> None:
        super().__init__(message)
        self.code = code


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line that points at --help."""

    def error(self, message: str) -> NoReturn:
        raise CliError(f"{message} (see '{self.prog} --help')")


# Loading user code -----------------------------------------------------------------------------

def load_python_file(path: Path) -> ModuleType:
    """Import a user's file as a module; its folder goes on sys.path so sibling imports work."""
    if not path.is_file():
        raise CliError(f"{path}: {_not_a_file(path)}")
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    name = f"referee_target_{path.stem.replace('-', '_').replace('.', '_')}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CliError(f"{path}: cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise CliError(f"{exc.filename or path}:{exc.lineno}: syntax error: {exc.msg}") from None
    except CliError:
        raise
    except Exception as exc:
        raise CliError(f"{path}: raised {type(exc).__name__} while loading: {_describe(exc)}"
                       ) from None
    return module


def _not_a_file(path: Path) -> str:
    return "is a directory, not a file" if path.is_dir() else "no such file"


def load_module_of(spec: str, option: str) -> tuple[ModuleType, str]:
    """The module of ``FILE.py:NAME`` or ``package.module:NAME``, and NAME."""
    where, sep, attr = spec.rpartition(":")
    if not sep or not where or not attr:
        raise CliError(f"{option} {spec!r}: expected FILE.py:NAME or module:NAME")
    if where.endswith(".py"):
        return load_python_file(Path(where)), attr
    try:
        return importlib.import_module(where), attr
    except ImportError as exc:
        raise CliError(f"{option} {spec!r}: cannot import {where}: {exc}") from None


def load_callable(spec: str) -> Any:
    """``FILE.py:NAME`` or ``package.module:NAME``."""
    if ":" not in spec.strip(":"):
        raise CliError(f"--agent {spec!r}: expected FILE.py:FUNCTION or module:FUNCTION")
    module, attr = load_module_of(spec, "--agent")
    value = getattr(module, attr, None)
    if not callable(value):
        raise CliError(f"--agent {spec!r}: {spec.rpartition(':')[0]} has no callable {attr!r}")
    return value


# Commands --------------------------------------------------------------------------------------

def _finite(text: str, expected: str) -> float:
    """A float from the command line; NaN and inf are refused like any other non-number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def _fraction(text: str) -> float:
    value = _finite(text, "a number between 0 and 1")
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}")
    return value


def _kappa(text: str) -> float:
    value = _finite(text, "a kappa between -1 and 1")
    if not -1.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a kappa between -1 and 1, got {text!r}")
    return value


def _judge_gate(args: argparse.Namespace) -> Any:
    """--require-calibrated, --min-kappa and --gate-on as a JudgeGate; None when none is given."""
    if not (args.require_calibrated or args.min_kappa is not None or args.gate_on != "raw"):
        return None
    from referee.run.judge_gate import JudgeGate

    if args.traces:
        raise CliError("--require-calibrated, --min-kappa and --gate-on go with a suite or a "
                       "case file, not --traces")
    return JudgeGate(require_calibrated=args.require_calibrated, min_kappa=args.min_kappa,
                     gate_on=args.gate_on)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


JUDGE_BATCH_API_HELP = ("send judge requests through the provider's batch API (OpenAI, "
                        "Anthropic, Gemini) at half price; slower (minutes to hours), durable: a "
                        "stored run killed after submitting and --resume'd polls its batches "
                        "(REFEREE_JUDGE_BATCH_API=1)")


def add_judge_options(parser: argparse.ArgumentParser, what: str) -> None:
    """``--judge`` as every command that takes a judge spells it: once for one judge, repeated
    for a judge panel, whose rules the two options after it set."""
    parser.add_argument("--judge", metavar="PROVIDER/MODEL", action="append",
                        help=f"{what}; give it two or more times for a judge panel (each "
                             "member asked, the majority's verdict taken)")
    parser.add_argument("--judge-aggregate", choices=("majority", "mean", "median"),
                        help="with a panel: how numeric scores combine (default majority: the "
                             "median score; yes/no verdicts are always voted)")
    parser.add_argument("--judge-quorum", type=_positive_int, metavar="N",
                        help="with a panel: members that must answer for it to judge "
                             "(default a majority of them)")
    parser.add_argument("--judge-batch-api", action="store_true", help=JUDGE_BATCH_API_HELP)


def add_judge_request_options(parser: argparse.ArgumentParser) -> None:
    """How each judge request is made, spelt alike by every command that judges."""
    parser.add_argument("--judge-timeout", type=_positive_float, metavar="SECONDS",
                        help="each judge request's timeout (default: the judge's own, else "
                             "30 s); raise it for a slow local model")
    parser.add_argument("--judge-max-tokens", type=_positive_int, metavar="N",
                        help="the judge's max_tokens (default: the judge's own; 1024, or 128 "
                             "per verdict at a self-hosted server)")
    parser.add_argument("--judge-max-retries", type=_retries, metavar="N",
                        help="retries of a failed judge request (default: the judge's own, "
                             "else 4); 0 gives up on a dead judge or panel member at once")


def _retries(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or a positive integer, got {text!r}")
    return value


def judge_request_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The JudgeConfig fields the --judge-* request options set (those given)."""
    given = (("timeout", args.judge_timeout), ("max_tokens", args.judge_max_tokens),
             ("max_retries", args.judge_max_retries))
    return {name: value for name, value in given if value is not None}


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 (any free one) to 65535, "
                                         f"got {text!r}")
    return value


def _positive_float(text: str) -> float:
    value = _finite(text, "a positive number of seconds")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


@dataclass(frozen=True)
class _Target:
    """What ``referee run``'s target runs, once the options are known (``start``), and the run
    settings the target brings itself (an AgentEvaluator's EvalConfig), under the flags."""

    start: Callable[[RunOptions], Coroutine[Any, Any, EvalReport]]
    defaults: dict[str, Any] = field(default_factory=dict)


def _run_options(args: argparse.Namespace, target: _Target, *, judge_gate: Any,
                 backend: Any) -> RunOptions:
    """The one ``RunOptions`` of ``referee run``: the flags given, over the target's defaults;
    checked when built (its errors name the flags) and never changed after. The run's id is
    chosen here, so the command knows the run's directory before the run starts (the --resume
    hint after Ctrl-C)."""
    from referee.record import new_run_id
    from referee.run.options import RunOptions

    given = {"concurrency": args.concurrency, "timeout": args.timeout,
             "runs_dir": args.runs_dir, "judge_gate": judge_gate, "backend": backend}
    values = {**target.defaults, **{k: v for k, v in given.items() if v is not None},
              **_statistics_settings(args)}
    return RunOptions.from_command_line(
        **values, quiet=args.quiet, resume=args.resume, retry_errors=args.retry_errors,
        rescore=args.rescore, formats=args.format, fail_threshold=args.fail_threshold,
        max_error_rate=args.max_error_rate, run_id=new_run_id(), command=_recorded_command(args))


def _recorded_command(args: argparse.Namespace) -> dict[str, Any] | None:
    """The run's command line (its --resume dropped) and working directory, for meta.json:
    what ``referee resume RUN_DIR`` starts again."""
    given = getattr(args, "command_line", None)
    if given is None:
        return None
    return {"argv": _without_resume(given), "cwd": os.getcwd()}


def _without_resume(command_line: Sequence[str]) -> list[str]:
    """The arguments that run the same run again: --resume RUN_DIR and --detach dropped."""
    words: list[str] = []
    skip = False
    for word in command_line:
        if skip:
            skip = False
        elif word == "--resume":
            skip = True
        elif word != "--detach" and not word.startswith("--resume="):
            words.append(word)
    return words


def _statistics_settings(args: argparse.Namespace) -> dict[str, Any]:
    """--sequential, --trials and --flaky as RunOptions settings (run/sequential.py,
    run/gates.py); none when not given."""
    settings: dict[str, Any] = {}
    if args.sequential and not args.full:
        settings.update(sequential=True, sequential_confidence=args.sequential_confidence)
    if args.trials is not None:
        settings["runs"] = args.trials
    if args.flaky is not None:
        settings["flaky"] = args.flaky
    return settings


def _labelled(request: RunRequest, args: argparse.Namespace) -> RunRequest:
    """The request under --label, when one is given; the user's suite or evaluator stays as
    it was."""
    return dataclasses.replace(request, model_id=args.label) if args.label else request


def _agent_target(evaluator: Any, eval_set: Any, args: argparse.Namespace) -> _Target:
    """An AgentEvaluator's run: its cases through its agent, --timeout recorded in the stored
    config (the evaluator keeps its own)."""
    from referee.run.evaluation import run_evaluation

    request = _labelled(evaluator.run_request(eval_set, timeout=args.timeout), args)
    return _Target(start=lambda options: run_evaluation(request, options),
                   defaults={**evaluator.option_defaults(), "metadata": {"target": args.target}})


def _run_from_python(path: Path, args: argparse.Namespace, backend: Any) -> _Target:
    from referee.run.agent import AgentEvaluator
    from referee.run.evaluation import run_evaluation
    from referee.run.suite import EvalSuite

    module = load_python_file(path)
    if backend is not None:
        backend.send_by_value(module)  # the workers cannot import a file loaded by path
    suite = getattr(module, "suite", None)
    evaluator = getattr(module, "evaluator", None)
    if isinstance(suite, EvalSuite):
        model = getattr(module, "model", None)
        if not callable(model):
            raise CliError(f"{path}: defines `suite` but no callable `model` to evaluate")
        request = _labelled(suite.run_request(model), args)
        return _Target(start=lambda options: run_evaluation(request, options),
                       defaults={"metadata": {"target": args.target}})
    if isinstance(evaluator, AgentEvaluator):
        eval_set = getattr(module, "eval_set", None)
        if eval_set is None:
            raise CliError(f"{path}: defines `evaluator` but no `eval_set` to run it on")
        return _agent_target(evaluator, eval_set, args)
    raise CliError(f"{path}: defines neither `suite` + `model` (an EvalSuite and the function "
                   f"under test) nor `evaluator` + `eval_set` (an AgentEvaluator and its cases)")


def _run_from_cases(path: Path, args: argparse.Namespace, backend: Any) -> _Target:
    from referee.config import EvalConfig
    from referee.evalset import EvalSet
    from referee.run.agent import AgentEvaluator

    if not args.agent:
        raise CliError(f"{path}: running a case file needs --agent FILE.py:FUNCTION")
    if not path.is_file():
        raise CliError(f"{path}: {_not_a_file(path)}")
    config = EvalConfig.from_file(args.config) if args.config else None
    eval_set = EvalSet.load(path)
    agent = load_callable(args.agent)
    if backend is not None:
        backend.send_by_value(sys.modules[agent.__module__])
    return _agent_target(AgentEvaluator(agent, config=config), eval_set, args)


def _ray_backend(address: str) -> Any:
    """--ray [ADDRESS]: the cluster at ADDRESS, else $RAY_ADDRESS or a local one."""
    try:
        from referee.scale import RayBackend

        return RayBackend(address or None)
    except ImportError as exc:
        raise CliError(f"--ray: {exc}") from None


MAX_NOTES_SHOWN = 20


def _print_trace_notes(notes: list[str]) -> None:
    for note in notes[:MAX_NOTES_SHOWN]:
        _say(f"referee: note: {note}", sys.stderr)  # trace files are untrusted text
    if len(notes) > MAX_NOTES_SHOWN:
        _say(f"referee: note: ... and {len(notes) - MAX_NOTES_SHOWN} more (see each case's "
             f"execution.metadata.trace_notes in report.json)", sys.stderr)


def _run_from_traces(target: Path | None, args: argparse.Namespace) -> _Target:
    """Score recorded runs: cases from TARGET (a case file or a .py) or from the traces."""
    from referee.adapters import score_traces_async

    if args.agent:
        raise CliError("--traces scores recorded runs and re-runs nothing; drop --agent")
    traces = Path(args.traces)
    if not traces.is_file():
        raise CliError(f"--traces {traces}: {_not_a_file(traces)}")
    logs = Path(args.traces_logs) if args.traces_logs else None
    if logs is not None and not logs.is_file():
        raise CliError(f"--traces-logs {logs}: {_not_a_file(logs)}")
    cases: Any = None
    criteria: list[Any] | None = None
    name = None
    if target is not None and target.suffix == ".py":
        from referee.run.agent import AgentEvaluator
        from referee.run.suite import EvalSuite

        if args.config:
            raise CliError("--config goes with a case file or the traces alone, "
                           "not a Python target")
        module = load_python_file(target)
        suite, evaluator = getattr(module, "suite", None), getattr(module, "evaluator", None)
        if isinstance(suite, EvalSuite):
            criteria, cases, name = suite.evaluators, suite.cases or None, suite.name
        elif isinstance(evaluator, AgentEvaluator):
            criteria, cases = evaluator.criteria, getattr(module, "eval_set", None)
        else:
            raise CliError(f"{target}: defines neither `suite` (an EvalSuite) nor `evaluator` "
                           f"(an AgentEvaluator) whose criteria score the traces")
    elif target is not None:
        if not target.name.endswith(CASE_FILE_SUFFIXES):
            raise CliError(f"{target}: expected a case file ({', '.join(CASE_FILE_SUFFIXES)}) "
                           f"or a Python file to pair with --traces")
        if not target.is_file():
            raise CliError(f"{target}: {_not_a_file(target)}")
        cases = target
    config = None
    if args.config:
        from referee.config import EvalConfig

        config = EvalConfig.from_file(args.config)
    return _Target(start=lambda options: score_traces_async(
        traces, logs=logs, cases=cases, criteria=criteria, config=config, name=name,
        on_note=_print_trace_notes, options=options))


def _set_judge_cascade(args: argparse.Namespace) -> None:
    """``--judge-cascade``/``--cascade-margin``: checked here, then handed to every judged
    criterion through the environment's layer, as --judge-max-retries is (Ray workers too)."""
    from referee.judge.cascade import CASCADE_ENV, CASCADE_MARGIN_ENV, cascade_from_text

    if args.judge_cascade is None:
        if args.cascade_margin is not None:
            raise CliError("--cascade-margin goes with --judge-cascade CHEAP,STRONG")
        return
    margin = None if args.cascade_margin is None else repr(args.cascade_margin)
    try:
        cascade_from_text(args.judge_cascade, margin, source="--judge-cascade",
                          margin_source="--cascade-margin")
    except ValueError as exc:
        raise CliError(str(exc)) from None
    os.environ[CASCADE_ENV] = args.judge_cascade
    if margin is not None:
        os.environ[CASCADE_MARGIN_ENV] = margin
    else:
        os.environ.pop(CASCADE_MARGIN_ENV, None)


def cmd_run(args: argparse.Namespace) -> int:
    """``referee run``: the target names what to run; one RunOptions, built from these
    arguments over the target's own defaults, says how (checked there: formats, resume rules,
    gates); ``run_evaluation`` runs it. The command changes none of the user's objects."""
    if args.traces_logs and not args.traces:
        raise CliError("--traces-logs goes with --traces FILE (the spans of the same runs)")
    if args.ray is not None and args.traces:
        raise CliError("--ray runs a model or agent on a cluster; --traces scores recorded "
                       "traces here, with nothing to run")
    judge_gate = _judge_gate(args)
    if args.judge_max_retries is not None:
        # Every judged criterion resolves its judge through the environment's layer, here and
        # on Ray workers, so the setting reaches each of them.
        os.environ["REFEREE_JUDGE_MAX_RETRIES"] = str(args.judge_max_retries)
    _set_judge_cascade(args)
    backend = _ray_backend(args.ray) if args.ray is not None else None
    path = Path(args.target) if args.target else None
    if args.traces:
        target = _run_from_traces(path, args)
    elif path is None:
        raise CliError("run needs a TARGET (a .py file or a case file), or --traces FILE")
    elif path.suffix == ".py":
        if args.agent or args.config:
            raise CliError("--agent and --config go with a case file, not a Python target")
        target = _run_from_python(path, args, backend)
    elif path.name.endswith(CASE_FILE_SUFFIXES):
        target = _run_from_cases(path, args, backend)
    else:
        raise CliError(f"{path}: expected a Python file (.py) or a case file "
                       f"({', '.join(CASE_FILE_SUFFIXES)})")
    options = _run_options(args, target, judge_gate=judge_gate, backend=backend)
    from referee.judge.batch._detach import Detached
    from referee.run.sync import run_sync
    from referee.store import RunStoreWriteError

    try:
        with _quiet_logs(args.quiet), _terminate_as_interrupt():
            report = run_sync(_detachable(target.start(options), args, options))
    except Detached as exc:
        return _detached(options.run_dir, exc.batches)
    except KeyboardInterrupt:
        code = _interrupted(options.run_dir)
        _batches_left_running(options.run_dir, getattr(args, "command_line", None))
        return code
    except RunStoreWriteError as exc:
        # Not bad input: the run stopped half-way, like an interrupted one, and resumes.
        return _fail(str(exc), EXIT_INTERRUPTED)
    except EvalGateFailure as exc:
        if getattr(exc.report, "evaluated", None) == 0:
            # No pass rate to gate on: say that, rather than "0.0% < threshold".
            return _nothing_evaluated(exc.report)  # type: ignore[arg-type]  # an EvalReport
        _say(f"referee: {exc}", sys.stderr)
        stored_in = getattr(exc.report, "run_dir", None)
        if stored_in:
            _say(f"referee: the run is stored in {stored_in}", sys.stderr)
        return EXIT_GATE
    run_dir = report.run_dir or ""
    if args.quiet:
        _say(f"{report.passed} passed, {report.failed} failed, {report.errors} errors, "
             f"{report.skipped} skipped of {report.total}; run stored in {run_dir}")
    elif "console" not in options.formats and run_dir:
        # The chosen formats went to files; stdout stays clean, and stderr says where they are.
        _say(f"referee: {', '.join(options.formats) or 'no'} report(s) written to {run_dir}",
             sys.stderr)
    if report.evaluated == 0:
        return _nothing_evaluated(report)
    return 0


def _interrupted(run_dir: Path | None) -> int:
    """Ctrl-C or SIGTERM during a run: where its finished cases are, and how to finish it."""
    if run_dir is not None and run_dir.is_dir():
        print(f"referee: interrupted; finished cases are kept in {run_dir} — rerun with "
              f"--resume {run_dir}", file=sys.stderr)
    else:
        print("referee: interrupted; finished cases are kept — rerun with --resume RUN_DIR",
              file=sys.stderr)
    return EXIT_INTERRUPTED


def _detachable(work: Coroutine[Any, Any, EvalReport], args: argparse.Namespace,
                options: RunOptions) -> Coroutine[Any, Any, EvalReport]:
    """With --detach, the run stops once its judge requests are in batches at the provider."""
    if not getattr(args, "detach", False):
        return work
    from referee.judge.environment import env_switch

    if not env_switch("REFEREE_JUDGE_BATCH_API") or not options.save:
        work.close()
        raise CliError("--detach goes with --judge-batch-api on a stored run: it leaves the "
                       "run's judge batches at the provider for `referee resume RUN_DIR`")
    from referee.judge.batch import BatchSettings
    from referee.judge.batch._detach import run_until_submitted

    # The dispatcher sends what it holds after quiet_s without a new request; twice that
    # without one means no case in flight is about to ask.
    return run_until_submitted(work, settle_s=2 * BatchSettings.from_env().quiet_s)


def _detached(run_dir: Path | None, batches: int) -> int:
    where = run_dir if run_dir is not None else "RUN_DIR"
    run_id = run_dir.name if run_dir is not None else "-"
    _say(f"referee: detached: run {run_id} waits on {batches} judge batch(es) at the provider "
         f"({where}); `referee resume {where}` reports them and finishes the run once they "
         f"end (--wait: waits for them)")
    return 0


def _batches_left_running(run_dir: Path | None, command_line: Sequence[str] | None) -> None:
    """Batch seam: after Ctrl-C the judge batches already submitted keep running at the
    provider (their price is paid either way); say so, and give the exact command that
    resumes the run and polls them."""
    if run_dir is None or not (run_dir / _batch_journal_file()).is_file():
        return
    from referee.judge.batch import BatchJournal

    batches = BatchJournal(run_dir).batches
    if not batches:
        return
    print(f"referee: {len(batches)} judge batch(es) left running at the provider "
          f"({', '.join(f'{b.provider} {b.batch_id}' for b in batches)}); their answers are "
          f"collected when the run resumes", file=sys.stderr)
    print(f"referee: to resume: {resume_command(command_line, run_dir)}", file=sys.stderr)


def _batch_journal_file() -> str:
    from referee.judge.batch import JOURNAL_FILE

    return JOURNAL_FILE


def resume_command(command_line: Sequence[str] | None, run_dir: Path) -> str:
    """The ``referee run`` command line given (its --resume dropped), resuming ``run_dir``."""
    import shlex

    words = _without_resume(command_line if command_line is not None else ["run", "TARGET"])
    return shlex.join(["referee", *words, "--resume", str(run_dir)])


@contextlib.contextmanager
def _quiet_logs(quiet: bool) -> Iterator[None]:
    """With -q, what criteria log about single cases (a judge sample that failed, a missing
    provider's placeholder, an evaluation that raised) stays out of the output: each is recorded
    on its case in the stored run. Warnings about the run itself (an unreadable judge cache)
    still show."""
    logger = logging.getLogger("referee.evaluation")  # the criteria's logger (10xgraph's name)
    before = logger.level
    if quiet:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(before)


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (a CI timeout, ``kill``, a container stopping) ends the run as Ctrl-C does:
    finished cases kept, the --resume hint printed, exit 130."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):  # asyncio's own Ctrl-C handling, or Python's default one
            os.kill(os.getpid(), signal.SIGINT)
        else:
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _nothing_evaluated(report: EvalReport) -> int:
    """A run without one evaluated case has no verdict; CI must not read it as a pass."""
    from referee.record import nothing_evaluated_reason

    where = f"; the run is stored in {report.run_dir}" if report.run_dir else ""
    _say(f"referee: nothing evaluated: {nothing_evaluated_reason(report)}{where}", sys.stderr)
    return EXIT_NOTHING_EVALUATED


def _runs_dir(value: str | None) -> Path:
    from referee.store import runs_dir_or_default

    return runs_dir_or_default(value)


def cmd_view(args: argparse.Namespace) -> int:
    from referee.report.viewer import serve
    from referee.store import list_runs, load_run, split_ref

    target: Path | None = Path(args.target) if args.target else None
    if target is not None and not split_ref(target)[0].exists():
        raise CliError(f"{target}: no such run directory or report file")
    runs_dir = _runs_dir(args.dir)
    if args.dir and not runs_dir.is_dir():
        raise CliError(f"--dir {runs_dir}: no such directory")
    if (target is not None and args.dir is None and target.is_dir()
            and not (target / "meta.json").is_file() and not (target / "report.json").is_file()
            and list_runs(target)):
        # `referee view .referee/runs`: a directory of runs is what --dir indexes.
        runs_dir, target = target, None
    if target is not None:
        load_run(target)  # a file or folder that is not a run fails here, in one line
    serve(target, runs_dir, port=args.port, labeller=args.labeller)
    return 0


def _nothing_to_label(run_dir: str) -> bool:
    """Say in one line that the stored run has nothing to label, when no judge scored it."""
    from referee.labels._queue import nothing_to_label_in

    why_not = nothing_to_label_in(run_dir)
    if why_not is not None:
        _say(f"referee: {run_dir}: nothing to label: {why_not}", sys.stderr)
    return why_not is not None


def cmd_labels_export(args: argparse.Namespace) -> int:
    from referee.labels._export import export_rows, write_rows

    rows = export_rows(args.run_dir, criterion=args.criterion)
    count = len(rows)
    # No labels on a run no judge scored: that, not "0 labelled rows", is the news.
    if not count and _nothing_to_label(args.run_dir):
        return 0
    text = write_rows(rows, args.run_dir, args.output)
    if args.output is None:
        sys.stdout.write(text)
    _say(f"{count} labelled row(s)" + (f" written to {args.output}" if args.output else ""),
         sys.stderr)
    return 0


def cmd_labels_import(args: argparse.Namespace) -> int:
    from referee.labels._import import LabelImportError, import_labels

    try:
        imported = import_labels(args.run_dir, args.file, labeller=args.labeller)
    except LabelImportError as exc:
        if len(exc.problems) == 1:
            return _fail(f"{exc.problems[0]}; nothing was imported", EXIT_INPUT)
        for problem in exc.problems:  # every fault, so one pass fixes them all
            _say(f"referee: error: {problem}", sys.stderr)
        _say(f"referee: {exc.bad_lines} bad line(s) in {args.file}; nothing was imported",
             sys.stderr)
        return EXIT_INPUT
    _say(f"{imported.added} label(s) added to {args.run_dir}/labels.jsonl"
         + (f"; {imported.already} already there" if imported.already else ""), sys.stderr)
    return 0


def cmd_labels_estimate(args: argparse.Namespace) -> int:
    """``referee labels estimate``: the judge's pass rates and mean scores corrected by labels."""
    from referee.labels._estimate import estimate_run

    estimates = estimate_run(args.run_dir, confidence=args.confidence)
    if not estimates and _nothing_to_label(args.run_dir):
        if args.json:
            print("[]")
        return 0
    if args.json:
        import json

        print(json.dumps([e.to_dict() for e in estimates], indent=2))
    elif not estimates:
        _say(f"no labels on the current scoring of {args.run_dir}", sys.stderr)
    else:
        sys.stdout.write(terminal_safe("".join(e.describe() + "\n" for e in estimates)))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from referee.report.compare import compare_reports
    from referee.store import load_run

    run_a, run_b = load_run(args.a), load_run(args.b)
    comparison = compare_reports(run_a, run_b)
    if args.judge is None:
        if args.criterion is not None or args.question or args.one_order \
                or args.judge_aggregate is not None or args.judge_quorum is not None \
                or judge_request_settings(args):
            raise CliError("--criterion, --question, --one-order, --judge-aggregate, "
                           "--judge-quorum and --judge-timeout/-max-tokens/-max-retries need "
                           "--judge PROVIDER/MODEL")
        if args.html:
            from referee.report.html import render_compare_html

            Path(args.html).write_text(render_compare_html(comparison), encoding="utf-8")
            # stdout may be the JSON; where the page went is said beside it.
            _say(f"referee: comparison page written to {args.html}", sys.stderr)
        if args.json:
            import json

            print(json.dumps(comparison.to_dict(), indent=2))
        else:
            sys.stdout.write(terminal_safe(comparison.render_text()))
        return 0 if comparison.acceptable else EXIT_GATE
    return _compare_pairwise(args, run_a, run_b, comparison)


def _comparison_home(run_b: str) -> Path | None:
    """Where ``compare --judge`` keeps its pairs: run B's directory (none for a report file)."""
    from referee.store import split_ref

    path = split_ref(run_b)[0]
    return path if path.is_dir() else None


def _compare_pairwise(args: argparse.Namespace, run_a: Any, run_b: Any, comparison: Any) -> int:
    """``compare --judge``: the regressions as usual, then each pair judged side by side."""
    import json

    from referee.judge.panel import judge_from_cli
    from referee.pairwise import compare_runs
    from referee.pairwise._html import ComparedRuns, render_pairwise_html

    judge = _with_request_settings(
        judge_from_cli(args.judge, args.judge_aggregate, args.judge_quorum), args)
    _check_judge_reachable(judge)
    if args.question and args.criterion is not None:
        raise CliError("give --criterion or --question, not both")
    criterion = (None if args.question else
                 DEFAULT_PAIRWISE_CRITERION if args.criterion is None else args.criterion)
    if criterion is not None and not criterion.strip():
        raise CliError("--criterion: expected a non-empty criterion text")
    if any(not q.strip() for q in args.question or ()):
        raise CliError("--question: expected a non-empty yes/no question")
    pairwise = compare_runs(run_a, run_b, criterion, questions=args.question,
                            judge=judge, both_orders=not args.one_order, label_a=str(args.a),
                            label_b=str(args.b), store_in=_comparison_home(args.b))
    saved = []
    if args.html:
        html = Path(args.html)
        runs = comparison.render_text().splitlines()[:3]  # A, B and the regression counts
        html.write_text(render_pairwise_html(pairwise, runs=runs,
                                             compared=ComparedRuns(run_a, run_b)),
                        encoding="utf-8")
        saved.append(pairwise.write_json(html.with_suffix(".json")))
    if args.save:
        saved.append(pairwise.write_json(args.save))
    if args.json:
        print(json.dumps({**comparison.to_dict(), "pairwise": pairwise.to_dict()}, indent=2))
    else:
        sys.stdout.write(terminal_safe(comparison.render_text()))
        sys.stdout.write(terminal_safe(pairwise.render_text()))
        for path in saved:
            print(f"pairwise comparison written to {path}")
    if pairwise.win_rate.judge_errors and not pairwise.judge_answered:
        return EXIT_NOTHING_EVALUATED
    return 0 if comparison.acceptable else EXIT_GATE


def _with_request_settings(judge: Any, args: argparse.Namespace) -> Any:
    """The --judge judge (or each panel member) with the --judge-* request settings given."""
    settings = judge_request_settings(args)
    if not settings or judge is None:
        return judge
    from referee.judge import JudgePanel

    if isinstance(judge, JudgePanel):
        return judge.model_copy(update={"members": [m.model_copy(update=settings)
                                                    for m in judge.members]})
    return judge.model_copy(update=settings)


def _check_judge_reachable(judge: Any) -> None:
    """Before the first pair, as a run does before its first case: a judge (or too many panel
    members) that cannot be reached at all (no API key) is said once, not once a pair."""
    from referee.judge import JudgePanel
    from referee.judge.providers import ProviderSetupError, adapter_for

    members = judge.members if isinstance(judge, JudgePanel) else [judge]
    unreachable = []
    for member in members:
        try:
            adapter_for(member.provider).credentials(member)
        except ProviderSetupError as exc:
            unreachable.append(f"{member.provider}/{member.model}: {exc}")
    needed = judge.effective_quorum if isinstance(judge, JudgePanel) else 1
    if len(members) - len(unreachable) < needed:
        raise CliError(f"--judge: cannot reach {'; '.join(unreachable)}; no pair was judged",
                       EXIT_NOTHING_EVALUATED)
    for reason in unreachable:
        _say(f"referee: warning: panel member {reason}; the others judge", sys.stderr)


def cmd_list(args: argparse.Namespace) -> int:
    from referee.store import list_runs

    runs_dir = _runs_dir(args.dir)
    if args.dir and not runs_dir.is_dir():
        raise CliError(f"--dir {runs_dir}: no such directory")
    runs = list_runs(runs_dir)
    if not runs:
        print(f"no runs under {runs_dir}")
        return 0
    from referee.record import format_rate

    for run in runs:
        flag = "  <- error rate >= 10%" if run.error_rate >= 0.10 else ""
        state = "" if run.finished else "  (running)" if run.running else "  (interrupted)"
        if run.damaged:
            more = f" (+{len(run.damaged) - 1} more)" if len(run.damaged) > 1 else ""
            state += f"  (damaged: {run.damaged[0]}{more})"
        if run.versions:
            earlier = ", ".join(f"@{n}" for n in run.versions if n != run.version)
            state += f"  (scoring {run.version}; earlier: {earlier})"
        if not run.finished:  # batch seam: what an unfinished run left at the provider
            state += _waiting_batches(run.path)
        model = f"  [{run.model_id}]" if run.model_id else ""
        pass_rate = format_rate(run.pass_rate, run.passed + run.failed)
        _say(f"{run.run_id}  {_when(run.started_at)}  {run.name or '-'}{model}  pass {pass_rate}"
             f"  errors {format_rate(run.error_rate, run.total)}  {run.passed}/{run.total} "
             f"case(s) passed{state}{flag}")
    return 0


def _waiting_batches(run_dir: Path) -> str:
    from referee.judge.batch import JOURNAL_FILE, BatchJournal

    if not (run_dir / JOURNAL_FILE).is_file():
        return ""
    described = BatchJournal(run_dir).describe()
    return f"  ({described}; --resume follows them)" if described else ""


def cmd_resume(args: argparse.Namespace) -> int:
    """``referee resume RUN_DIR``: the stored run's own ``referee run`` command, resumed (what
    meta.json recorded). Without --wait, a run whose judge batches are still running at the
    provider is left to them: their states are printed, and nothing else happens."""
    from referee.judge.batch._status import batch_statuses, journalled_batches, stored_judges
    from referee.store import RunStore

    run_dir = Path(args.run_dir)
    if not (run_dir / "meta.json").is_file():
        raise CliError(f"{run_dir}: not a stored run (expected a run directory with meta.json)")
    store = RunStore(run_dir)
    meta = store.read_meta()
    if store.is_finished:
        _say(f"referee: {run_dir} is finished; nothing to resume")
        return 0
    command = meta.get("command")
    if not isinstance(command, dict) or not command.get("argv"):
        raise CliError(f"{run_dir / 'meta.json'}: no recorded command (a run started from "
                       f"Python, or by an earlier referee); resume it with `referee run TARGET "
                       f"--resume {run_dir}`")
    batches = journalled_batches(run_dir)
    if batches and not args.wait:
        statuses = batch_statuses(batches, stored_judges(meta))
        for status in statuses:
            _say(f"referee: {status.describe()}")
        pending = sum(status.pending for status in statuses)
        if pending:
            _say(f"referee: {pending} judge batch(es) still running; run `referee resume "
                 f"{run_dir}` again later, or add --wait to wait for them here")
            return 0
    argv = [*_without_resume(command["argv"]), "--resume", str(run_dir.resolve())]
    if batches and "--judge-batch-api" not in argv:
        argv.append("--judge-batch-api")  # chosen by the environment when the run began
    with _working_directory(command.get("cwd")):
        return _main(argv)


@contextlib.contextmanager
def _working_directory(path: str | None) -> Iterator[None]:
    """The run's own working directory while it resumes (its target and files are named
    relative to it)."""
    before = os.getcwd()
    if path:
        try:
            os.chdir(path)
        except OSError as exc:
            raise CliError(f"cannot resume in the run's working directory {path}: "
                           f"{exc.strerror}") from None
    try:
        yield
    finally:
        os.chdir(before)


def cmd_cache_merge(args: argparse.Namespace) -> int:
    from referee.judge.reply_cache import default_cache_path, merge_caches

    into = Path(args.into) if args.into else default_cache_path()
    merged = merge_caches(args.sources, into)
    _say(f"merged {len(args.sources)} cache file(s) into {into}: {merged.added:,} replies added, "
         f"{merged.already_present:,} already there; {merged.total:,} in all")
    return 0


def _age(text: str) -> float:
    """'30d', '12h', '90m', '45s' or plain seconds, as seconds."""
    units = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
    value = text.strip().lower()
    scale = units.get(value[-1:], None) if value else None
    number = value[:-1] if scale is not None else value
    try:
        seconds = float(number) * (scale or 1.0)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds < 0:
        raise argparse.ArgumentTypeError(
            f"expected an age such as 30d, 12h, 90m or 3600 (seconds), got {text!r}")
    return seconds


def _cache_filter(args: argparse.Namespace) -> Any:
    from referee.judge.reply_cache import CacheFilter

    return CacheFilter(model=args.model, provider=args.provider, endpoint=args.endpoint,
                       older_than_s=args.older_than)


def _when(timestamp: float) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M", time.localtime(timestamp))


def cmd_cache_stats(args: argparse.Namespace) -> int:
    from referee.judge.reply_cache import cache_stats

    where = _cache_filter(args)
    stats = cache_stats(args.cache, where)
    if args.json:
        import json

        print(json.dumps({
            "path": str(stats.path), "exists": stats.exists, "replies": stats.total,
            "matching": stats.matching, "size_bytes": stats.size_bytes,
            "judges": [{"provider": g.provider, "endpoint": g.endpoint, "model": g.model,
                        "replies": g.replies, "oldest": g.oldest, "newest": g.newest}
                       for g in stats.groups]}, indent=2))
        return 0
    if not stats.exists:
        _say(f"no judge cache at {stats.path}")
        return 0
    selected = "" if where.empty else f", {stats.matching:,} matching"
    _say(f"judge cache {stats.path}: {stats.total:,} replies{selected}, "
         f"{stats.size_bytes / 1e6:.1f} MB")
    rows = [("provider", "endpoint", "model", "replies", "oldest", "newest")] + [
        (g.provider, "(provider's API)" if g.endpoint == "" else g.endpoint or "(not recorded)",
         g.model, f"{g.replies:,}", _when(g.oldest), _when(g.newest)) for g in stats.groups]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows if stats.groups else []:
        _say("  ".join(cell.rjust(w) if i == 3 else cell.ljust(w)
                       for i, (cell, w) in enumerate(zip(row, widths))).rstrip())
    return 0


def cmd_cache_clear(args: argparse.Namespace) -> int:
    from referee.judge.reply_cache import clear_cache, default_cache_path

    removed, left = clear_cache(args.cache, _cache_filter(args))
    path = args.cache or default_cache_path()
    _say(f"removed {removed:,} judge replies from {path}; {left:,} left")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from referee.calibrate._command import run_command

    return run_command(args, load_module_of)


def cmd_serve(args: argparse.Namespace) -> int:
    """``referee serve``: referee/serve/_command.py does the work."""
    from referee.serve._command import run_serve

    return run_serve(args, load_python_file=load_python_file, error=CliError)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="referee", description="Evaluate LLM applications and agents.")
    parser.add_argument("--version", action="version", version=f"referee {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    run = sub.add_parser("run", help="run an eval suite or an eval set and store the run",
                         description=RUN_DESCRIPTION,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("target", metavar="TARGET", nargs="?",
                     help="a .py file defining suite+model or evaluator+eval_set, or a case file "
                          "(optional with --traces)")
    run.add_argument("--traces", metavar="FILE",
                     help="score recorded runs instead of running anything: OpenAI-style message "
                          "lists or OTLP/JSON spans (JSON or JSONL); paired by id with TARGET's "
                          "cases, or each record is its own case")
    run.add_argument("--traces-logs", metavar="FILE",
                     help="with --traces: the OTLP/JSON logs export of the same runs, whose "
                          "GenAI events (gen_ai.*.message, gen_ai.choice) hold the message "
                          "content")
    run.add_argument("--agent", metavar="FILE.py:FUNCTION",
                     help="the agent under test, when TARGET is a case file")
    run.add_argument("--config", metavar="EVAL_CONFIG.json",
                     help="an AgentEvaluator EvalConfig for a case file (default: EvalConfig.default())")
    run.add_argument("--out", "--runs-dir", dest="runs_dir", metavar="DIR",
                     help="where run directories go (default .referee/runs or $REFEREE_RUNS_DIR)")
    run.add_argument("--concurrency", type=_positive_int, metavar="N",
                     help="cases run at once (default 8 for suites; the config for agents)")
    run.add_argument("--timeout", type=_positive_float, metavar="SECONDS", help="per-case timeout")
    run.add_argument("--fail-threshold", type=_fraction, metavar="RATE",
                     help="fail (exit 1) when pass_rate is below RATE")
    run.add_argument("--sequential", action="store_true",
                     help="with --fail-threshold: run the cases in a seeded random order and "
                          "stop judging once the pass rate is settled above or below RATE "
                          "(an anytime-valid test); the cases not run are recorded as not run, "
                          "and --resume RUN_DIR runs them")
    run.add_argument("--sequential-confidence", type=_fraction, default=0.95, metavar="LEVEL",
                     help="with --sequential: how sure the decision must be (default 0.95)")
    run.add_argument("--full", action="store_true",
                     help="run every case even where --sequential is given")
    run.add_argument("--trials", type=_positive_int, metavar="N",
                     help="run each case N times, each judged afresh; the report lists the "
                          "flaky cases (a verdict that flipped between runs) with their flip "
                          "rate, and a case passes only if every run did")
    run.add_argument("--flaky", choices=("quarantine", "fail"),
                     help="with --trials N: what the gate does with flaky cases: quarantine "
                          "leaves them out of --fail-threshold's pass rate; fail fails the gate "
                          "on any (default: they count as the failures they are)")
    run.add_argument("--max-error-rate", type=_fraction, metavar="RATE",
                     help="fail (exit 1) when error_rate exceeds RATE")
    run.add_argument("--require-calibrated", action="store_true",
                     help="fail (exit 1) when a judged criterion has no calibration entry for "
                          "its judge, evaluator, question set and threshold (referee calibrate)")
    run.add_argument("--min-kappa", type=_kappa, metavar="K",
                     help="with --require-calibrated (implied): fail (exit 1) when a judged "
                          "criterion's calibrated kappa is below K")
    run.add_argument("--gate-on", choices=("raw", "corrected"), default="raw",
                     help="what --fail-threshold gates: the raw pass rate (default), or each "
                          "criterion's pass rate corrected for judge error (its interval's "
                          "lower bound)")
    run.add_argument("--format", metavar="LIST",
                     help=f"reports to produce, comma-separated: console prints the summary, "
                          f"json/junit/html write files (default {','.join(DEFAULT_FORMATS)}, "
                          f"as for a run started from Python)")
    run.add_argument("--resume", metavar="RUN_DIR",
                     help="finish an interrupted run without re-running its finished cases")
    run.add_argument("--retry-errors", action="store_true",
                     help="with --resume: also run again the cases that ended in an error")
    run.add_argument("--rescore", action="store_true",
                     help="with --resume: score the stored outputs with the criteria given now "
                          "(resuming with changed criteria is refused otherwise); the model "
                          "runs only for cases that have no output yet")
    run.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                     help="run the cases on a Ray cluster (ADDRESS, else $RAY_ADDRESS or a local "
                          "one, shut down when the run ends); needs the extra referee[ray]. The "
                          "target's folder travels to the workers, and so does the judge; results "
                          "come back here and the run is stored here, as a local run")
    run.add_argument("--judge-max-retries", type=_retries, metavar="N",
                     help="retries of a failed judge request, for every judged criterion "
                          "(sets REFEREE_JUDGE_MAX_RETRIES for the run; default 4)")
    run.add_argument("--judge-cascade", metavar="CHEAP,STRONG",
                     help="judge every judged criterion that names no judge, panel or cascade "
                          "of its own with a cascade of these PROVIDER/MODEL judges, cheapest "
                          "first: the strong one is asked only where the cheap one is unsure "
                          "(an error, an UNKNOWN answer, a score near the threshold); sets "
                          "JUDGE_CASCADE for the run")
    run.add_argument("--cascade-margin", type=_fraction, metavar="M",
                     help="with --judge-cascade: how near the threshold a cheap score must lie "
                          "for the strong judge to be asked (default 0.1; sets "
                          "JUDGE_CASCADE_MARGIN)")
    run.add_argument("--label", "--model-id", dest="label", metavar="NAME",
                     help="the model or variant label stored with the run and shown in every "
                          "report, the viewer and compare (default: the model function's name)")
    run.add_argument("-q", "--quiet", action="store_true",
                     help="no progress or console report; one summary line")
    run.add_argument("--judge-batch-api", action="store_true", help=JUDGE_BATCH_API_HELP)
    run.add_argument("--detach", action="store_true",
                     help="with --judge-batch-api: submit the run's judge batches (those that "
                          "need no earlier answer), record them, and exit with the run id; "
                          "`referee resume RUN_DIR` collects them and sends the later rounds")
    run.set_defaults(func=cmd_run)

    view = sub.add_parser("view", help="browse stored runs in a local web viewer (127.0.0.1)",
                          description=VIEW_DESCRIPTION)
    view.add_argument("target", metavar="RUN_OR_FILE", nargs="?",
                      help="open this run directory or report file")
    view.add_argument("--dir", metavar="DIR", help="the runs directory to index (default .referee/runs)")
    view.add_argument("--port", type=_port, default=0, help="port to listen on (default: a free one)")
    view.add_argument("--labeller", metavar="NAME",
                      help="who the labels made in this viewer name (default: the OS user)")
    view.set_defaults(func=cmd_view)

    labels = sub.add_parser("labels", help="people's labels on a run's verdicts",
                            description="Labels made in `referee view`, kept in a run's "
                                        "labels.jsonl.")
    labels_sub = labels.add_subparsers(dest="labels_command", metavar="ACTION",
                                       parser_class=_Parser, required=True)
    export = labels_sub.add_parser(
        "export", help="write a run's labels as a labels file for `referee calibrate`",
        description="Write the latest label per case and criterion as the rows `referee "
                    "calibrate` reads: the case's input, context and expected output, the "
                    "output the run stored, and the person's pass/fail. JSONL, to stdout "
                    "unless -o.")
    export.add_argument("run_dir", metavar="RUN_DIR", help="the run directory")
    export.add_argument("-o", "--output", metavar="FILE", help="write here (a .jsonl file)")
    export.add_argument("--criterion", metavar="NAME",
                        help="only the labels on this criterion (ids are then the case ids)")
    export.set_defaults(func=cmd_labels_export)
    imports = labels_sub.add_parser(
        "import", help="add labels from a file (a report's \"Download labels\") to a run",
        description="Append the labels of FILE (the self-contained report's \"Download "
                    "labels\", or `referee labels export` output) to RUN_DIR/labels.jsonl. "
                    "Every line is checked against the run first; with a bad line nothing "
                    "is imported. Lines already stored are skipped.")
    imports.add_argument("run_dir", metavar="RUN_DIR", help="the run directory")
    imports.add_argument("file", metavar="FILE", help="the labels file (JSONL)")
    imports.add_argument("--labeller", metavar="NAME",
                         help="who made the labels whose line names nobody (default: the OS "
                              "user)")
    imports.set_defaults(func=cmd_labels_import)
    estimate = labels_sub.add_parser(
        "estimate", help="the judge's pass rates and mean scores corrected by the labels",
        description="For each judged criterion, the judge's pass rate and mean score over the "
                    "cases it scored, corrected by the labelled cases (prediction-powered "
                    "inference: the pass rate from the labels' pass/fail, the mean score from "
                    "their human_score), with an interval. The labelled cases must be a "
                    "random sample of the run's cases.")
    estimate.add_argument("run_dir", metavar="RUN_DIR", help="the run directory")
    estimate.add_argument("--confidence", type=_fraction, default=0.95, metavar="LEVEL",
                          help="the interval's confidence (default 0.95)")
    estimate.add_argument("--json", action="store_true", help="print the estimates as JSON")
    estimate.set_defaults(func=cmd_labels_estimate)

    compare = sub.add_parser("compare", help="per-case regressions between two runs (exit 1 on any)",
                             description=COMPARE_DESCRIPTION)
    compare.add_argument("a", metavar="A", help="baseline run directory (RUN_DIR@N: its scoring "
                         "N) or report file")
    compare.add_argument("b", metavar="B", help="candidate run directory (RUN_DIR@N: its scoring "
                         "N) or report file")
    compare.add_argument("--json", action="store_true", help="print the comparison as JSON")
    compare.add_argument("--html", metavar="FILE",
                         help="also write the comparison as a self-contained HTML page (with "
                              "--judge: the judged pairs side by side, and FILE's .json beside)")
    add_judge_options(compare, "also judge each case's two outputs pairwise, e.g. "
                      "openai/gpt-4o-mini: win/tie/loss per case, B's win rate with a 95%% "
                      "interval and a sign test (2 judge requests per case and judge)")
    add_judge_request_options(compare)
    compare.add_argument("--criterion", metavar="TEXT",
                         help="with --judge: what the better output does (default: "
                              f"{DEFAULT_PAIRWISE_CRITERION!r})")
    compare.add_argument("--question", metavar="TEXT", action="append",
                         help="with --judge, instead of --criterion: a yes/no question the "
                              "better output answers yes (repeat it for a question set; the "
                              "side that wins more questions wins; 2 requests per question)")
    compare.add_argument("--one-order", action="store_true",
                         help="with --judge: ask each pair once, A first, instead of in both "
                              "orders (half the cost, no position-bias control)")
    compare.add_argument("--save", metavar="FILE.json",
                         help="with --judge: write the pairwise comparison as JSON")
    compare.set_defaults(func=cmd_compare)

    resume = sub.add_parser(
        "resume", help="resume a stored run (as `referee run TARGET --resume RUN_DIR`)",
        description="Resume a stored run with the `referee run` command that started it "
                    "(recorded in its meta.json). A run waiting on judge batches: without "
                    "--wait, their states are printed and the command ends (exit 0) while "
                    "any is still running; run it again later. With --wait, the batches are "
                    "polled until they end and the run finishes.")
    resume.add_argument("run_dir", metavar="RUN_DIR", help="the run directory")
    resume.add_argument("--wait", action="store_true",
                        help="wait for the run's judge batches and finish the run")
    resume.set_defaults(func=cmd_resume)

    listing = sub.add_parser("list", help="list stored runs, newest first",
                             description=LIST_DESCRIPTION)
    listing.add_argument("--dir", metavar="DIR", help="the runs directory (default .referee/runs)")
    listing.set_defaults(func=cmd_list)

    cache = sub.add_parser("cache", help="work with judge reply caches",
                           description="Work with judge reply cache files.")
    cache_actions = cache.add_subparsers(dest="cache_action", metavar="ACTION", required=True,
                                         parser_class=_Parser)
    merge = cache_actions.add_parser("merge", help="merge judge caches by key (e.g. one per node)",
                                     description=CACHE_MERGE_DESCRIPTION)
    merge.add_argument("sources", metavar="SRC", nargs="+", help="cache files to copy from")
    merge.add_argument("--into", metavar="DST",
                       help="the cache file to merge into (default: this machine's cache)")
    merge.set_defaults(func=cmd_cache_merge)
    stats = cache_actions.add_parser("stats", help="how many judge replies a cache holds, by judge",
                                     description=CACHE_STATS_DESCRIPTION)
    clear = cache_actions.add_parser("clear", help="delete judge replies (all, or those selected)",
                                     description=CACHE_CLEAR_DESCRIPTION)
    for action in (stats, clear):
        action.add_argument("--cache", metavar="FILE",
                            help="the cache file (default: this machine's cache, which honours "
                                 "$REFEREE_CACHE_DIR)")
        action.add_argument("--model", metavar="GLOB", help="only replies of these judge models "
                                                            "(a glob: 'llama3*')")
        action.add_argument("--provider", metavar="NAME", help="only replies of this provider")
        action.add_argument("--endpoint", metavar="URL",
                            help="only replies from this base URL (a glob; 'default': the "
                                 "provider's own API)")
        action.add_argument("--older-than", type=_age, metavar="AGE",
                            help="only replies stored more than AGE ago (30d, 12h, 90m, seconds)")
    stats.add_argument("--json", action="store_true", help="print the numbers as JSON")
    stats.set_defaults(func=cmd_cache_stats)
    clear.set_defaults(func=cmd_cache_clear)

    # `referee serve` (online scoring): defined in referee/serve/_command.py, wired here only.
    from referee.serve._command import add_parser as add_serve_parser

    add_serve_parser(sub, port=_port, positive_int=_positive_int, seconds=_positive_float,
                     fraction=_fraction).set_defaults(func=cmd_serve)

    from referee.calibrate._command import add_parser as add_calibrate_parser

    add_calibrate_parser(sub, positive_int=_positive_int, fraction=_fraction,
                         judge_options=add_judge_options,
                         judge_request_options=add_judge_request_options
                         ).set_defaults(func=cmd_calibrate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        try:
            code = _main(argv)
        finally:
            sys.stdout.flush()  # a closed pipe shows here, not at exit as "Exception ignored"
        return code
    except BrokenPipeError:
        return _output_closed()


@contextlib.contextmanager
def _judge_batch_api(on: bool) -> Iterator[None]:
    """Batch seam: ``--judge-batch-api`` is REFEREE_JUDGE_BATCH_API=1 for the command (every
    judge without its own ``batch_api``), and only for it."""
    name = "REFEREE_JUDGE_BATCH_API"
    before = os.environ.get(name)
    if on:
        os.environ[name] = "1"
    try:
        yield
    finally:
        if on and before is None:
            os.environ.pop(name, None)
        elif on and before is not None:
            os.environ[name] = before


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        args.command_line = list(sys.argv[1:] if argv is None else argv)
        if not getattr(args, "command", None):
            parser.print_help()
            return EXIT_INPUT
        with _judge_batch_api(getattr(args, "judge_batch_api", False)):
            return int(args.func(args))
    except BrokenPipeError:
        raise  # main() ends quietly
    except CliError as exc:
        return _fail(str(exc), exc.code)
    except KeyboardInterrupt:
        return _interrupted(None)
    except (InputError, FileNotFoundError, IsADirectoryError, PermissionError, ValueError,
            TypeError) as exc:
        return _fail(_describe(exc), EXIT_INPUT)
    except Exception as exc:
        return _fail(f"{type(exc).__name__}: {_describe(exc)}", EXIT_INPUT)


def _output_closed() -> int:
    """Stop quietly: the rest of the output has no reader. stdout goes to /dev/null so that
    what is still buffered cannot fail again when the interpreter exits."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout without a file descriptor (captured in tests)
        pass
    return EXIT_OUTPUT_CLOSED


def _describe(exc: BaseException) -> str:
    """The error as one line; a pydantic error's own first line names no field, so name it."""
    from pydantic import ValidationError

    if isinstance(exc, ValidationError) and exc.error_count():
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        message = str(first["msg"]).removeprefix("Value error, ")
        return f"{exc.title}: field '{where}': {message}{more}"
    return str(exc) or type(exc).__name__


def _fail(message: str, code: int) -> int:
    if os.environ.get("REFEREE_DEBUG"):
        import traceback

        traceback.print_exc()
    first_line = message.strip().splitlines()[0] if message.strip() else "failed"
    _say(f"referee: error: {first_line}", sys.stderr)
    return code


def _say(line: str, stream: TextIO | None = None) -> None:
    """Print a line made of untrusted parts (case and run names, errors): no secret and no
    terminal escape sequence gets through."""
    print(terminal_safe(redact(line)), file=stream or sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
