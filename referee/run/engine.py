"""The one async engine behind EvalSuite, AgentEvaluator and UserSimulator.

Cases run with bounded concurrency; the criteria of one case run concurrently; how many judge
calls are in flight is the judge layer's business, not ours. Every finished case goes to the
run store at once, so a killed run keeps it, and results come back in case order whatever the
completion order. A fault in one case is recorded as that case's status and never stops the run.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import math
import queue
import threading
import time
import warnings
from collections.abc import Awaitable, Callable, Container, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from referee._strict import checked_again
from referee.case import EvalCase
from referee.content._scope import judging_content
from referee.criteria.base import (
    CURRENT_CASE,
    CaseScope,
    Criterion,
    PreparedCriterion,
    criterion_label,
    criterion_threshold,
)
from referee.errors import JudgeUnavailable, describe_exception, format_traceback
from referee.execution import UNRECORDED_KEY, ExecutionResult
from referee.judge.client import trial_scope
from referee.judge.pricing import load_env_price_file
from referee.judge.reply_cache import cache_enabled_by_env
from referee.judge.served import SERVED_KEY, recording_served
from referee.record import CaseResult, CaseStatus, case_status, clear_after, combine_runs
from referee.result import CriterionResult, unique_labels
from referee.run.case_retry import JudgeRetry, async_sleep_for_attempt, should_retry
from referee.run.progress import ProgressReporter, SilentProgress
from referee.store import RunStore
from referee.usage import TokenUsage

DEFAULT_CONCURRENCY = 8


class ModelFailure(Exception):
    """The model under test (or a criterion) raised something that is not an ``Exception``
    (SystemExit, a CancelledError of its own...): still that case's MODEL_ERROR (or that
    criterion's evaluator error), never the run's end."""

    def __init__(self, raised: BaseException) -> None:
        super().__init__(describe_exception(raised))
        self.raised = raised


class _DaemonWorkers:
    """Daemon threads for sync model calls, reused while idle and replaced while stuck.

    A call goes to an idle thread when there is one and to a new thread otherwise, so a
    thread stuck in a hung model never makes another call wait, however many are stuck. The
    threads are daemons: nothing joins them at exit. A thread idle for ``IDLE_S`` ends.
    """

    IDLE_S = 30.0

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting for a job that no queued job is promised to
        self._started = 0

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            spawn = self._idle == 0
            if spawn:
                self._started += 1
                name = f"referee-model-{self._started}"
            else:
                self._idle -= 1  # promised to this job
        self._jobs.put(job)
        if spawn:
            threading.Thread(target=self._work, name=name, daemon=True).start()

    def _work(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=self.IDLE_S)
            except queue.Empty:
                with self._lock:
                    if self._idle > 0:  # no job is promised to an idle thread: this one ends
                        self._idle -= 1
                        return
                continue
            job()
            # An idle thread must not keep its last job: the job holds the case's future, and
            # through it the model's result, for as long as the thread waits.
            del job
            with self._lock:
                self._idle += 1


_WORKERS = _DaemonWorkers()


class ModelCaller:
    """Calls the model or agent under test, sync or async, without blocking the event loop.

    Sync calls run on daemon threads (``_DaemonWorkers``): a hung sync model cannot be
    killed, but its stuck thread holds no slot that other cases need (the engine's workers
    bound how many cases run at once; a busy thread is never waited for) and does not keep
    the process alive at exit. ``max_workers`` is deprecated: it never bounded anything here.

    Anything the model raises reaches the caller as an ``Exception`` (non-``Exception``
    throwables are wrapped in ``ModelFailure``), so it can only ever be that case's error;
    cancelling the caller's own task (a timeout, Ctrl-C) still cancels as usual.
    """

    def __init__(self, max_workers: int | None = None) -> None:
        if max_workers is not None:
            warnings.warn("ModelCaller(max_workers=...) is deprecated and has no effect: sync "
                          "models run on daemon threads, and how many cases run at once is "
                          "the run's concurrency", DeprecationWarning, stacklevel=2)
        self._workers = _WORKERS

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        if _is_async_callable(fn):
            value = await _guarded(lambda: fn(*args))
        else:
            value = await self._in_thread(fn, args)
        # A sync function may still hand back a coroutine (e.g. a lambda around an async def).
        while inspect.isawaitable(value):
            awaitable = value
            value = await _guarded(lambda: awaitable)  # noqa: B023  # awaited before the loop goes on
        return value

    async def _in_thread(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        context = contextvars.copy_context()

        def deliver(ok: bool, value: Any) -> None:
            if future.done():  # the case timed out or the run was cancelled meanwhile
                return
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

        def job() -> None:
            try:
                outcome = (True, context.run(fn, *args))
            except Exception as exc:
                outcome = (False, exc)
            except BaseException as exc:  # SystemExit, KeyboardInterrupt raised by the model
                outcome = (False, ModelFailure(exc))
            try:
                loop.call_soon_threadsafe(deliver, *outcome)
            except RuntimeError:  # the loop is gone: the run ended while this call hung
                pass

        self._workers.submit(job)
        return await future

    def close(self) -> None:
        """Nothing to release: the threads are shared, and a stuck one is left behind."""


async def _guarded(start: Callable[[], Awaitable[Any]], who: str = "the model") -> Any:
    """Await the model's (or a criterion's: ``who``) awaitable so that anything it raises
    stays an ``Exception``, and a CancelledError it lets escape is told apart from the
    cancellation of this case (a timeout, Ctrl-C). Ctrl-C's KeyboardInterrupt on the loop's
    thread passes through."""
    task = asyncio.current_task()
    if task is None or not hasattr(task, "cancelling"):
        return await _guarded_in_own_task(start, who)
    try:
        return await start()
    except asyncio.CancelledError:
        if task.cancelling() == 0:  # nobody cancelled this case: the model raised it
            raise ModelFailure(
                asyncio.CancelledError(f"{who} raised asyncio.CancelledError")) from None
        raise
    except (Exception, KeyboardInterrupt):
        raise
    except BaseException as exc:  # SystemExit and the like would take down the event loop
        raise ModelFailure(exc) from None


async def _guarded_in_own_task(start: Callable[[], Awaitable[Any]],
                               who: str = "the model") -> Any:
    """Python 3.10, where a task does not count cancellations: the model runs in a task of
    its own, and one that ends cancelled while this case was not is the model's doing."""

    async def run() -> Any:
        try:
            return await start()
        except (Exception, asyncio.CancelledError, KeyboardInterrupt):
            raise
        except BaseException as exc:
            raise ModelFailure(exc) from None

    inner = asyncio.ensure_future(run())
    try:
        await asyncio.wait({inner})
    except asyncio.CancelledError:
        inner.cancel()
        raise
    if inner.cancelled():
        raise ModelFailure(asyncio.CancelledError(f"{who} raised asyncio.CancelledError"))
    return inner.result()


async def _awaited(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, awaited when it hands back an awaitable."""
    value = fn(*args)
    return await value if inspect.isawaitable(value) else value


def _is_async_callable(fn: Any) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None))  # noqa: B004  # an object whose __call__ is async


# What a front door supplies: run the model on one case and return what it produced
# (str, dict or ExecutionResult). Anything it raises is the model's fault (MODEL_ERROR), except
# JudgeUnavailable from a front door's own judge calls (JUDGE_ERROR).
Execute = Callable[[EvalCase, ModelCaller], Awaitable[Any]]

# A stored output to score again: a case's, or one per run of a case run several times (None
# for a run that produced nothing, which runs again).
StoredOutput = ExecutionResult | list[ExecutionResult | None]


def case_keys(cases: Sequence[EvalCase]) -> list[str]:
    """One id per case, unique within the run: resume and the store key on it.

    Identical cases get the same content-derived eval_id; later copies get a ``#n`` suffix.
    """
    seen: dict[str, int] = {}
    keys = []
    for case in cases:
        base = case.eval_id
        n = seen.get(base, 0) + 1
        seen[base] = n
        keys.append(base if n == 1 else f"{base}#{n}")
    return keys


# Status mapping (docs/architecture.md) ------------------------------------------------------

def _error_summary(results: Sequence[CriterionResult], status: CaseStatus) -> str | None:
    if status == CaseStatus.JUDGE_ERROR:
        bad = [r for r in results if r.is_judge_error]
    elif status == CaseStatus.EVALUATOR_ERROR:
        bad = [r for r in results if r.is_error]
    else:
        return None
    return "; ".join(f"{r.criterion}: {r.explanation or 'error'}" for r in bad)


def is_enabled(criterion: Criterion) -> bool:
    """``CriterionConfig(enabled=False)`` switches a criterion off wherever it runs."""
    config = getattr(criterion, "config", None)
    return bool(getattr(config, "enabled", True))


def disabled_result(criterion: Criterion) -> CriterionResult:
    """A switched-off criterion is reported, as disabled, and never scored."""
    reason = "disabled (CriterionConfig(enabled=False)); not scored"
    return CriterionResult(criterion=criterion_label(criterion), score=0.0, passed=False,
                           threshold=criterion_threshold(criterion), skipped=True,
                           details={"reason": reason, "skipped": True, "disabled": True})


def unrecorded_result(criterion: Criterion, execution: ExecutionResult) -> CriterionResult | None:
    """A criterion reading what the recorded run could not carry is skipped, with the reason:
    a node order scored against a format without nodes would fail a case on no evidence."""
    unrecorded = execution.metadata.get(UNRECORDED_KEY)
    if not isinstance(unrecorded, dict) or not unrecorded:
        return None
    try:
        reads = tuple(getattr(criterion, "reads", ()) or ())
    except Exception:  # a broken property is the criterion's own error, reported when it runs
        return None
    missing = [field for field in reads if field in unrecorded]
    if not missing:
        return None
    reason = "not scored: " + "; ".join(str(unrecorded[field]) for field in missing)
    return CriterionResult(criterion=criterion_label(criterion), score=0.0, passed=False,
                           threshold=criterion_threshold(criterion), skipped=True,
                           details={"reason": reason, "skipped": True, "unrecorded": missing})


def error_result(criterion: Criterion, exc: BaseException) -> CriterionResult:
    """A criterion that raised: a judge outage or a broken evaluator, never a quality verdict."""
    kind = "judge" if isinstance(exc, JudgeUnavailable) else "evaluator"
    text = describe_exception(exc)
    if kind == "judge":
        text = text.removeprefix(f"{type(exc).__name__}: ")
    # A judge reply that yielded no verdict was still paid for, and its excerpt is the evidence.
    usage = getattr(exc, "token_usage", None)
    details = getattr(exc, "details", None)
    return CriterionResult(criterion=criterion_label(criterion), score=0.0, passed=False,
                           threshold=criterion_threshold(criterion), error=text,
                           error_kind=kind,
                           details=dict(details) if isinstance(details, dict) else {},
                           token_usage=usage if isinstance(usage, TokenUsage) else None)


def _normalise(criterion: Criterion, value: Any) -> CriterionResult:
    problem = None
    if not isinstance(value, CriterionResult):
        problem = f"evaluate() returned {type(value).__name__}; expected a CriterionResult"
    else:
        try:
            # Checked again: fields assigned after it was built were never validated.
            value = checked_again(value, "evaluate() returned a CriterionResult")
        except ValueError as exc:
            problem = str(exc)
    if problem is not None:
        return CriterionResult(
            criterion=criterion_label(criterion), score=0.0, passed=False,
            threshold=criterion_threshold(criterion), error_kind="evaluator", error=problem)
    if value.details.get("judge_unavailable") and value.error_kind is None:
        # The 10xgraph-style API's 0.5 "No LLM provider available" fallback: keep the score the
        # document promises, but let the statistics see it as the judge error it is.
        value = value.model_copy(update={"error_kind": "judge"})
    return value


def _finite_score(criterion: Criterion, result: CriterionResult) -> CriterionResult:
    """A score that is not a number is no verdict: the criterion is broken (EVALUATOR_ERROR)."""
    if math.isfinite(result.score):
        return result
    return result.model_copy(update={
        "score": 0.0, "passed": False, "error_kind": "evaluator",
        "error": f"evaluate() returned a score of {result.score}; expected a finite number"})


def check_engine_settings(*, concurrency: int, timeout: float | None, runs: int,
                          criterion_concurrency: int | None) -> None:
    """The ranges an engine runs within (RunOptions checks a run's options with these)."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    if not isinstance(runs, int) or isinstance(runs, bool) or runs < 1:
        raise ValueError(f"runs must be a positive int, got {runs!r}")
    if criterion_concurrency is not None and (
            not isinstance(criterion_concurrency, int)
            or isinstance(criterion_concurrency, bool) or criterion_concurrency < 1):
        raise ValueError("evaluator_concurrency must be a positive int or None, "
                         f"got {criterion_concurrency!r}")
    if timeout is not None and not (0 < timeout < math.inf):  # NaN fails this test too
        raise ValueError(f"timeout must be positive seconds, got {timeout}")


def check_judge_environment() -> None:
    """Refuse a malformed REFEREE_CACHE, which would otherwise fail every judged case one by
    one, and a bad REFEREE_PRICE_FILE, which would fail the first judged case and leave the
    others priced by the built-in table."""
    cache_enabled_by_env()
    load_env_price_file()


class Engine:
    """Runs cases through a model and a fixed list of criteria."""

    def __init__(self, criteria: Sequence[Criterion], *, concurrency: int = DEFAULT_CONCURRENCY,
                 timeout: float | None = None, progress: ProgressReporter | None = None,
                 store: RunStore | None = None, case_retry: JudgeRetry | None = None,
                 runs: int = 1, criterion_concurrency: int | None = None,
                 early_stop: bool = False,
                 stored_outputs: Mapping[str, StoredOutput] | None = None,
                 settings_checked: bool = False) -> None:
        # run_stored builds its engine from a RunOptions, which checked the ranges when it was
        # built, after checking the judge environment itself: neither is checked twice.
        if not settings_checked:
            check_engine_settings(concurrency=concurrency, timeout=timeout, runs=runs,
                                  criterion_concurrency=criterion_concurrency)
            check_judge_environment()
        self.criteria = list(criteria)
        self.concurrency = concurrency
        self.timeout = timeout
        self.progress = progress or SilentProgress()
        self.store = store
        # Re-scoring (a resume's ResumePlan): by case key, the stored outputs scored again
        # without calling the model.
        self.stored_outputs: Mapping[str, StoredOutput] = dict(stored_outputs or {})
        self.case_retry = case_retry
        # Each case runs this many times, one run after another (multivon's runs=N).
        self.runs = runs
        # Stop running a case once its runs settle it (referee.record.clear_after).
        self.early_stop = early_stop
        # At most this many criteria score at once across the whole run (None: no bound beyond
        # the judge layer's per-endpoint limits); the semaphore is made on the run's loop.
        self.criterion_concurrency = criterion_concurrency
        self._criterion_slots: asyncio.Semaphore | None = None
        self._prepare_failures: dict[int, BaseException] = {}
        self._prepared = False
        # What prepare() spent on the judge, by criterion label (the report's
        # preparation_token_usage): no case asked for it, and the bill must still add up.
        self.preparation_usage: dict[str, TokenUsage] = {}

    async def prepare(self) -> None:
        """Call each criterion's optional ``prepare()`` once, before any case.

        A failure there is not fatal to the run: every case reports that criterion as errored
        (JUDGE_ERROR or EVALUATOR_ERROR), so nothing is silently passed.
        """
        if self._prepared:
            return
        self._prepared = True

        async def one(i: int, criterion: Criterion) -> None:
            if not isinstance(criterion, PreparedCriterion) or not is_enabled(criterion):
                return
            try:
                await _guarded(lambda: _awaited(criterion.prepare), "the criterion")
            except ModelFailure as exc:  # SystemExit and the like: still only this criterion's
                self._prepare_failures[i] = exc.raised
            except Exception as exc:
                self._prepare_failures[i] = exc

        await asyncio.gather(*(one(i, c) for i, c in enumerate(self.criteria)))
        labels = unique_labels([criterion_label(c) for c in self.criteria])
        for label, criterion in zip(labels, self.criteria):
            take = getattr(criterion, "take_preparation_usage", None)
            usage = take() if callable(take) else None
            if isinstance(usage, TokenUsage) and (usage.requests or usage.cached_requests):
                self.preparation_usage[label] = usage

    async def run(self, cases: Sequence[EvalCase], execute: Execute, *,
                  finished: dict[str, CaseResult] | None = None) -> list[CaseResult]:
        """Every case's result, in case order. ``finished`` (by case key) are not run again."""
        keys = case_keys(cases)
        finished = finished or {}
        results: list[CaseResult | None] = [finished.get(key) for key in keys]

        def keep(result: CaseResult) -> None:
            results[result.index] = result

        await self.stream(cases, execute, keys=keys, skip=finished, on_result=keep)
        return [r for r in results if r is not None]

    async def stream(self, cases: Sequence[EvalCase], execute: Execute, *,
                     keys: Sequence[str] | None = None, skip: Container[str] = (),
                     on_result: Callable[[CaseResult], None] | None = None,
                     order: Iterable[int] | None = None) -> int:
        """Run every case whose key is not in ``skip``, handing each result over as it finishes
        (to the store, then ``on_result``) and keeping none: memory stays flat however many
        cases there are. ``cases`` is only indexed, so it may build each case on demand.
        A case with a stored output (``stored_outputs``) is scored without calling the model.
        ``order`` (positions) is the order cases start in, drawn lazily: a sequential gate's
        order ends once the gate is settled (run/sequential.py). Returns how many cases were
        to run."""
        await self.prepare()
        keys = case_keys(cases) if keys is None else keys
        todo = sum(1 for key in keys if key not in skip)
        # Seam for sequential gates: the default order is the cases' own.
        positions = range(len(keys)) if order is None else order
        pending = (i for i in positions if keys[i] not in skip)

        caller = ModelCaller()
        self.progress.start(len(keys), len(keys) - todo)

        async def worker() -> None:
            for i in pending:  # shared by every worker; next() never awaits, so no race
                result = await self.run_case(cases[i], execute, caller, index=i, key=keys[i],
                                             output=self.stored_outputs.get(keys[i]))
                self.record(result, on_result)

        workers = [asyncio.create_task(worker()) for _ in range(min(self.concurrency, todo))]
        try:
            await asyncio.gather(*workers)
        except BaseException:
            # A worker failed outside any case (the run store cannot be written): stop the rest.
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise
        finally:
            self.progress.stop()
            caller.close()
        return todo

    def record(self, result: CaseResult,
               on_result: Callable[[CaseResult], None] | None = None) -> None:
        """One finished case: to the store first (so a kill keeps it), then the caller, then
        the progress display. Whatever runs the cases (here, or a backend's workers) calls it
        from one place, so the store has one writer."""
        if self.store is not None:
            self.store.append_case(result)
        if on_result is not None:
            on_result(result)
        self.progress.case_finished(result)

    async def run_case(self, case: EvalCase, execute: Execute, caller: ModelCaller, *,
                       index: int = 0, key: str | None = None,
                       output: StoredOutput | None = None) -> CaseResult:
        """One case, whatever happens: its status says what went wrong.

        With ``output`` (a stored run being re-scored) the model is not called. Under a
        ``case_retry`` policy a case (each run of it) that ends in one of its statuses runs
        again, end to end; the errors that prompted each retry are kept in
        ``metadata["retry_errors"]``. With ``runs`` > 1 the case runs that many times, one run
        after another, each judged afresh (``trial_scope``: the reply cache never replays an
        earlier run), and the runs are combined (``referee.record.combine_runs``).
        """
        if self.runs == 1:
            assert not isinstance(output, list)  # resume refuses another number of runs
            return await self._retried(case, execute, caller, index=index, key=key,
                                       output=output)
        started = time.perf_counter()
        outcomes = []
        stored = output if isinstance(output, list) else [output] * self.runs
        for trial in range(self.runs):
            with trial_scope(trial):
                outcomes.append(await self._retried(
                    case, execute, caller, index=index, key=key,
                    output=stored[trial] if trial < len(stored) else None))
            if self.early_stop and clear_after(
                    sum(r.status == CaseStatus.PASSED for r in outcomes),
                    sum(r.status == CaseStatus.FAILED for r in outcomes)):
                break
        result = combine_runs(outcomes, case=case, index=index, key=key or case.eval_id)
        result.duration_seconds = time.perf_counter() - started
        return result

    async def _retried(self, case: EvalCase, execute: Execute, caller: ModelCaller, *,
                       index: int, key: str | None,
                       output: ExecutionResult | None) -> CaseResult:
        started = time.perf_counter()
        policy = self.case_retry
        retry_errors: list[str] = []
        while True:
            result = await self._attempt_case(case, execute, caller, index=index, key=key,
                                              output=output)
            attempt = len(retry_errors) + 1
            if policy is None or attempt >= policy.max_attempts \
                    or not should_retry(result.status, policy):
                break
            retry_errors.append(result.error or result.status.peer_value)
            await async_sleep_for_attempt(policy, attempt + 1)
        if retry_errors:
            result.metadata = {**result.metadata, "retry_errors": retry_errors}
        result.duration_seconds = time.perf_counter() - started
        return result

    async def _attempt_case(self, case: EvalCase, execute: Execute, caller: ModelCaller, *,
                            index: int, key: str | None,
                            output: ExecutionResult | None) -> CaseResult:
        started = time.perf_counter()
        partial: dict[str, Any] = {}
        key = key or case.eval_id
        if output is not None:
            known = output

            async def execute(case: EvalCase, caller: ModelCaller) -> Any:
                return known
        try:
            if self.timeout is None:
                result = await self._run_case(case, execute, caller, index, key, partial)
            else:
                result = await asyncio.wait_for(
                    self._run_case(case, execute, caller, index, key, partial), self.timeout)
        except asyncio.TimeoutError:
            result = self._case(case, index, key, CaseStatus.TIMEOUT,
                                execution=partial.get("execution"),
                                error=f"case did not finish within its {self.timeout:g}s timeout")
        except Exception as exc:  # a fault in the engine's own handling of this case
            result = self._case(case, index, key, CaseStatus.EVALUATOR_ERROR,
                                execution=partial.get("execution"),
                                error=describe_exception(exc))
        result.duration_seconds = time.perf_counter() - started
        return result.storable()

    async def _run_case(self, case: EvalCase, execute: Execute, caller: ModelCaller,
                        index: int, key: str, partial: dict[str, Any]) -> CaseResult:
        model_started = time.perf_counter()
        try:
            raw = await execute(case, caller)
            execution = ExecutionResult.coerce(raw)
        except JudgeUnavailable as exc:
            # Only a front door that itself talks to a judge (the user simulator) raises this.
            return self._case(case, index, key, CaseStatus.JUDGE_ERROR, error=str(exc))
        except ModelFailure as exc:
            return self._case(case, index, key, CaseStatus.MODEL_ERROR, error=str(exc),
                              traceback=format_traceback(exc.raised))
        except Exception as exc:
            return self._case(case, index, key, CaseStatus.MODEL_ERROR,
                              error=describe_exception(exc), traceback=format_traceback(exc))
        if execution.latency_s is None:
            execution.latency_s = time.perf_counter() - model_started
        partial["execution"] = execution
        if execution.error:
            return self._case(case, index, key, CaseStatus.MODEL_ERROR, execution=execution,
                              error=execution.error)

        scope = CURRENT_CASE.set(CaseScope(tuple(self.criteria)))
        scoring_started = time.perf_counter()
        try:
            # Judges see the case's images and PDFs (a re-scored output's, from blobs/).
            with judging_content(execution, case, self._run_dir()):
                scored = await asyncio.gather(*(
                    self._score(i, criterion, execution, case)
                    for i, criterion in enumerate(self.criteria)
                ))
        finally:
            CURRENT_CASE.reset(scope)
        scoring_seconds = time.perf_counter() - scoring_started
        status = case_status(scored)
        result = self._case(case, index, key, status, execution=execution,
                            criterion_results=list(scored), error=_error_summary(scored, status),
                            token_usage=TokenUsage.total([r.token_usage for r in scored]))
        result.scoring_seconds = scoring_seconds
        return result

    async def score_again(self, case: EvalCase, execution: ExecutionResult,
                          indices: Sequence[int]) -> list[CriterionResult]:
        """The criteria at ``indices`` score a stored output once more, as a case scores them
        (the reliability check's re-asks)."""
        await self.prepare()
        chosen = [(i, self.criteria[i]) for i in indices]
        scope = CURRENT_CASE.set(CaseScope(tuple(c for _, c in chosen)))
        try:
            with judging_content(execution, case, self._run_dir()):
                return list(await asyncio.gather(*(self._score(i, criterion, execution, case)
                                                   for i, criterion in chosen)))
        finally:
            CURRENT_CASE.reset(scope)

    def _run_dir(self) -> Path | None:
        return self.store.run_dir if self.store is not None else None

    async def _score(self, i: int, criterion: Criterion, execution: ExecutionResult,
                     case: EvalCase) -> CriterionResult:
        if not is_enabled(criterion):
            return disabled_result(criterion)
        unrecorded = unrecorded_result(criterion, execution)
        if unrecorded is not None:
            return unrecorded
        failure = self._prepare_failures.get(i)
        if failure is not None:
            return error_result(criterion, failure)
        if self.criterion_concurrency is None:
            return await self._evaluate(criterion, execution, case)
        if self._criterion_slots is None:
            self._criterion_slots = asyncio.Semaphore(self.criterion_concurrency)
        async with self._criterion_slots:
            return await self._evaluate(criterion, execution, case)

    @staticmethod
    async def _evaluate(criterion: Criterion, execution: ExecutionResult,
                        case: EvalCase) -> CriterionResult:
        # The model versions that answered this criterion's judge requests go into its details:
        # a run and a calibration tell from them which snapshot judged (judge/served.py).
        with recording_served() as served:
            result = await Engine._evaluate_unrecorded(criterion, execution, case)
        if served:
            result = result.model_copy(update={
                "details": {**result.details, SERVED_KEY: served.as_details()}})
        return result

    @staticmethod
    async def _evaluate_unrecorded(criterion: Criterion, execution: ExecutionResult,
                                   case: EvalCase) -> CriterionResult:
        try:
            # The protocol is async; a plain sync evaluate is tolerated.
            value = await _guarded(lambda: _awaited(criterion.evaluate, execution, case),
                                   "the criterion")
        except ModelFailure as exc:  # SystemExit and the like: still only this case's error
            return error_result(criterion, exc.raised)
        except Exception as exc:
            return error_result(criterion, exc)
        return _finite_score(criterion, _normalise(criterion, value))

    @staticmethod
    def _case(case: EvalCase, index: int, key: str, status: CaseStatus, *,
              execution: ExecutionResult | None = None,
              criterion_results: list[CriterionResult] | None = None, error: str | None = None,
              token_usage: TokenUsage | None = None, traceback: str | None = None) -> CaseResult:
        return CaseResult(index=index, eval_id=key, name=case.name, status=status, case=case,
                          execution=execution, criterion_results=criterion_results or [],
                          error=error, token_usage=token_usage, traceback=traceback)
