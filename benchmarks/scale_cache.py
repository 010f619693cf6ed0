"""Per-node judge caches on Ray: the hit rate of a rerun whose shards land on other nodes, before
and after `referee cache merge`.

    python -m benchmarks.scale_cache                       # about two minutes on 2 cores
    python -m benchmarks.scale_cache --nodes 3 --cases 300

A local Ray cluster of ``--nodes`` nodes (one CPU each) on this machine; each node keeps its own
judge cache file (``$REFEREE_CACHE_DIR`` set per node by a worker setup hook), as nodes with
their own disks would. A judged suite (Coherence: four judge requests a case) runs three times
against a scripted judge, in new run directories:

1. cold: every request reaches the judge and lands in the cache of the node that ran it;
2. rerun: Ray places the shards afresh, so a case finds its replies only if its shard landed on
   the node that ran it before;
3. after merging every node's file into every other (`referee cache merge SRC... --into DST`):
   every case finds its replies wherever it lands.

The hit rate is the share of judge requests answered from a cache (1 - requests reaching the
judge / requests of the cold run); "stayed" is the share of cases that ran on the same node as
in the cold run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CACHE_BASE_ENV = "REFEREE_BENCH_NODE_CACHES"


def per_node_cache() -> None:
    """Ray worker setup hook: this node's own cache directory."""
    import ray

    node = ray.get_runtime_context().get_node_id()[:12]
    os.environ["REFEREE_CACHE_DIR"] = str(Path(os.environ[CACHE_BASE_ENV]) / f"node-{node}")


class NodeLogged:
    """The model: answers at once and logs which node ran each case."""

    def __init__(self, log: str) -> None:
        self.log = log

    def __call__(self, question: str) -> str:
        import ray

        with open(self.log, "a", encoding="utf-8") as fh:
            fh.write(f"{question} {ray.get_runtime_context().get_node_id()[:12]}\n")
        return f"The answer to {question} is 42."


def _placement(log: Path) -> dict[str, str]:
    return dict(line.rsplit(" ", 1) for line in log.read_text().splitlines())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--shard-size", type=int, default=10)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    import ray
    from ray.cluster_utils import Cluster

    from referee import EvalCase, EvalSuite
    from referee.evaluators import Coherence
    from referee.scale import RayBackend
    from referee.testing import ScriptedJudgeServer

    work = Path(tempfile.mkdtemp(prefix="referee-scale-cache-"))
    caches = work / "caches"
    os.environ[CACHE_BASE_ENV] = str(caches)
    load_before = os.getloadavg()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    for _ in range(args.nodes - 1):
        cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, log_to_driver=False, runtime_env={
        "env_vars": {"PYTHONPATH": str(ROOT), CACHE_BASE_ENV: str(caches)},
        "worker_process_setup_hook": "benchmarks.scale_cache.per_node_cache"})
    results: dict[str, Any] = {"nodes": args.nodes, "cases": args.cases,
                               "shard_size": args.shard_size, "runs": [],
                               "load_average_before": [round(x, 1) for x in load_before]}
    with ScriptedJudgeServer("Yes") as server:
        judge = server.judge_config(cache=True)
        cases = [EvalCase(input=f"question-{i}") for i in range(args.cases)]

        def run(label: str) -> dict[str, Any]:
            log = work / f"{label}.log"
            before = server.request_count
            started = time.perf_counter()
            suite = EvalSuite("cached").add_cases(cases).add_evaluator(Coherence(judge=judge))
            report = suite.run(NodeLogged(str(log)), verbose=False, runs_dir=work / "runs",
                               backend=RayBackend(shard_size=args.shard_size))
            assert report.total == args.cases and report.errors == 0, report.errors
            row = {"run": label, "wall_s": round(time.perf_counter() - started, 1),
                   "judge_requests": server.request_count - before,
                   "placement": _placement(log)}
            return row

        cold = run("cold")
        rows = [cold, run("rerun")]
        files = sorted(str(p) for p in caches.glob("node-*/judge_cache.sqlite3"))
        merge_commands = []
        for target in files:
            command = ["referee", "cache", "merge", *[f for f in files if f != target],
                       "--into", target]
            subprocess.run([sys.executable, "-m", "referee", *command[1:]], check=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True)
            merge_commands.append(" ".join(command))
        rows.append(run("after_merge"))
    first = dict(cold["placement"])
    for row in rows:
        placement = row.pop("placement")
        stayed = sum(placement[q] == first.get(q) for q in placement) / len(placement)
        row["cases_on_the_same_node_as_cold"] = round(stayed, 3)
        row["hit_rate"] = round(1 - row["judge_requests"] / cold["judge_requests"], 3)
        results["runs"].append(row)
        print(json.dumps(row), flush=True)
    results["node_cache_files"] = len(files)
    results["merge_command_example"] = merge_commands[0] if merge_commands else ""
    results["load_average_after"] = [round(x, 1) for x in os.getloadavg()]
    print(json.dumps({k: v for k, v in results.items() if k != "runs"}), flush=True)
    ray.shutdown()
    cluster.shutdown()
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
