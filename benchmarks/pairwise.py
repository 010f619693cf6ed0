"""Judge requests and tokens per case of pairwise judging, side by side, in one run.

    PYTHONPATH=$PWD python3 -m benchmarks.pairwise                  # 50 cases, ~120-word outputs
    PYTHONPATH=$PWD python3 -m benchmarks.pairwise --cases 200 --words 300 --json results.json

Two stored-run-shaped reports (A and B) of ``--cases`` cases with outputs of about ``--words``
words are compared through the scripted judge server (the real OpenAI SDK over loopback):

- pairwise, both orders (the default), then the same again with the reply cache on (a rerun);
- pairwise, one order (``both_orders=False``);
- what users do without pairwise judging: GEval (2 runs, its default) on A's and on B's output
  separately, compared by score.

Tokens are what referee's judge layer accounted (the scripted server counts about 4 characters
a token, as referee estimates); a reply is a one-sentence reason and a winner (or a score).
Standard library plus referee.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from referee import EvalCase, ExecutionResult, GEval
from referee.pairwise import compare_runs_async
from referee.record import CaseResult, CaseStatus, EvalReport
from referee.run.sync import run_sync
from referee.testing import ScriptedJudgeServer
from referee.usage import TokenUsage

CRITERION = "The answer is correct, complete and clearly written."
REASON = ("Response 2 states the figure with its source and answers the whole question, while "
          "response 1 leaves the second part unanswered.")


def words(rng: random.Random, count: int) -> str:
    vocabulary = ["the", "model", "answer", "cites", "revenue", "growth", "quarter", "margin", "source", "figure", "because", "customers", "region", "product", "forecast", "risk", "plan", "team", "result"]
    return " ".join(rng.choice(vocabulary) for _ in range(count))


def reports(cases: int, count: int) -> tuple[EvalReport, EvalReport]:
    rng = random.Random(24)
    questions = [f"Question {i}: {words(rng, 25)}?" for i in range(cases)]

    def run(name: str) -> EvalReport:
        return EvalReport(name=name, cases=[
            CaseResult(index=i, eval_id=f"case-{i}", status=CaseStatus.PASSED,
                       case=EvalCase(input=q, eval_id=f"case-{i}"),
                       execution=ExecutionResult(actual_response=words(rng, count)))
            for i, q in enumerate(questions)])

    return run("A"), run("B")


def reply(request: Any) -> str:
    if "RESPONSE 1" in request.prompt:
        return json.dumps({"reason": REASON, "winner": random.Random(request.prompt).choice("12")})
    return json.dumps({"score": 0.7, "reason": REASON})


def per_case(usage: TokenUsage, cases: int) -> dict[str, float]:
    return {"requests": usage.requests / cases, "input_tokens": usage.input_tokens / cases,
            "output_tokens": usage.output_tokens / cases,
            "cached_requests": usage.cached_requests / cases}


async def measure(cases: int, count: int) -> dict[str, dict[str, float]]:
    a, b = reports(cases, count)
    rows: dict[str, dict[str, float]] = {}
    with ScriptedJudgeServer(reply=reply) as server, tempfile.TemporaryDirectory() as tmp:
        cfg = server.judge_config()
        both = await compare_runs_async(a, b, CRITERION, judge=cfg)
        rows["pairwise, both orders (default)"] = per_case(both.token_usage, cases)
        one = await compare_runs_async(a, b, CRITERION, judge=cfg, both_orders=False)
        rows["pairwise, one order"] = per_case(one.token_usage, cases)
        cached = cfg.model_copy(update={"cache": True, "cache_path": str(Path(tmp) / "c.db")})
        await compare_runs_async(a, b, CRITERION, judge=cached)
        before = server.request_count
        rerun = await compare_runs_async(a, b, CRITERION, judge=cached)
        assert server.request_count == before, "a cached rerun sent requests"
        rows["pairwise, both orders, rerun from the reply cache"] = per_case(
            rerun.token_usage, cases)
        geval = GEval(criteria=CRITERION, judge=cfg)
        results = await asyncio.gather(*(geval.evaluate(c.execution, c.case)
                                         for run in (a, b) for c in run.cases))
        rows["GEval on A and on B separately (runs=2)"] = per_case(
            TokenUsage.total([r.token_usage for r in results]), cases)
    return rows


def per_case_table(doc: str, measure: Callable[[int, int], Awaitable[dict[str, dict[str, float]]]]
                   ) -> None:
    """The command line of a per-case cost benchmark: --cases, --words, --json; a table."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--cases", type=int, default=50)
    parser.add_argument("--words", type=int, default=120, help="words per model output")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    args = parser.parse_args()
    rows = run_sync(measure(args.cases, args.words))  # closes the judge clients of its loop
    print(f"{args.cases} cases, outputs of {args.words} words; per case:")
    print("| | judge requests | input tokens | output tokens | served by the reply cache |")
    print("|---|---|---|---|---|")
    for name, row in rows.items():
        print(f"| {name} | {row['requests']:.1f} | {row['input_tokens']:,.0f} | "
              f"{row['output_tokens']:,.0f} | {row['cached_requests']:.1f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


def main() -> None:
    per_case_table(__doc__ or "", measure)


if __name__ == "__main__":
    main()
