"""What every system runner measures about itself, and how it hands the numbers back.

Each (system, workload) pair runs in a fresh subprocess, so ``ru_maxrss`` is that system's own
peak. The runner records its resident set right after importing the system (the baseline every
case adds to), times only the evaluation call, and writes one JSON object to ``--out``.
Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


def peak_rss_kb() -> int:
    # Linux reports kilobytes, macOS bytes.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass
class RunnerResult:
    system: str
    workload: str
    cases: int
    wall_s: float = 0.0
    cpu_s: float = 0.0
    rss_peak_kb: int = 0
    rss_baseline_kb: int = 0
    report_bytes: int = 0
    evaluations: int = 0          # (case, evaluator) results produced
    passed_evaluations: int = 0
    errored_evaluations: int = 0
    errored_cases: int = 0        # cases with at least one errored evaluation: lost to an error
    settings: str = ""            # the concurrency/cache settings used, in words
    # W2 only: the same (case, criterion) evaluations called directly, without the runner around
    # them, so the table can separate the criteria's own cost from the engine's.
    criteria_only_evaluations: int = 0
    criteria_only_cpu_s: float = 0.0
    # Judge requests the timed run made itself (its report's count, cache hits excluded).
    live_judge_requests: int = 0
    # CPU of the thread that timed the run, on its own: for referee the event loop's thread
    # (EvalSuite.run runs its loop on the calling thread). cpu_s less this is what the other
    # threads spent (sync model calls, the judge cache's writer).
    thread_cpu_s: float = 0.0
    notes: list[str] = field(default_factory=list)


class Stopwatch:
    """Wall and CPU time of one block (the process's, and the calling thread's alone); with
    ``profile``, also a cProfile of it written there.

    The profile's clock is the process's CPU time, so time spent waiting on the judge is not
    counted and what it shows is where the CPU went.
    """

    def __init__(self, profile: str = "") -> None:
        self._profile_path = profile
        self._profiler: Any = None

    def __enter__(self) -> Stopwatch:
        if self._profile_path:
            import cProfile

            self._profiler = cProfile.Profile(time.process_time)
            self._profiler.enable()
        self._wall, self._cpu = time.perf_counter(), cpu_seconds()
        self._thread_cpu = time.thread_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall_s = time.perf_counter() - self._wall
        self.cpu_s = cpu_seconds() - self._cpu
        self.thread_cpu_s = time.thread_time() - self._thread_cpu
        if self._profiler is not None:
            self._profiler.disable()
            self._profiler.dump_stats(self._profile_path)


def runner_args(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--workload", choices=("rag", "long-rag", "agent"), required=True)
    parser.add_argument("--cases", type=int, required=True)
    parser.add_argument("--base-url", default="", help="OpenAI-compatible judge endpoint (…/v1)")
    parser.add_argument("--cache-dir", default="", help="judge cache directory; empty: cache off")
    parser.add_argument("--batched", action="store_true", help="referee only: batched QAG mode")
    parser.add_argument("--case-batched", action="store_true",
                        help="referee only: one batched judge request per case")
    parser.add_argument("--provider", default="openai", choices=("openai", "anthropic", "google"),
                        help="referee only: the judge wire (the peers speak OpenAI's)")
    parser.add_argument("--structured-output", action="store_true",
                        help="referee only: JudgeConfig(structured_output=True)")
    parser.add_argument("--warmup-cases", type=int, default=0,
                        help="referee only: run this many other cases first, untimed, so the "
                             "timed run's CPU is the steady state (imports, clients excluded)")
    parser.add_argument("--profile", default="",
                        help="write a cProfile of the timed run, on a CPU clock, to this file")
    parser.add_argument("--report", required=True, help="where the system writes its JSON report")
    parser.add_argument("--out", required=True, help="where this runner writes its measurements")
    return parser.parse_args()


def write_result(result: RunnerResult, report_path: str, out: str) -> None:
    path = Path(report_path)
    result.report_bytes = path.stat().st_size if path.exists() else 0
    result.rss_peak_kb = peak_rss_kb()
    Path(out).write_text(json.dumps(asdict(result), indent=2))


def read_result(out: str | os.PathLike[str]) -> dict[str, Any]:
    return json.loads(Path(out).read_text())
