"""``referee calibrate``: the command's options and what it does (cli.py only wires it in)."""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

DESCRIPTION = """\
Measure how far an evaluator, with a given judge, agrees with people, and fit its threshold.

LABELS is a file of human-labelled cases: referee's own format (.jsonl, .csv, .yaml: input,
output, context, expected_output or a conversation, and label pass/fail or human_score with a
cutoff), or with --dataset a public set you downloaded: summedits (Faithfulness), halueval
(Hallucination), evouna (AnswerAccuracy).

The rows are scored as a stored run (resume it with --resume RUN_DIR); judge errors are left
out and counted. Prints agreement at the fitted threshold with 95% bootstrap intervals, writes
calibration.json and calibration.html into the run directory, and records the threshold in the
calibration file, where evaluators with threshold="calibrated" find it. A threshold that
passes or fails every row, or agrees no better than chance, is reported as "this judge does not
separate the labels" and not recorded unless --force.

--from-run RUN_DIR instead of LABELS calibrates on a stored run: the outputs it stored and the
labels people made on them in `referee view` (the rows `referee labels export` writes); the
model under test is not asked again.
--recheck (no LABELS) judges again the canary each calibration entry keeps (up to 20 of its
labelled rows, both verdicts, with the scores the judge gave them), with the reply cache off,
and says whether agreement with people moved and whether the provider now serves another model
version than the one calibrated; --evaluator and --judge pick entries, --tolerance sets how far
agreement may fall (default 0.10).
Exit codes: 0 done (with --recheck: the judge still agrees as calibrated), 1 the judge or
panel does not separate the labels (so nothing was recorded), or with --recheck its agreement
fell beyond the tolerance or its served version changed, 2 bad input, 130 interrupted."""

DATASETS = ("labels", "summedits", "halueval", "evouna")


def add_parser(sub: Any, *, positive_int: Callable[[str], int],
               fraction: Callable[[str], float],
               judge_options: Callable[[argparse.ArgumentParser, str], None],
               judge_request_options: Callable[[argparse.ArgumentParser], None]
               ) -> argparse.ArgumentParser:
    parser = sub.add_parser("calibrate", help="measure an evaluator's agreement with human "
                            "labels and fit its threshold", description=DESCRIPTION,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("labels", metavar="LABELS", nargs="?", help="the labelled cases file")
    parser.add_argument("--from-run", metavar="RUN_DIR",
                        help="calibrate on a stored run's outputs and its labels instead")
    parser.add_argument("--criterion", metavar="NAME",
                        help="with --from-run: the criterion whose labels to use (default: "
                             "the only one labelled, else the one named like the evaluator)")
    parser.add_argument("--evaluator", metavar="NAME|FILE.py:OBJECT",
                        help="a built-in evaluator (faithfulness, hallucination, "
                             "answer_accuracy, ...) or an evaluator defined in a file "
                             "(default: the one that fits --dataset)")
    parser.add_argument("--dataset", choices=DATASETS, default="labels",
                        help="the format of LABELS (default: referee's labelled-case format)")
    judge_options(parser, "the judge, e.g. openai/gpt-4o-mini (default: the evaluator's own, "
                  "else configure()/JUDGE_PROVIDER/JUDGE_MODEL); a panel is reported beside "
                  "each member's agreement with the same labels")
    judge_request_options(parser)
    parser.add_argument("--metric", choices=("kappa", "f1", "youden"), default="kappa",
                        help="what the fitted threshold maximises (default kappa)")
    parser.add_argument("--folds", type=positive_int, metavar="K",
                        help="also report K-fold cross-validated agreement (K >= 2)")
    parser.add_argument("--cutoff", type=fraction, metavar="X",
                        help="human_score at or above X is a pass (default 0.5)")
    parser.add_argument("--limit", type=positive_int, metavar="N",
                        help="calibrate on a random sample of N rows (seeded by --seed)")
    parser.add_argument("--seed", type=int, default=0, help="seed of sampling, folds and "
                        "bootstrap (default 0)")
    parser.add_argument("--resamples", type=positive_int, default=2000, metavar="B",
                        help="bootstrap resamples (default 2000)")
    parser.add_argument("--out", "--runs-dir", dest="runs_dir", metavar="DIR",
                        help="where run directories go (default .referee/runs)")
    parser.add_argument("--resume", metavar="RUN_DIR",
                        help="finish an interrupted calibration run")
    parser.add_argument("--retry-errors", action="store_true",
                        help="with --resume: ask the judge again about rows that errored")
    parser.add_argument("--concurrency", type=positive_int, default=8, metavar="N",
                        help="rows scored at once (default 8)")
    parser.add_argument("--calibration-file", metavar="PATH",
                        help="where the fitted threshold is recorded (default "
                             "$REFEREE_CALIBRATION_FILE or .referee/calibration.json)")
    parser.add_argument("--no-write", action="store_true",
                        help="report only; leave the calibration file alone")
    parser.add_argument("--force", action="store_true",
                        help="record the threshold even when the judge does not separate the "
                             "labels (the entry says so)")
    parser.add_argument("--recheck", action="store_true",
                        help="judge each calibration entry's stored canary rows again and "
                             "say whether agreement or the served model version moved")
    parser.add_argument("--tolerance", type=fraction, default=None, metavar="X",
                        help="with --recheck: how far agreement may fall, as a share of the "
                             "rows (default 0.10)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="one summary line instead of the table")
    return parser


def _load_object(spec: str, load_module_of: Callable[[str, str], tuple[ModuleType, str]]) -> Any:
    module, attr = load_module_of(spec, "--evaluator")
    if not hasattr(module, attr):
        raise ValueError(f"--evaluator {spec!r}: {spec.rpartition(':')[0]} defines no {attr!r}")
    value = getattr(module, attr)
    if isinstance(value, type) or (callable(value) and not hasattr(value, "evaluate")):
        try:
            value = value()  # a class or a factory
        except Exception as exc:
            from referee.errors import describe_exception

            raise ValueError(f"--evaluator {spec!r}: {attr}() raised "
                             f"{describe_exception(exc)}") from None
    if not callable(getattr(value, "evaluate", None)):
        raise ValueError(f"--evaluator {spec!r}: {attr} is a {type(value).__name__}, not an "
                         f"evaluator (no evaluate method)")
    return value


def _evaluator_name(spec: str) -> str | None:
    """The criterion name a built-in evaluator's results carry in a run."""
    if ":" in spec:
        return None
    from referee.calibrate._run import evaluator_by_name

    return str(getattr(evaluator_by_name(spec), "name", spec))


def run_command(args: argparse.Namespace,
                load_module_of: Callable[[str, str], tuple[ModuleType, str]]) -> int:
    """Run the command; ``load_module_of`` is the CLI's loader of FILE.py:NAME targets."""
    from referee.calibrate._labels import load_labels
    from referee.calibrate._public import PUBLIC_SETS
    from referee.calibrate._render import print_console
    from referee.calibrate._run import calibrate, evaluator_by_name
    from referee.judge.panel import judge_from_cli
    from referee.store import LABELS_FILE

    if args.recheck:
        return run_recheck(args, load_module_of)
    if args.tolerance is not None:
        raise ValueError("--tolerance goes with --recheck")
    if args.retry_errors and args.resume is None:
        raise ValueError("--retry-errors goes with --resume RUN_DIR")
    if args.folds is not None and args.folds < 2:
        raise ValueError(f"--folds {args.folds}: cross-validation needs at least 2 folds")
    if (args.labels is None) == (args.from_run is None):
        raise ValueError("give either LABELS or --from-run RUN_DIR")
    if args.criterion is not None and args.from_run is None:
        raise ValueError("--criterion goes with --from-run RUN_DIR")
    if args.from_run is not None:
        if args.dataset != "labels":
            raise ValueError("--from-run reads the run's own labels; leave --dataset out")
        if not args.evaluator:
            raise ValueError("--evaluator is required (e.g. --evaluator faithfulness)")
        from referee.calibrate._from_run import labelled_cases_from_run

        rows = labelled_cases_from_run(args.from_run, criterion=args.criterion,
                                       evaluator_name=_evaluator_name(args.evaluator))
        default_evaluator = None
    elif args.dataset == "labels":
        rows = load_labels(args.labels, cutoff=args.cutoff)
        default_evaluator = None
    else:
        loader, default_evaluator = PUBLIC_SETS[args.dataset]
        rows = loader(args.labels)
    for row in rows:
        if row.missing:  # the other rows still replay
            print(f"referee: {row.missing}: the row is left out", file=sys.stderr)
    if args.limit is not None and args.limit < len(rows):
        rows = random.Random(args.seed).sample(rows, args.limit)
    spec = args.evaluator or default_evaluator
    if not spec:
        raise ValueError("--evaluator is required (e.g. --evaluator faithfulness)")
    evaluator = (_load_object(spec, load_module_of) if ":" in spec
                 else evaluator_by_name(spec))
    judge = judge_from_cli(args.judge, args.judge_aggregate, args.judge_quorum)
    report = calibrate(evaluator, rows, judge, metric=args.metric, folds=args.folds,
                       resamples=args.resamples, seed=args.seed, runs_dir=args.runs_dir,
                       resume=args.resume, retry_errors=args.retry_errors,
                       concurrency=args.concurrency,
                       labels=str(args.labels) if args.from_run is None
                       else f"{args.from_run}/{LABELS_FILE}",
                       judge_timeout=args.judge_timeout, judge_max_tokens=args.judge_max_tokens,
                       judge_max_retries=args.judge_max_retries)
    written = None
    refused = report.fit_problem is not None and not args.force
    if not args.no_write and report.threshold.value is not None and not refused \
            and not report.is_panel:
        written = report.write_calibration_file(args.calibration_file, force=args.force)
    if args.json:
        print(report.to_json())
    elif args.quiet:
        kappa = report.agreement.kappa.value
        print(f"{report.evaluator} by {report.judge}: threshold {report.threshold.value}, "
              f"kappa {'n/a' if kappa is None else f'{kappa:.2f}'}, {report.scored} of "
              f"{report.rows} rows scored; run stored in {report.run_dir}")
    else:
        print_console(report)
        if written is not None:
            print(f"threshold recorded in {written}")
    if report.is_panel:
        from referee.calibrate._report import PANEL_NOT_RECORDED

        print(f"referee: {PANEL_NOT_RECORDED}", file=sys.stderr)
        if report.fit_problem is not None:
            from referee.calibrate._report import NOT_SEPARATED

            print(f"referee: {NOT_SEPARATED}: {report.fit_problem}", file=sys.stderr)
            # As for a single judge: a panel that cannot tell the labels apart fails, unless
            # the run was only a report (--no-write).
            return 0 if args.no_write else 1
        return 0
    if report.threshold.value is None:
        print(f"referee: no threshold was fitted: {args.metric} is undefined on the "
              f"{report.scored} scored row(s)", file=sys.stderr)
    elif report.fit_problem is not None:
        from referee.calibrate._report import NOT_SEPARATED

        if args.force and written is not None:
            outcome = f"recorded anyway (--force) in {written}"
        elif args.no_write:
            outcome = "nothing recorded (--no-write)"
        else:
            outcome = "no threshold recorded (--force records it anyway)"
        print(f"referee: {NOT_SEPARATED}: {report.fit_problem}; {outcome}", file=sys.stderr)
        return 1 if refused and not args.no_write else 0
    return 0


# Options of a calibration that a recheck, which reuses the entry's, does not take.
_NOT_WITH_RECHECK = ("labels", "from_run", "criterion", "folds", "cutoff", "limit", "resume",
                     "retry_errors", "no_write", "force", "judge_aggregate", "judge_quorum")


def run_recheck(args: argparse.Namespace,
                load_module_of: Callable[[str, str], tuple[ModuleType, str]]) -> int:
    """``--recheck``: each chosen entry's canary judged again; 1 when any one drifted."""
    import json

    from referee.calibrate._recheck import DEFAULT_TOLERANCE, entries_to_recheck, recheck
    from referee.calibrate._run import criterion_name, evaluator_by_name
    from referee.evaluators.calibration import calibration_file_path, read_calibration_file
    from referee.terminal import terminal_safe

    given = [name for name in _NOT_WITH_RECHECK if getattr(args, name) not in (None, False)]
    if given:
        shown = "LABELS" if given[0] == "labels" else "--" + given[0].replace("_", "-")
        raise ValueError(f"{shown} does not go with --recheck (it rechecks the calibration "
                         "file's entries)")
    location = calibration_file_path(args.calibration_file)
    if not location.exists():
        raise ValueError(f"{location}: no such calibration file to recheck")
    custom = None
    if args.evaluator and ":" in args.evaluator:
        custom = _load_object(args.evaluator, load_module_of)
    wanted = (criterion_name(custom) if custom is not None
              else _evaluator_name(args.evaluator) if args.evaluator else None)
    entries = entries_to_recheck(read_calibration_file(location).entries, evaluator=wanted,
                                 judge=args.judge)
    if not entries:
        raise ValueError(f"{location} has no entry"
                         + (f" for {wanted}" if wanted else "")
                         + (f" judged by {' or '.join(args.judge)}" if args.judge else ""))
    results = []
    for entry in entries:
        if not entry.canary:
            print(f"referee: {entry.evaluator} by {entry.judge_provider}/{entry.judge_model}: "
                  "no canary rows kept (calibrated before referee kept them); calibrate again "
                  "to recheck it later", file=sys.stderr)
            continue
        if custom is not None:
            evaluator = custom
        else:
            try:
                evaluator = evaluator_by_name(entry.evaluator)
            except ValueError:
                raise ValueError(f"{entry.evaluator} is not a built-in evaluator: give it with "
                                 "--evaluator FILE.py:OBJECT to recheck its entry") from None
        results.append(recheck(evaluator, entry,
                               tolerance=DEFAULT_TOLERANCE if args.tolerance is None
                               else args.tolerance,
                               runs_dir=args.runs_dir, concurrency=args.concurrency,
                               judge_timeout=args.judge_timeout,
                               judge_max_tokens=args.judge_max_tokens,
                               judge_max_retries=args.judge_max_retries))
    if not results:
        raise ValueError(f"no entry of {location} keeps canary rows to recheck")
    if args.json:
        print(json.dumps([r.to_dict() for r in results], indent=2, ensure_ascii=False))
    else:
        for result in results:
            print(terminal_safe(result.describe()))
    return 1 if any(r.problems for r in results) else 0
