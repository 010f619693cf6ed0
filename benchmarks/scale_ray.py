"""The Ray backend on a local cluster: per-shard overhead, and throughput as workers grow.

    python -m benchmarks.scale_ray                     # about four minutes on 2 cores
    python -m benchmarks.scale_ray --cpus 2 --cases 2000 --agent-ms 10

Three measurements, one ``ray.init(num_cpus=--cpus)`` cluster, each configuration warmed up
first (its worker processes started and the task function shipped), so that a row measures
the steady state rather than process start-up:

* overhead: an instant model over ``--cases`` cases, one shard at a time, for several shard
  sizes. The cost of one shard is the slope of wall time against the number of shards (the
  cases are the same in every row); (Ray wall - local wall) / shards is shown as well.
* throughput: a model that waits ``--agent-ms`` per case (an agent calling tools; the worker's
  CPU is idle meanwhile), one case at a time per task, with 1, 2, 4 and 8 workers at once.
* keeper: the most permits per second one endpoint's keeper hands out: ``--keeper-holders``
  budgets (as many worker processes would hold), each with 32 requests that lease a permit,
  hold it for ``--judge-ms`` and settle it, for 10 s; per-worker budgets are not involved.
* judge: a judged suite (Coherence, four requests a case) over 4 workers against a scripted
  judge answering in ``--judge-ms``, with one cluster-wide budget and with per-worker budgets:
  requests per second, the most in flight at the judge, and how many permits one lease call
  brought on average (the keeper's own counters).

Every row records the load average when it ended (the machine is shared).
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


def _load() -> float:
    return round(os.getloadavg()[0], 1)


def _timed(count: int, model: Any, runs: Path, suite: Any = None, **kwargs: Any) -> float:
    suite = suite or _suite(count)
    started = time.perf_counter()
    report = suite.run(model, verbose=False, runs_dir=runs, **kwargs)
    wall = time.perf_counter() - started
    assert report.total == count and report.errors == 0
    return wall


def _judged(runs: Path, judge_ms: float, cpus: int) -> list[dict[str, Any]]:
    """Judged cases over 4 workers: one cluster budget against one budget per worker."""
    import hashlib

    import ray

    from referee import EvalCase, EvalSuite
    from referee.evaluators import Coherence
    from referee.judge.limiter import EndpointIdentity
    from referee.judge.providers import adapter_for
    from referee.scale import RayBackend
    from referee.scale._budget import KEEPER_NAMESPACE, keeper_name
    from referee.testing import Reply, ScriptedJudgeServer

    rows = []
    for cluster_budget in (True, False):
        with ScriptedJudgeServer(Reply("Yes", latency_s=judge_ms / 1000)) as server:
            judge = server.judge_config(max_concurrency=16)
            cases = [EvalCase(input=f"question {i}") for i in range(200)]
            suite = EvalSuite("judged").add_cases(cases).add_evaluator(Coherence(judge=judge))
            backend = dict(shard_size=10, max_shards_in_flight=4, task_cpus=cpus / 4,
                           cluster_judge_budget=cluster_budget)
            _timed(40, instant, runs, concurrency=4, backend=RayBackend(**backend),
                   suite=EvalSuite("warm").add_cases(cases[:40]).add_evaluator(
                       Coherence(judge=judge)))
            before = server.request_count
            server.reset_record()
            wall = _timed(200, instant, runs, concurrency=4, suite=suite,
                          backend=RayBackend(**backend))
            requests = server.request_count
            row: dict[str, Any] = {
                "cluster_budget": cluster_budget, "max_concurrency": 16, "workers": 4,
                "judge_requests": requests, "wall_s": round(wall, 2),
                "requests_per_s": round(requests / wall, 1),
                "max_in_flight": server.max_in_flight, "load": _load()}
            if cluster_budget:
                base_url, key = adapter_for(judge.provider).credentials(judge)
                identity = EndpointIdentity(judge.provider, base_url, hashlib.sha256(
                    (key or "").encode("utf-8")).hexdigest())
                keeper = ray.get_actor(keeper_name(identity), namespace=KEEPER_NAMESPACE)
                stats = ray.get(keeper.stats.remote())
                row["permits_per_lease_call"] = round(stats["granted"] / stats["lease_calls"], 2)
                row["warm_up_requests"] = before
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def _keeper_capacity(holders: int, hold_ms: float, seconds: float = 10.0) -> dict[str, Any]:
    """Permits per second through one keeper, with ``holders`` budgets leasing at once."""
    import asyncio
    import threading

    import ray

    from referee.judge.limiter import BudgetSettings, EndpointIdentity, Outcome
    from referee.scale._budget import KEEPER_NAMESPACE, ClusterBudget, keeper_name

    endpoint = EndpointIdentity("openai", f"http://127.0.0.1:9/keeper-{time.time()}", "fp")
    settings = BudgetSettings(max_concurrency=10_000, pinned=True)
    counts = [0] * holders

    def holder(slot: int) -> None:
        budget = ClusterBudget(settings, endpoint)

        async def one(deadline: float) -> None:
            while time.monotonic() < deadline:
                permit = await budget.lease(100)
                await asyncio.sleep(hold_ms / 1000)
                budget.settle(permit, Outcome("ok", latency_s=hold_ms / 1000, tokens=100))
                counts[slot] += 1

        async def many() -> None:
            deadline = time.monotonic() + seconds
            await asyncio.gather(*(one(deadline) for _ in range(32)))

        asyncio.run(many())

    threads = [threading.Thread(target=holder, args=(i,)) for i in range(holders)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    keeper = ray.get_actor(keeper_name(endpoint), namespace=KEEPER_NAMESPACE)
    stats = ray.get(keeper.stats.remote())
    ray.kill(keeper)
    row = {"holders": holders, "requests_at_once": 32 * holders, "hold_ms": hold_ms,
           "permits": sum(counts), "permits_per_s": round(sum(counts) / wall, 1),
           "permits_per_lease_call": round(stats["granted"] / max(stats["lease_calls"], 1), 2),
           "load": _load()}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--agent-ms", type=float, default=10.0)
    parser.add_argument("--judge-ms", type=float, default=50.0)
    parser.add_argument("--keeper-holders", type=int, default=4)
    parser.add_argument("--parts", default="overhead,throughput,keeper,judge",
                        help="which measurements to run, comma-separated")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    import ray

    from referee.scale import RayBackend

    root = str(Path(__file__).resolve().parents[1])
    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": root}})
    runs = Path(tempfile.mkdtemp(prefix="referee-scale-ray-"))
    results: dict[str, Any] = {"cpus": args.cpus, "cases": args.cases, "overhead": [],
                               "throughput": [], "load_at_start": _load()}
    parts = set(args.parts.split(","))
    local = _timed(args.cases, instant, runs, concurrency=8)
    results["local_wall_s"] = round(local, 2)
    for shard in (10, 50, 200) if "overhead" in parts else ():
        backend = dict(shard_size=shard, max_shards_in_flight=1)
        _timed(2 * shard, instant, runs, backend=RayBackend(**backend))  # warm up
        wall = _timed(args.cases, instant, runs, concurrency=8, backend=RayBackend(**backend))
        shards = -(-args.cases // shard)
        row = {"shard_size": shard, "shards": shards, "wall_s": round(wall, 2),
               "beyond_local_ms_per_shard": round((wall - local) / shards * 1000, 1),
               "load": _load()}
        results["overhead"].append(row)
        print(json.dumps(row), flush=True)
    if results["overhead"]:
        first, last = results["overhead"][0], results["overhead"][-1]
        results["ms_per_shard_slope"] = round(
            (first["wall_s"] - last["wall_s"]) / (first["shards"] - last["shards"]) * 1000, 1)
        print(json.dumps({"ms_per_shard_slope": results["ms_per_shard_slope"]}), flush=True)
    count = max(40, int(args.cases / 5))
    for workers in (1, 2, 4, 8) if "throughput" in parts else ():
        backend = dict(shard_size=10, max_shards_in_flight=workers, task_cpus=args.cpus / workers)
        waiting = Waiting(args.agent_ms / 1000)
        _timed(10 * workers, waiting, runs, concurrency=1, backend=RayBackend(**backend))
        wall = _timed(count, waiting, runs, concurrency=1, backend=RayBackend(**backend))
        row = {"workers": workers, "cases": count, "wall_s": round(wall, 2),
               "cases_per_s": round(count / wall, 1),
               "ideal_cases_per_s": round(workers * 1000 / args.agent_ms, 1), "load": _load()}
        results["throughput"].append(row)
        print(json.dumps(row), flush=True)
    if "keeper" in parts:
        results["keeper"] = _keeper_capacity(args.keeper_holders, args.judge_ms)
    if "judge" in parts:
        results["judge"] = _judged(runs, args.judge_ms, args.cpus)
    ray.shutdown()
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
