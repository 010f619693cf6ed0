"""The Ray backend: shards of cases run on Ray workers, results stream back to the driver.

The driver (the process that called ``run``) has already computed the case keys, written
meta.json, prepared the criteria and left out the finished cases (resume). Here it cuts the
rest into shards of ``shard_size`` cases and keeps ``max_shards_in_flight`` Ray tasks busy.
Each task runs referee's own async engine over its shard and yields every finished case as
soon as it ends; the driver records it through ``engine.record`` (the store's only writer,
then the progress display). A task that fails or whose worker is lost is sent again with the
cases of its shard that were not recorded yet: a recorded case is never run again, and a
result that arrives twice is recorded once.

Every task installs the cluster's judge budgets on its worker (``_budget``): one rate limit per
judge endpoint for the whole cluster, unless the backend was told otherwise.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections import deque
from collections.abc import Callable, Container, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from referee.case import EvalCase
from referee.criteria.judged import judged_criteria
from referee.record import CaseResult, CaseStatus
from referee.run.engine import Engine, Execute, StoredOutput
from referee.scale._budget import DEFAULT_LEASE_TTL_S, ClusterBudgetOptions, use_cluster_budgets
from referee.scale._ray import require_ray, token_auth_hint
from referee.store import DEFAULT_RUNS_DIR

DEFAULT_SHARD_SIZE = 16
# How often a task that keeps failing is sent again before its cases are recorded as errors.
MAX_SHARD_ATTEMPTS = 4


@dataclass
class ShardSpec:
    """What every shard of a run shares; put in Ray's object store once per run."""

    criteria: list[Any]
    prepare_failures: dict[int, BaseException]
    execute: Execute
    concurrency: int
    timeout: float | None
    judge_budget: ClusterBudgetOptions | None = None
    case_retry: Any = None
    runs: int = 1
    criterion_concurrency: int | None = None  # per worker engine, not across the cluster
    early_stop: bool = False


@dataclass
class _Shard:
    indices: list[int]
    attempt: int = 1
    last_error: str = ""
    recorded: set[int] = field(default_factory=set)


def _shard_results(spec: ShardSpec, cases: list[EvalCase], indices: list[int],
                   keys: list[str], outputs: dict[str, StoredOutput]) -> Iterator[list[str]]:
    """On the worker: run the shard on referee's engine and yield the JSON of finished cases
    as they end: each yield holds every case that finished since the last one, so cases that
    end together cost the driver one object, and none waits for another."""
    use_cluster_budgets(spec.judge_budget)
    yield from _run_shard(spec, cases, indices, keys, outputs)


def _run_shard(spec: ShardSpec, cases: list[EvalCase], indices: list[int], keys: list[str],
               outputs: dict[str, StoredOutput]) -> Iterator[list[str]]:
    from referee.run.sync import run_sync

    engine = Engine(spec.criteria, concurrency=spec.concurrency, timeout=spec.timeout,
                    case_retry=spec.case_retry, runs=spec.runs,
                    criterion_concurrency=spec.criterion_concurrency, early_stop=spec.early_stop,
                    stored_outputs=outputs)
    # prepare() ran once, on the driver; its failures travel with the criteria.
    engine._prepared = True
    engine._prepare_failures = dict(spec.prepare_failures)
    finished: queue.Queue[Any] = queue.Queue()
    done = object()

    def collect(result: CaseResult) -> None:
        result.index = indices[result.index]  # the shard's position -> the run's position
        finished.put(result.model_dump_json())

    def runner() -> None:
        try:
            run_sync(engine.stream(cases, spec.execute, keys=keys, on_result=collect))
        except BaseException as exc:  # handed to the generator, which raises it in the task
            finished.put(exc)
        finally:
            finished.put(done)

    threading.Thread(target=runner, name="referee-shard", daemon=True).start()
    while True:
        batch: list[str] = []
        item = finished.get()
        while True:
            if item is done or isinstance(item, BaseException):
                if batch:
                    yield batch  # what finished before the end or the failure is recorded
                if isinstance(item, BaseException):
                    raise item
                return
            batch.append(item)
            try:
                item = finished.get_nowait()
            except queue.Empty:
                break
        yield batch


def _reason(exc: BaseException) -> str:
    """One line: Ray's task errors put the cause (e.g. the worker's ImportError) last."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[-1] if lines else ''}"


class RayBackend:
    """Runs a run's cases on a Ray cluster (``address``: an existing cluster; None: the one this
    process is connected to, or a local one started on first use).

    ``shard_size`` cases go to one task; at most ``max_shards_in_flight`` tasks run at once
    (default: twice as many as the cluster's CPUs can run at once, each task taking ``task_cpus``).
    Each task runs ``concurrency`` cases at a time, as the local engine would.

    ``cluster_judge_budget`` (default on): every judge endpoint has one budget for the whole
    cluster (its ``max_concurrency``, rpm and tpm, and its 429 pauses), held by a named Ray actor;
    a worker silent for ``judge_lease_ttl_s`` loses the permits it held. Off: each worker
    process has its own, so N workers may send N times an endpoint's limit.

    ``working_dir``: a folder every task runs in (Ray uploads it; workers import from it, as
    this machine imports from a target's folder). Default: the folder of the file
    ``referee run`` loaded (``send_by_value``), unless the Ray job names its own ``working_dir``
    or ``py_modules``; ``False``: none.
    """

    def __init__(self, address: str | None = None, *, shard_size: int = DEFAULT_SHARD_SIZE,
                 max_shards_in_flight: int | None = None, task_cpus: float = 1.0,
                 init_options: dict[str, Any] | None = None, cluster_judge_budget: bool = True,
                 judge_lease_ttl_s: float = DEFAULT_LEASE_TTL_S,
                 working_dir: str | Path | Literal[False] | None = None) -> None:
        if shard_size < 1:
            raise ValueError(f"shard_size must be at least 1, got {shard_size}")
        if max_shards_in_flight is not None and max_shards_in_flight < 1:
            raise ValueError(f"max_shards_in_flight must be at least 1, got {max_shards_in_flight}")
        self.ray = require_ray()
        self.address = address
        self.shard_size = shard_size
        self.max_shards_in_flight = max_shards_in_flight
        if not task_cpus > 0:
            raise ValueError(f"task_cpus must be positive, got {task_cpus}")
        self.task_cpus = task_cpus
        self.init_options = dict(init_options or {})
        if not judge_lease_ttl_s > 0:
            raise ValueError(f"judge_lease_ttl_s must be positive, got {judge_lease_ttl_s}")
        self.judge_budget = (ClusterBudgetOptions(lease_ttl_s=judge_lease_ttl_s)
                             if cluster_judge_budget else None)
        if working_dir and not Path(working_dir).is_dir():
            raise ValueError(f"working_dir {str(working_dir)!r} is not a folder")
        self.working_dir = working_dir
        self._working_dir_given = working_dir is not None
        self.tasks_started = 0
        self.tasks_failed = 0

    def send_by_value(self, module: Any) -> None:
        """Ship ``module``'s functions with the tasks instead of importing it on the workers:
        for a file loaded by path (``referee run evals.py``), which workers cannot import."""
        self.ray.cloudpickle.register_pickle_by_value(module)
        path = getattr(module, "__file__", None)
        if self.working_dir is None and path:
            # What it imports from its folder (``from shop_agent import ...``) must travel too.
            self.working_dir = Path(path).resolve().parent

    def _connect(self) -> bool:
        """Connect to the cluster (or start a local one); True when this call initialised Ray,
        so that the run disconnects again, shutting down a cluster it started itself."""
        ray = self.ray
        if ray.is_initialized():  # the caller's own connection: theirs to keep, and its job's code
            job_env = ray.get_runtime_context().runtime_env
            if (self._working_dir_given and self.working_dir
                    and not (job_env.get("working_dir") or job_env.get("py_modules"))):
                raise ValueError(
                    f"working_dir {str(self.working_dir)!r}: Ray is already initialised in this "
                    "process, and only ray.init() can ship a folder; pass "
                    "runtime_env={'working_dir': ...} to your ray.init() instead")
            return False
        try:
            # Ray's own INFO and WARNING lines ("Connecting to existing Ray cluster", "SIGTERM
            # handler is not set") would mix into referee's output; its errors still show.
            ray.init(address=self.address, ignore_reinit_error=True, log_to_driver=False,
                     **{"logging_level": logging.ERROR, **self._init_options()})
        except ConnectionError as exc:
            raise ConnectionError(f"{exc}. {token_auth_hint()}") from None
        return True

    def _init_options(self) -> dict[str, Any]:
        """``init_options``, with the working_dir in the job's runtime_env (Ray uploads a local
        folder only for a whole job, not for a task)."""
        options = dict(self.init_options)
        runtime_env = dict(options.get("runtime_env") or {})
        if self.working_dir and not (runtime_env.get("working_dir")
                                     or runtime_env.get("py_modules")):
            runtime_env["working_dir"] = str(self.working_dir)
            # Earlier runs' records are not code; Ray already leaves out .git, venvs, caches
            # and what .gitignore or .rayignore name.
            runtime_env["excludes"] = [*runtime_env.get("excludes", []),
                                       DEFAULT_RUNS_DIR.parts[0]]
            options["runtime_env"] = runtime_env
        return options

    async def stream(self, engine: Engine, cases: Sequence[EvalCase], execute: Execute, *,
                     keys: Sequence[str], skip: Container[str],
                     on_result: Callable[[CaseResult], None]) -> int:
        await engine.prepare()  # once, here: the workers get the prepared criteria
        todo = [i for i, key in enumerate(keys) if key not in skip]
        engine.progress.start(len(keys), len(keys) - len(todo))
        stop = threading.Event()
        try:
            await asyncio.to_thread(self._drive, engine, cases, execute, keys, todo,
                                    on_result, stop)
        finally:
            stop.set()  # a cancelled run (Ctrl-C) stops handing out shards and cancels tasks
            engine.progress.stop()
        return len(todo)

    def _drive(self, engine: Engine, cases: Sequence[EvalCase], execute: Execute,
               keys: Sequence[str], todo: list[int], on_result: Callable[[CaseResult], None],
               stop: threading.Event) -> None:
        ray = self.ray
        connected_here = self._connect()
        try:
            self._drive_shards(engine, cases, execute, keys, todo, on_result, stop)
        finally:
            if connected_here:
                # No process may outlive the run that started it: a local cluster started here
                # goes down with the run (a cluster merely connected to only loses this client).
                ray.shutdown()

    def _drive_shards(self, engine: Engine, cases: Sequence[EvalCase], execute: Execute,
                      keys: Sequence[str], todo: list[int],
                      on_result: Callable[[CaseResult], None], stop: threading.Event) -> None:
        ray = self.ray
        outputs = engine.stored_outputs
        for criterion in judged_criteria(engine.criteria):
            # The judge the run bound is the judge that judges on every worker, whatever the
            # worker's own environment and configure() say: it travels with the criterion.
            criterion.ship_judge()
        spec_ref = ray.put(ShardSpec(criteria=list(engine.criteria),
                                     prepare_failures=dict(engine._prepare_failures),
                                     execute=execute, concurrency=engine.concurrency,
                                     timeout=engine.timeout, judge_budget=self.judge_budget,
                                     case_retry=engine.case_retry, runs=engine.runs,
                                     criterion_concurrency=engine.criterion_concurrency,
                                     early_stop=engine.early_stop))
        # max_retries=0: a lost task is sent again from here, without the cases already recorded.
        run_shard = ray.remote(num_returns="streaming", max_retries=0,
                               num_cpus=self.task_cpus)(_shard_results)
        slots = ray.cluster_resources().get("CPU", 1) / self.task_cpus
        limit = self.max_shards_in_flight or max(2, int(2 * slots))
        waiting: deque[_Shard] = deque(
            _Shard(todo[s:s + self.shard_size]) for s in range(0, len(todo), self.shard_size))
        running: dict[Any, _Shard] = {}
        recorded: set[int] = set()

        def submit(shard: _Shard) -> None:
            pending = [i for i in shard.indices if i not in recorded]
            shard.indices = pending
            if not pending:
                return
            shard_keys = [keys[i] for i in pending]
            gen = run_shard.remote(spec_ref, [cases[i] for i in pending], pending, shard_keys,
                                   {k: outputs[k] for k in shard_keys if k in outputs})
            running[gen] = shard
            self.tasks_started += 1

        def record(result: CaseResult) -> None:
            if result.index in recorded:
                return  # a retried shard's duplicate: the first record stands
            recorded.add(result.index)
            engine.record(result, on_result)

        try:
            while (waiting or running) and not stop.is_set():
                while waiting and len(running) < limit:
                    submit(waiting.popleft())
                if not running:
                    continue
                ready, _ = ray.wait(list(running), num_returns=1, timeout=0.2)
                for gen in ready:
                    shard = running[gen]
                    try:
                        for payload in ray.get(next(gen)):
                            record(CaseResult.model_validate_json(payload))
                    except StopIteration:
                        del running[gen]
                        missing = [i for i in shard.indices if i not in recorded]
                        if missing:  # the task ended without reporting some: send them again
                            self._retry(shard, "the task ended without reporting every case",
                                        waiting, record, keys, cases)
                    except Exception as exc:  # the task raised, or its worker was lost
                        del running[gen]
                        self.tasks_failed += 1
                        self._retry(shard, _reason(exc), waiting, record, keys, cases)
        finally:
            for gen in running:
                try:
                    ray.cancel(gen, force=True)
                except Exception:  # already finished or gone: nothing left to stop
                    pass

    @staticmethod
    def _retry(shard: _Shard, reason: str, waiting: deque[_Shard],
               record: Callable[[CaseResult], None], keys: Sequence[str],
               cases: Sequence[EvalCase]) -> None:
        shard.last_error = reason[:300] if reason else "unknown failure"
        if shard.attempt < MAX_SHARD_ATTEMPTS:
            shard.attempt += 1
            waiting.append(shard)
            return
        # A shard that keeps killing its worker: its unrecorded cases end as errors, the run goes on.
        for i in shard.indices:
            case = cases[i]
            record(CaseResult(
                index=i, eval_id=keys[i], name=case.name, status=CaseStatus.MODEL_ERROR, case=case,
                error=(f"the Ray task running this case failed {shard.attempt} times; last: "
                       f"{shard.last_error}")))
