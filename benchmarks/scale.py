"""Memory and disk of a large deterministic run on the local engine (issue 14's W-scale).

    python -m benchmarks.scale --cases 10000 100000          # one fresh subprocess per size
    python -m benchmarks.scale --cases 1000000 --out benchmarks/results/scale-1m.json

Each size runs in its own subprocess, so ``ru_maxrss`` is that run's peak alone. The suite is
the multivon-style ``EvalSuite`` with ``Contains`` and the tool-trajectory criterion (IN_ORDER,
arguments checked); each case carries about 500 characters of its own text (input, expected
output, expected tool calls), and the model answers from the case's index without any I/O.
Cases are built on demand (``EvalSuite.stream_cases``), as a case file or database would
supply them, so the numbers are the run's own cost, not a list of a million cases.

Reported per size: wall time, peak RSS, RSS after import (the baseline), cases.jsonl and
report.json bytes, and disk bytes per case beyond the case's own text (the JSON of its
EvalCase). Standard library only, apart from referee itself.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, overload

from benchmarks.measure import peak_rss_kb

KEYWORD = "refund"


def _tool_calls(index: int) -> list[dict[str, Any]]:
    order_id = f"A{100000 + index}"
    return [
        {"name": "lookup_order", "args": {"order_id": order_id}},
        {"name": "check_policy", "args": {"order_id": order_id, "reason": "damaged"}},
        {"name": "issue_refund", "args": {"order_id": order_id, "amount": 10 + index % 90}},
    ]


def _case_input(index: int) -> str:
    return (f"Case {index}: my order A{100000 + index} arrived damaged and the box was open; "
            "the invoice says it was shipped last week. Can I get a refund, and how long will it "
            "take to reach my card? I paid with the same card I use for every order.")


class GeneratedCases(Sequence[Any]):
    """``count`` cases, each built when indexed; case ``i`` is the same on every access."""

    def __init__(self, count: int) -> None:
        self.count = count

    def __len__(self) -> int:
        return self.count

    @overload
    def __getitem__(self, i: int) -> Any: ...
    @overload
    def __getitem__(self, i: slice) -> list[Any]: ...

    def __getitem__(self, i: int | slice) -> Any:
        from referee import EvalCase, ToolCall

        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.count))]
        if not -self.count <= i < self.count:
            raise IndexError(i)
        i %= self.count
        return EvalCase.single_turn(
            _case_input(i), f"Your refund for order A{100000 + i} has been issued.",
            expected_tool_trajectory=[ToolCall(**t) for t in _tool_calls(i)])


def model(user_message: str) -> Any:
    from referee import ExecutionResult, ToolCall

    index = int(user_message.split(":", 1)[0].split()[1])
    calls = _tool_calls(index)
    calls.insert(1, {"name": "lookup_customer", "args": {"order_id": f"A{100000 + index}"}})
    return ExecutionResult(actual_response=f"I issued a {KEYWORD} for order A{100000 + index}.",
                           tool_calls=[ToolCall(**t) for t in calls])


def run_one(cases: int, runs_dir: Path, reports: bool = True) -> dict[str, Any]:
    from referee import EvalSuite
    from referee.config import CriterionConfig, MatchType
    from referee.criteria.trajectory import TrajectoryMatchCriterion
    from referee.evaluators.deterministic import Contains

    baseline = peak_rss_kb()
    suite = EvalSuite("scale", model_id="scripted").stream_cases(GeneratedCases(cases))
    suite.add_evaluators(Contains([KEYWORD]), TrajectoryMatchCriterion(
        CriterionConfig.trajectory(threshold=1.0, match_type=MatchType.IN_ORDER, check_args=True)))
    started = time.perf_counter()
    # formats=[]: the run store alone (a stored run writes its reports by default); the
    # reports are measured on their own below.
    report = suite.run(model, verbose=False, runs_dir=runs_dir, concurrency=8, formats=[])
    wall = time.perf_counter() - started
    run_dir = Path(report.metadata["run_dir"])
    files = {p.name: p.stat().st_size for p in run_dir.iterdir()}  # the run store alone
    disk = sum(files.values())
    own = _own_text_per_case(run_dir / "cases.jsonl")
    run_peak = peak_rss_kb()

    # Reading it back as `referee view` and the reports do: load, then the JSON and HTML files.
    from referee.report.writers import write_reports
    from referee.store import load_run

    started = time.perf_counter()
    loaded = load_run(run_dir)
    assert loaded.total == cases and loaded.passed == report.passed
    written = write_reports(loaded, run_dir, ["json", "html"]) if reports else {}
    reports_wall = time.perf_counter() - started
    return {
        "cases": cases, "passed": report.passed, "total": report.total,
        "wall_s": round(wall, 2), "rss_peak_mb": round(run_peak / 1024, 1),
        "reports_wall_s": round(reports_wall, 2),
        "rss_peak_with_reports_mb": round(peak_rss_kb() / 1024, 1),
        "report_files_bytes": {name: p.stat().st_size for name, p in written.items()},
        "rss_baseline_mb": round(baseline / 1024, 1),
        "files_bytes": files,
        "disk_bytes_per_case": round(disk / cases),
        "case_text_bytes_per_case": round(own),
        "disk_bytes_per_case_beyond_case_text": round(disk / cases - own),
    }


def _own_text_per_case(cases_jsonl: Path, sample: int = 1000) -> float:
    """Mean bytes of a case's own text as stored: the case and what the model returned."""
    sizes = []
    with open(cases_jsonl, encoding="utf-8") as fh:
        for line, _ in zip(fh, range(sample)):
            record = json.loads(line)
            sizes.append(sum(len(json.dumps(record[k], ensure_ascii=False, separators=(",", ":")))
                             for k in ("case", "execution")))
    return sum(sizes) / len(sizes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("--no-reports", action="store_true",
                        help="measure the run and load_run only, not the JSON/HTML reports")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # the subprocess
    args = parser.parse_args()
    if args.one:
        with tempfile.TemporaryDirectory(prefix="referee-scale-") as tmp:
            print(json.dumps(run_one(args.cases[0], Path(tmp), not args.no_reports)))
        return
    results = []
    for n in args.cases:
        command = [sys.executable, "-m", "benchmarks.scale", "--one", "--cases", str(n)]
        out = subprocess.run(command + ["--no-reports"] * args.no_reports,
                             check=True, capture_output=True, text=True).stdout
        row = json.loads(out.strip().splitlines()[-1])
        results.append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
