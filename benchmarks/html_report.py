"""How big the HTML report of a large run is, and how long Chromium takes to show it.

    python -m benchmarks.html_report                 # 2,000 cases (the target: < 5 MB, < 2 s)
    python -m benchmarks.html_report --cases 500 2000 5000 --repeats 3

The run is synthetic but shaped like a real one: a 200-character question, a 500-character
answer (words drawn at random from a 2,000-word vocabulary, so compression is not flattered by
repeated text), a three-call tool trajectory (one call with other arguments), a QAG evaluator with five
judged questions, a trajectory criterion and a keyword check. Two render times: the wall time of ``chromium --headless --dump-dom`` on the report minus the
same for an empty page, and the page's own ready time (navigation start to the load event with
layout forced, recorded by the page's script); each is the median of --repeats.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from referee.case import EvalCase, ToolCall
from referee.execution import ExecutionResult
from referee.record import CaseResult, CaseStatus, EvalReport
from referee.report.html import render_html
from referee.result import CriterionResult
from referee.usage import TokenUsage

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run",
                  "--disable-extensions"]


def _words(rng: random.Random, vocabulary: list[str], chars: int) -> str:
    out: list[str] = []
    while sum(len(w) + 1 for w in out) < chars:
        out.append(rng.choice(vocabulary))
    return " ".join(out)


def synthetic_report(n: int) -> EvalReport:
    rng = random.Random(0)
    vocabulary = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 10)))
                  for _ in range(2000)]
    expected = [ToolCall(name="lookup_order", args={"order_id": "1001"}),
                ToolCall(name="get_policy"), ToolCall(name="draft_reply", args={"tone": "warm"})]
    cases = []
    for i in range(n):
        failing = i % 7 == 0
        actual = list(expected)
        if failing:
            actual[0] = ToolCall(name="lookup_order", args={"order_id": "1002"})
        question = f"Case {i}: " + _words(rng, vocabulary, 200)
        answer = f"Order {1000 + i} shipped yesterday. " + _words(rng, vocabulary, 470)
        qag = CriterionResult(
            criterion="faithfulness", score=0.6 if failing else 1.0, passed=not failing,
            threshold=0.8, reason="3 of 5 questions answered yes" if failing else "5 of 5",
            details={"questions": [{"question": f"Does the answer state that {_words(rng, vocabulary, 40)}?",
                                    "verdict": "no" if failing and q < 2 else "yes",
                                    "reply": "Yes." if q % 2 else "Yes, it says so."}
                                   for q in range(5)]})
        trajectory = CriterionResult(criterion="tool_trajectory_avg_score",
                                     score=0.67 if failing else 1.0, passed=not failing,
                                     threshold=1.0)
        keywords = CriterionResult(criterion="contains", score=1.0, passed=True, threshold=1.0)
        cases.append(CaseResult(
            index=i, eval_id=f"case-{i:06d}", status=CaseStatus.FAILED if failing else CaseStatus.PASSED,
            case=EvalCase.single_turn(question, "Your order shipped; returns within 30 days.",
                                      expected_tool_trajectory=expected),
            execution=ExecutionResult(actual_response=answer, tool_calls=actual),
            criterion_results=[qag, trajectory, keywords], duration_seconds=0.4 + (i % 13) / 10,
            token_usage=TokenUsage(input_tokens=1800, output_tokens=40, requests=5, cost_usd=0.0003)))
    return EvalReport(name=f"synthetic-{n}", model_id="bench", cases=cases, finished_at=time.time())


def _chromium_seconds(path: Path, profile: Path) -> tuple[float, float | None]:
    """(wall seconds of the whole chromium process, the page's own ready time in seconds).

    The page's own time is what its script records at the load event after forcing a layout
    (``data-ready-ms``, from navigation start): browser start-up is not in it.
    """
    import re
    from shutil import which

    binary = which("chromium") or which("chromium-browser") or which("google-chrome")
    if binary is None:
        raise SystemExit("chromium is not installed (apt-get install chromium)")
    start = time.perf_counter()
    proc = subprocess.run([binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom",
                           path.as_uri()], capture_output=True, check=True, timeout=300, text=True)
    wall = time.perf_counter() - start
    ready = re.search(r'data-ready-ms="(\d+)"', proc.stdout)
    return wall, int(ready.group(1)) / 1000 if ready else None


def measure(sizes: list[int], repeats: int) -> list[dict[str, float]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        empty = folder / "empty.html"
        empty.write_text("<!DOCTYPE html><title>empty</title>", encoding="utf-8")
        baseline = statistics.median(_chromium_seconds(empty, folder / "p0")[0]
                                     for _ in range(repeats))
        for n in sizes:
            report = synthetic_report(n)
            started = time.perf_counter()
            page = render_html(report)
            build = time.perf_counter() - started
            path = folder / f"report-{n}.html"
            path.write_text(page, encoding="utf-8")
            runs = [_chromium_seconds(path, folder / f"p{n}") for _ in range(repeats)]
            load = statistics.median(wall for wall, _ in runs)
            ready = [r for _, r in runs if r is not None]
            rows.append({"cases": n, "bytes": len(page.encode("utf-8")),
                         "render_python_s": round(build, 3),
                         "chromium_load_s": round(max(0.0, load - baseline), 3),
                         "page_ready_s": round(statistics.median(ready), 3) if ready else None,
                         "chromium_baseline_s": round(baseline, 3)})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, nargs="+", default=[2000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    rows = measure(args.cases, args.repeats)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'cases':>7} {'size MB':>8} {'python s':>9} {'chromium s':>11} {'page ready s':>13}")
    for row in rows:
        ready = f"{row['page_ready_s']:.2f}" if row["page_ready_s"] is not None else "-"
        print(f"{row['cases']:>7} {row['bytes'] / 1e6:>8.2f} {row['render_python_s']:>9.2f} "
              f"{row['chromium_load_s']:>11.2f} {ready:>13}")
    print(f"(chromium start-up, subtracted: {rows[0]['chromium_baseline_s']:.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
