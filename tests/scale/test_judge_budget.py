"""One judge budget per endpoint across the cluster: a pinned max_concurrency and a 429's pause
hold for every worker together, and a killed worker's permits come back.

The same judged suite runs twice over four Ray workers against its own scripted judge: with the
cluster budget (the default) and with per-worker budgets, which is what shows the difference.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import ray
from scale_models import answer

from referee import EvalCase, EvalSuite
from referee.evaluators import Coherence
from referee.judge.limiter import BudgetSettings, EndpointIdentity, Outcome
from referee.report.model import EvalReport
from referee.scale import RayBackend
from referee.scale._budget import (
    BudgetKeeper,
    ClusterBudget,
    ClusterBudgetOptions,
    keeper_name,
)
from referee.testing import Fault, Reply, ScriptedJudgeServer

CAP = 2  # the pinned max_concurrency of the judge endpoint
CASES = 24  # four judge requests each (Coherence asks four questions at once)
RATE_LIMITED_REQUEST = 12
PAUSE_S = 4.0
# Requests already let through when the 429 arrived may still land just after it; from this long
# after it until the pause ends, none may.
SETTLED_AFTER_S = 1.0


@dataclass
class JudgedRun:
    report: EvalReport
    max_in_flight: int
    arrivals: list[float]
    rate_limited_at: float


def _judged_run(tmp_path: Path, *, cluster_budget: bool) -> JudgedRun:
    seen = 0
    rate_limited_at: list[float] = []
    lock = threading.Lock()

    def respond(request):
        nonlocal seen
        with lock:
            seen += 1
            if seen == RATE_LIMITED_REQUEST:
                rate_limited_at.append(time.monotonic())
                return Fault.rate_limit(retry_after=PAUSE_S)
        return Reply("Yes", latency_s=0.2)

    with ScriptedJudgeServer(respond) as server:
        judge = server.judge_config(max_concurrency=CAP)
        cases = [EvalCase(input=f"question {i}") for i in range(CASES)]
        suite = EvalSuite("judged").add_cases(cases).add_evaluator(Coherence(judge=judge))
        backend = RayBackend(shard_size=3, task_cpus=0.5, cluster_judge_budget=cluster_budget)
        report = suite.run(answer, verbose=False, runs_dir=tmp_path, concurrency=1,
                           backend=backend)
        arrivals = [r.arrived_at for r in server.requests]
        return JudgedRun(report, server.max_in_flight, arrivals, rate_limited_at[0])


@pytest.fixture(scope="module")
def judged_runs(ray_cluster: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, JudgedRun]:
    return {"cluster": _judged_run(tmp_path_factory.mktemp("cluster"), cluster_budget=True),
            "per_worker": _judged_run(tmp_path_factory.mktemp("per-worker"), cluster_budget=False)}


def _arrived_during_pause(run: JudgedRun) -> int:
    start, end = run.rate_limited_at + SETTLED_AFTER_S, run.rate_limited_at + PAUSE_S - 0.1
    return sum(start <= t < end for t in run.arrivals)


def test_the_pinned_concurrency_holds_across_all_workers(judged_runs: dict[str, JudgedRun]) -> None:
    for run in judged_runs.values():
        assert (run.report.total, run.report.errors) == (CASES, 0)
    assert 1 <= judged_runs["cluster"].max_in_flight <= CAP
    # Without the cluster budget each worker allows CAP on its own: together they exceed it.
    assert judged_runs["per_worker"].max_in_flight > CAP


def test_a_429_on_one_worker_pauses_every_worker(judged_runs: dict[str, JudgedRun]) -> None:
    assert _arrived_during_pause(judged_runs["cluster"]) == 0
    # Per-worker budgets pause only the worker that was told to wait; the others go on.
    assert _arrived_during_pause(judged_runs["per_worker"]) > 0


ENDPOINT = EndpointIdentity("openai", "http://127.0.0.1:9/v1", "fingerprint-of-a-test-key")


@ray.remote(max_retries=0, num_cpus=0.5)
def _lease_and_die(settings: BudgetSettings, options: ClusterBudgetOptions, count: int) -> None:
    budget = ClusterBudget(settings, ENDPOINT, options)

    async def hold() -> None:
        for _ in range(count):
            await budget.lease(10)

    asyncio.run(hold())
    os._exit(1)  # the worker dies holding every permit of the endpoint


def test_a_killed_worker_gives_its_permits_back(ray_cluster: str) -> None:
    settings = BudgetSettings(max_concurrency=CAP, pinned=True)
    options = ClusterBudgetOptions(lease_ttl_s=2.0)
    with pytest.raises(ray.exceptions.RayError):
        ray.get(_lease_and_die.remote(settings, options, CAP))
    keeper = ray.get_actor(keeper_name(ENDPOINT), namespace=options.namespace)
    budget = ClusterBudget(settings, ENDPOINT, options)

    async def lease_all() -> list:
        return [await asyncio.wait_for(budget.lease(10), timeout=60) for _ in range(CAP)]

    permits = asyncio.run(lease_all())  # waits until the dead worker's lease runs out
    assert ray.get(keeper.stats.remote())["reclaimed"] == CAP
    assert budget.active == CAP
    for permit in permits:
        budget.settle(permit, Outcome("ok", latency_s=0.1))
    deadline = time.monotonic() + 30
    while ray.get(keeper.held.remote()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ray.get(keeper.held.remote()) == 0  # the outcomes reached the keeper


def test_the_keeper_hands_out_batches_of_permits_that_may_start_now() -> None:
    async def scenario() -> None:
        keeper = BudgetKeeper(BudgetSettings(max_concurrency=3, pinned=True), lease_ttl_s=60)
        first = await keeper.lease("worker-a", [10, 10, 10, 10], [])
        assert len(first.lease_ids) == 3 and first.state.limit == 3  # the window is full
        # The next lease waits for a slot: here, until worker a reports one request done.
        waiting = asyncio.ensure_future(keeper.lease("worker-b", [10, 10], []))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await keeper.report("worker-a", [(first.lease_ids[0], Outcome("ok", latency_s=0.1))])
        second = await asyncio.wait_for(waiting, 5)
        assert len(second.lease_ids) == 1 and await keeper.held() == 3
        # A 429 with Retry-After pauses the endpoint, and every reply says so.
        state = await keeper.report("worker-a", [(first.lease_ids[1], Outcome(
            "rate_limited", retry_after=2.0))])
        assert 1 < state.paused_for <= 2
        # A holder that goes silent loses its permits; reports about them are then ignored.
        keeper.lease_ttl_s = 0.0
        assert keeper.reclaim_silent_holders() == 2 and await keeper.held() == 0
        await keeper.report("worker-a", [(first.lease_ids[2], Outcome("ok"))])
        assert keeper.limiter.active == 0
        # A lease that waited at the keeper while its worker went silent: taken back too.
        keeper.lease_ttl_s = 60.0
        late = await asyncio.wait_for(keeper.lease("worker-c", [10], []), 60)  # after the pause
        del keeper._last_heard["worker-c"]  # went silent and was forgotten meanwhile
        assert keeper.reclaim_silent_holders() == 1 and keeper.limiter.active == 0
        assert len(late.lease_ids) == 1

    asyncio.run(scenario())


def test_an_idle_keeper_ends_itself(ray_cluster: str) -> None:
    """Keepers are detached (a killed worker must not take the budget with it), so an idle one
    frees its worker itself; whoever needs it next creates it again."""
    name = keeper_name(EndpointIdentity("openai", "http://127.0.0.1:9/idle", "fingerprint"))
    keeper = ray.remote(num_cpus=0)(BudgetKeeper).options(
        name=name, namespace="referee", lifetime="detached").remote(
        BudgetSettings(), 60.0, 0.5)
    ray.get(keeper.report.remote("worker-a", []))  # starts its clock
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            ray.get_actor(name, namespace="referee")
        except ValueError:
            return
        time.sleep(0.2)
    pytest.fail("the idle keeper was still alive after 60 s")
