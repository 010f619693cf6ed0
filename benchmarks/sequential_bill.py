"""The judge bill of a sequential gate against the full run, side by side, in one run.

    PYTHONPATH=$PWD python3 -m benchmarks.sequential_bill                  # 1,000 cases
    PYTHONPATH=$PWD python3 -m benchmarks.sequential_bill --cases 400 --json results.json

A suite of ``--cases`` cases is scored by GEval (runs=1) through the scripted judge server (the
real OpenAI SDK over loopback); each output is good with the true pass rate (seeded) and the
judge scores good outputs 1.0 and bad ones 0.0. For each true rate, the same suite runs with
``fail_threshold=0.8`` in full and with ``sequential=True`` (default concurrency: the cases
already running when the gate settles finish and are billed). Requests and tokens are what
referee's judge layer accounted. Standard library plus referee.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from pathlib import Path
from typing import Any

from referee import EvalCase, EvalSuite, GEval
from referee.errors import EvalGateFailure
from referee.record import EvalReport
from referee.run.sync import run_sync
from referee.testing import ScriptedJudgeServer

THRESHOLD = 0.8
RATES = (0.7, 0.9)
GOOD, BAD = "[good]", "[bad]"


def reply(request: Any) -> str:
    return json.dumps({"score": 1.0 if GOOD in request.prompt else 0.0, "reason": "scripted"})


def _pairs(cases: int, rate: float) -> list[tuple[EvalCase, str]]:
    rng = random.Random(f"bill:{rate}")
    return [(EvalCase(input=f"Question {i}: is the refund policy 30 days?"),
             f"{GOOD if rng.random() < rate else BAD} Refunds take 30 days, answer {i}.")
            for i in range(cases)]


async def _run(judge: Any, pairs: list[tuple[EvalCase, str]], runs_dir: Path,
               sequential: bool) -> EvalReport:
    suite = EvalSuite("sequential-bill").add_evaluator(
        GEval("Does the answer state the refund policy correctly?", runs=1, judge=judge,
              threshold=0.5))
    try:
        return await suite.run_on_cases_async(pairs, verbose=False, fail_threshold=THRESHOLD,
                                              sequential=sequential, runs_dir=runs_dir)
    except EvalGateFailure as failure:  # a rate below the threshold fails the gate, as it should
        assert failure.report is not None
        return failure.report  # type: ignore[return-value]  # the run's EvalReport


async def measure(cases: int) -> list[dict[str, Any]]:
    rows = []
    with ScriptedJudgeServer(reply=reply) as server, tempfile.TemporaryDirectory() as tmp:
        judge = server.judge_config()
        for rate in RATES:
            pairs = _pairs(cases, rate)
            for sequential in (False, True):
                report = await _run(judge, pairs, Path(tmp), sequential)
                usage = report.token_usage
                settled = report.metadata.get("sequential") or {}
                rows.append({"rate": rate, "run": "sequential" if sequential else "full",
                             "cases_judged": report.total, "requests": usage.requests,
                             "input_tokens": usage.input_tokens,
                             "output_tokens": usage.output_tokens,
                             "decision": settled.get("decision") or
                             ("pass" if report.pass_rate >= THRESHOLD else "fail")})
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    rows = run_sync(measure(args.cases))
    print(f"{args.cases} cases, fail_threshold {THRESHOLD}, GEval runs=1:")
    print("| true rate | run | decision | cases judged | judge requests | input tokens | "
          "output tokens | requests vs full |")
    print("|---|---|---|---|---|---|---|---|")
    full: dict[float, int] = {}
    for row in rows:
        full.setdefault(row["rate"], row["requests"])
        print(f"| {row['rate']:.2f} | {row['run']} | {row['decision']} | {row['cases_judged']:,} | "
              f"{row['requests']:,} | {row['input_tokens']:,} | {row['output_tokens']:,} | "
              f"{row['requests'] / full[row['rate']]:.2f}x |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
