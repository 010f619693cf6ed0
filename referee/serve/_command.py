"""``referee serve``: the command's options and what it does (cli.py only wires it in)."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

DESCRIPTION = """\
Score production traces as they arrive. An OTLP/HTTP receiver (protobuf and JSON, at
/v1/traces and /v1/logs), and with --grpc-port an OTLP/gRPC one beside it, that any
OpenTelemetry SDK or Collector exports to unchanged; the criteria of SUITE.py (its `suite`, an EvalSuite, or its `evaluator`, an AgentEvaluator) score
each trace, as `referee run SUITE.py --traces FILE` would. A trace whose id (or conversation
id) matches a case of the suite is paired with that case; any other is its own case.

Every accepted request is written to the spool (and synced) before the 200 goes out; a restart
replays the spool and scores each accepted trace exactly once. While the queue is full the
receiver answers 503 with Retry-After (gRPC: UNAVAILABLE with RetryInfo), and exporters
retry. A trace is scored once its root
span has ended and nothing more came for --quiet-period seconds; traces sharing
gen_ai.conversation.id (or session.id) are one case, scored once none of them came for
--conversation-quiet seconds.

Results go to one run per --window under --out, shown live by `referee view`; /metrics serves
Prometheus counters (cases scored, pass rate per criterion, judge spend, queue depth,
dropped = 0). --alert CRITERION=RATE reports (and --webhook posts) a window whose pass rate of
that criterion falls below RATE. Ctrl-C or SIGTERM stops it; the current window's report is
written. Exit codes: 0 stopped, 1 stopped by --exit-on-alert, 2 bad input."""

EXIT_ALERT = 1  # --exit-on-alert: a criterion's pass rate fell below its gate
DEFAULT_PORT = 4318  # the OTLP/HTTP port exporters use by default
DEFAULT_GRPC_PORT = 4317  # OTLP/gRPC's; the gRPC receiver listens only when asked
DEFAULT_SPOOL = Path(".referee") / "spool"


def _usd(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected an amount in USD (0 or more), got {text!r}")
    return value


def add_parser(sub: Any, *, port: Callable[[str], int], positive_int: Callable[[str], int],
               seconds: Callable[[str], float], fraction: Callable[[str], float]
               ) -> argparse.ArgumentParser:
    parser = sub.add_parser("serve", help="score production traces as they arrive (OTLP/HTTP, OTLP/gRPC)",
                            description=DESCRIPTION,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suite", metavar="SUITE.py",
                        help="a Python file defining `suite` (EvalSuite) or `evaluator` "
                             "(AgentEvaluator, with an optional `eval_set` to pair by id)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1; 0.0.0.0 for all)")
    parser.add_argument("--port", type=port, default=DEFAULT_PORT,
                        help=f"port (default {DEFAULT_PORT}, OTLP/HTTP's; 0: a free one)")
    parser.add_argument("--grpc-port", type=port, metavar="PORT",
                        help=f"also receive OTLP/gRPC on this port, on --host (off by default; "
                             f"{DEFAULT_GRPC_PORT} is OTLP/gRPC's; 0: a free one; needs the "
                             f"serve extra)")
    parser.add_argument("--spool", metavar="DIR", type=Path, default=DEFAULT_SPOOL,
                        help=f"where accepted requests are kept until scored (default "
                             f"{DEFAULT_SPOOL}); one serve process per spool")
    parser.add_argument("--out", "--runs-dir", dest="runs_dir", metavar="DIR",
                        help="runs directory (default .referee/runs or $REFEREE_RUNS_DIR)")
    parser.add_argument("--name", help="the runs' name (default: the suite's, else the file's)")
    parser.add_argument("--window", type=seconds, default=3600.0, metavar="SECONDS",
                        help="one run per window of this many seconds (default 3600)")
    parser.add_argument("--quiet-period", type=seconds, default=5.0, metavar="SECONDS",
                        help="a trace is complete this long after its last span, once its "
                             "root span ended (default 5)")
    parser.add_argument("--conversation-quiet", type=seconds, default=30.0, metavar="SECONDS",
                        help="traces sharing a conversation id are one case, scored once no "
                             "trace of it came for this long (default 30)")
    parser.add_argument("--trace-timeout", type=seconds, default=300.0, metavar="SECONDS",
                        help="a trace whose root span never comes is scored as it is after "
                             "this long (default 300)")
    parser.add_argument("--concurrency", type=positive_int, default=8,
                        help="cases scored at once (default 8)")
    parser.add_argument("--max-pending-spans", type=positive_int, default=100_000,
                        help="spans held in memory before the receiver answers 503 "
                             "(default 100000)")
    parser.add_argument("--max-queue", type=positive_int, default=1_000,
                        help="complete cases waiting to be scored before it answers 503 "
                             "(default 1000)")
    parser.add_argument("--sample", action="append", default=[], metavar="RULE",
                        help="KEY=VALUE[,KEY=VALUE...]:RATE, first match wins; keys: service, "
                             "route, agent, tag, error (e.g. 'route=/chat/*:0.1')")
    parser.add_argument("--sample-rate", type=fraction, default=1.0,
                        help="rate for traces no rule matches (default 1.0)")
    parser.add_argument("--no-always-errors", dest="always_errors", action="store_false",
                        help="let the rules sample traces with an error span too (default: "
                             "errors are always scored)")
    parser.add_argument("--no-always-marked", dest="always_marked", action="store_false",
                        help="let the rules sample traces marked referee.score=true too")
    parser.add_argument("--judge-budget-hour", type=_usd, metavar="USD",
                        help="judge spend cap over the last hour; past it judged criteria are "
                             "skipped for budget and deterministic ones still run")
    parser.add_argument("--judge-budget-day", type=_usd, metavar="USD",
                        help="judge spend cap over the last day")
    parser.add_argument("--alert", action="append", default=[], metavar="CRITERION=RATE",
                        help="alert when the criterion's pass rate over the current window "
                             "falls below RATE (once per window), e.g. faithfulness=0.9")
    parser.add_argument("--alert-min-cases", type=positive_int, default=20, metavar="N",
                        help="verdicts a window needs before its pass rate can alert "
                             "(default 20)")
    parser.add_argument("--webhook", metavar="URL",
                        help="POST each alert as JSON to this URL")
    parser.add_argument("--exit-on-alert", action="store_true",
                        help="stop at the first alert (exit code 1), after writing the "
                             "window's report")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    return parser


def _criteria_of(module: ModuleType, path: Path,
                 error: Callable[[str], Exception]) -> tuple[list[Any], list[Any], str]:
    """(criteria, cases to pair by id, name) of a suite file."""
    from referee.run.agent import AgentEvaluator, load_cases
    from referee.run.suite import EvalSuite

    suite, evaluator = getattr(module, "suite", None), getattr(module, "evaluator", None)
    if isinstance(suite, EvalSuite):
        return list(suite.evaluators), list(suite.cases or []), suite.name or path.stem
    if isinstance(evaluator, AgentEvaluator):
        eval_set = getattr(module, "eval_set", None)
        name, cases = load_cases(eval_set) if eval_set is not None else (None, None)
        return list(evaluator.criteria), list(cases or []), name or path.stem
    raise error(f"{path}: defines neither `suite` (an EvalSuite) nor `evaluator` (an "
                f"AgentEvaluator) whose criteria score the traces")


def run_serve(args: argparse.Namespace, *, load_python_file: Callable[[Path], ModuleType],
              error: Callable[[str], Exception]) -> int:
    from referee.serve._alerts import AlertRule
    from referee.serve._http import serve
    from referee.serve._sampling import Sampler, SamplingRule
    from referee.serve._scorer import OnlineScorer, ServeSettings

    if args.grpc_port is not None:
        from referee.serve._grpc import grpc_missing

        missing = grpc_missing()
        if missing is not None:
            raise error(f"--grpc-port: {missing}")
    path = Path(args.suite)
    criteria, cases, name = _criteria_of(load_python_file(path), path, error)
    if not criteria:
        raise error(f"{path}: the suite has no criteria to score traces with")
    from referee.run.session import default_runs_dir

    settings = ServeSettings(
        spool=args.spool, runs_dir=Path(args.runs_dir) if args.runs_dir else default_runs_dir(),
        name=args.name or name, window_s=args.window, quiet_period=args.quiet_period,
        conversation_quiet=args.conversation_quiet,
        trace_timeout=args.trace_timeout, concurrency=args.concurrency,
        max_pending_spans=args.max_pending_spans, max_queue=args.max_queue,
        sampler=Sampler(tuple(SamplingRule.parse(rule) for rule in args.sample),
                        args.sample_rate, args.always_errors, args.always_marked),
        spend_per_hour=args.judge_budget_hour, spend_per_day=args.judge_budget_day,
        alerts=tuple(AlertRule.parse(rule) for rule in args.alert),
        alert_min_cases=args.alert_min_cases, webhook=args.webhook)
    scorer = OnlineScorer(criteria, settings, cases=cases)
    labels = set(_labels(criteria))
    unknown = [rule.criterion for rule in settings.alerts if rule.criterion not in labels]
    if unknown:
        raise error(f"--alert {unknown[0]}: no such criterion in {path} (its criteria: "
                    f"{', '.join(sorted(labels))})")
    alerted: list[Any] = []
    grpc_addresses: list[str] = []

    def ready(url: str) -> None:
        if not args.quiet:
            grpc_text = "".join(f"; OTLP/gRPC {address}" for address in grpc_addresses)
            print(f"referee serve: listening on {url} (OTLP/HTTP {url}/v1/traces, "
                  f"{url}/v1/logs; Prometheus {url}/metrics){grpc_text}; spool "
                  f"{settings.spool}; runs under {settings.runs_dir}", file=sys.stderr,
                  flush=True)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        if args.exit_on_alert:
            def stop_on(alert: Any) -> None:
                alerted.append(alert)
                stop.set()

            scorer.on_alert = stop_on
        await serve(scorer, host=args.host, port=args.port, on_ready=ready, stop=stop,
                    grpc_port=args.grpc_port, on_grpc_ready=grpc_addresses.append)

    asyncio.run(main())
    if not args.quiet:
        print("referee serve: stopped; the current window's report is written",
              file=sys.stderr)
    return EXIT_ALERT if alerted else 0


def _labels(criteria: list[Any]) -> list[str]:
    from referee.criteria.base import criterion_label
    from referee.result import unique_labels

    return unique_labels([criterion_label(c) for c in criteria])
