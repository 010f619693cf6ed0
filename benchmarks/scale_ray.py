"""The Ray backend on a local cluster: per-shard overhead, and throughput as workers grow.

    python -m benchmarks.scale_ray                     # about two minutes on 2 cores
    python -m benchmarks.scale_ray --cpus 2 --cases 2000 --agent-ms 10

Two measurements, one ``ray.init(num_cpus=--cpus)`` cluster:

* overhead: an instant model over ``--cases`` cases, one shard at a time, for several shard
  sizes; (Ray wall - local wall) / shards is what one shard costs beyond running its cases.
* throughput: a model that waits ``--agent-ms`` per case (an agent calling tools; the worker's
  CPU is idle meanwhile), one case at a time per task, with 1, 2, 4 and 8 workers at once.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def instant(question: str) -> str:
    return "answer " + question


class Waiting:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self, question: str) -> str:
        time.sleep(self.seconds)
        return "answer " + question


def _suite(count: int) -> Any:
    from referee import EvalCase, EvalSuite
    from referee.evaluators.deterministic import Contains

    return EvalSuite("bench").add_cases(
        [EvalCase(input=f"question {i}") for i in range(count)]).add_evaluator(Contains(["answer"]))


def _timed(count: int, model: Any, runs: Path, **kwargs: Any) -> float:
    suite = _suite(count)
    started = time.perf_counter()
    report = suite.run(model, verbose=False, runs_dir=runs, **kwargs)
    wall = time.perf_counter() - started
    assert report.total == count and report.errors == 0
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--agent-ms", type=float, default=10.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    import ray

    from referee.scale import RayBackend

    root = str(Path(__file__).resolve().parents[1])
    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": root}})
    runs = Path(tempfile.mkdtemp(prefix="referee-scale-ray-"))
    results: dict[str, Any] = {"cpus": args.cpus, "cases": args.cases, "overhead": [],
                               "throughput": []}
    local = _timed(args.cases, instant, runs, concurrency=8)
    results["local_wall_s"] = round(local, 2)
    _timed(50, instant, runs, backend=RayBackend(shard_size=10))  # warm the workers up
    for shard in (10, 50, 200):
        wall = _timed(args.cases, instant, runs, concurrency=8,
                      backend=RayBackend(shard_size=shard, max_shards_in_flight=1))
        shards = -(-args.cases // shard)
        row = {"shard_size": shard, "shards": shards, "wall_s": round(wall, 2),
               "overhead_ms_per_shard": round((wall - local) / shards * 1000, 1)}
        results["overhead"].append(row)
        print(json.dumps(row), flush=True)
    count = max(40, int(args.cases / 5))
    for workers in (1, 2, 4, 8):
        wall = _timed(count, Waiting(args.agent_ms / 1000), runs, concurrency=1,
                      backend=RayBackend(shard_size=10, max_shards_in_flight=workers,
                                         task_cpus=args.cpus / workers))
        row = {"workers": workers, "cases": count, "wall_s": round(wall, 2),
               "cases_per_s": round(count / wall, 1),
               "ideal_cases_per_s": round(workers * 1000 / args.agent_ms, 1)}
        results["throughput"].append(row)
        print(json.dumps(row), flush=True)
    ray.shutdown()
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
