"""The one async engine behind EvalSuite, AgentEvaluator and UserSimulator.

Cases run with bounded concurrency; the criteria of one case run concurrently; how many judge
calls are in flight is the judge layer's business, not ours. Every finished case goes to the
run store at once, so a killed run keeps it, and results come back in case order whatever the
completion order. A fault in one case is recorded as that case's status and never stops the run.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from referee.case import EvalCase
from referee.criteria.base import CURRENT_CASE, CaseScope
from referee.errors import JudgeUnavailable
from referee.execution import ExecutionResult
from referee.judge.cache import cache_enabled_by_env
from referee.report.model import CaseResult, CaseStatus
from referee.report.store import RunStore
from referee.result import CriterionResult
from referee.run.progress import ProgressReporter, SilentProgress
from referee.usage import TokenUsage

DEFAULT_CONCURRENCY = 8


class ModelCaller:
    """Calls the model or agent under test, sync or async, without blocking the event loop.

    Sync callables run on a private thread pool: a hung sync model cannot be killed, and a
    private pool (shut down without waiting) keeps it from holding the process at exit.
    """

    def __init__(self, max_workers: int) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max(1, max_workers),
                                        thread_name_prefix="referee-model")

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        if _is_async_callable(fn):
            value = fn(*args)
        else:
            loop = asyncio.get_running_loop()
            value = await loop.run_in_executor(self._pool, functools.partial(fn, *args))
        # A sync function may still hand back a coroutine (e.g. a lambda around an async def).
        while inspect.isawaitable(value):
            value = await value
        return value

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _is_async_callable(fn: Any) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None))


# What a front door supplies: run the model on one case and return what it produced
# (str, dict or ExecutionResult). Anything it raises is the model's fault (MODEL_ERROR), except
# JudgeUnavailable from a front door's own judge calls (JUDGE_ERROR).
Execute = Callable[[EvalCase, ModelCaller], Awaitable[Any]]


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

def case_status(results: Sequence[CriterionResult]) -> CaseStatus:
    """A known failure beats an unknown: FAILED > JUDGE_ERROR > EVALUATOR_ERROR > PASSED/SKIPPED.

    (MODEL_ERROR and TIMEOUT come first, but they are decided before any criterion runs.)
    """
    if any(r.is_scored and not r.passed for r in results):
        return CaseStatus.FAILED
    if any(r.is_judge_error for r in results):
        return CaseStatus.JUDGE_ERROR
    if any(r.is_error for r in results):
        return CaseStatus.EVALUATOR_ERROR
    if not any(r.is_scored for r in results):
        return CaseStatus.SKIPPED
    return CaseStatus.PASSED


def _error_summary(results: Sequence[CriterionResult], status: CaseStatus) -> str | None:
    if status == CaseStatus.JUDGE_ERROR:
        bad = [r for r in results if r.is_judge_error]
    elif status == CaseStatus.EVALUATOR_ERROR:
        bad = [r for r in results if r.is_error]
    else:
        return None
    return "; ".join(f"{r.criterion}: {r.explanation or 'error'}" for r in bad)


def _criterion_name(criterion: Any) -> str:
    return str(getattr(criterion, "name", None) or type(criterion).__name__)


def _criterion_threshold(criterion: Any) -> float:
    try:
        return float(getattr(criterion, "threshold", 0.0) or 0.0)
    except Exception:  # a broken threshold property is the evaluator's fault, reported elsewhere
        return 0.0


def is_enabled(criterion: Any) -> bool:
    """``CriterionConfig(enabled=False)`` switches a criterion off wherever it runs."""
    config = getattr(criterion, "config", None)
    return bool(getattr(config, "enabled", True))


def disabled_result(criterion: Any) -> CriterionResult:
    """A switched-off criterion is reported, as disabled, and never scored."""
    reason = "disabled (CriterionConfig(enabled=False)); not scored"
    return CriterionResult(criterion=_criterion_name(criterion), score=0.0, passed=False,
                           threshold=_criterion_threshold(criterion), skipped=True,
                           details={"reason": reason, "skipped": True, "disabled": True})


def error_result(criterion: Any, exc: BaseException) -> CriterionResult:
    """A criterion that raised: a judge outage or a broken evaluator, never a quality verdict."""
    kind = "judge" if isinstance(exc, JudgeUnavailable) else "evaluator"
    text = str(exc) or type(exc).__name__
    if kind == "evaluator":
        text = f"{type(exc).__name__}: {text}"
    return CriterionResult(criterion=_criterion_name(criterion), score=0.0, passed=False,
                           threshold=_criterion_threshold(criterion), error=text,
                           error_kind=kind)


def _normalise(criterion: Any, value: Any) -> CriterionResult:
    if not isinstance(value, CriterionResult):
        return CriterionResult(
            criterion=_criterion_name(criterion), score=0.0, passed=False,
            threshold=_criterion_threshold(criterion), error_kind="evaluator",
            error=f"evaluate() returned {type(value).__name__}; expected a CriterionResult",
        )
    if value.details.get("judge_unavailable") and value.error_kind is None:
        # Document 000's 0.5 "No LLM provider available" fallback: keep the score the
        # document promises, but let the statistics see it as the judge error it is.
        value = value.model_copy(update={"error_kind": "judge"})
    return value


class Engine:
    """Runs cases through a model and a fixed list of criteria."""

    def __init__(self, criteria: Sequence[Any], *, concurrency: int = DEFAULT_CONCURRENCY,
                 timeout: float | None = None, progress: ProgressReporter | None = None,
                 store: RunStore | None = None) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be positive seconds, got {timeout}")
        # A malformed REFEREE_CACHE would otherwise fail every judged case one by one.
        cache_enabled_by_env()
        self.criteria = list(criteria)
        self.concurrency = concurrency
        self.timeout = timeout
        self.progress = progress or SilentProgress()
        self.store = store
        self._prepare_failures: dict[int, BaseException] = {}
        self._prepared = False

    async def prepare(self) -> None:
        """Call each criterion's optional ``prepare()`` once, before any case.

        A failure there is not fatal to the run: every case reports that criterion as errored
        (JUDGE_ERROR or EVALUATOR_ERROR), so nothing is silently passed.
        """
        if self._prepared:
            return
        self._prepared = True

        async def one(i: int, criterion: Any) -> None:
            prepare = getattr(criterion, "prepare", None)
            if prepare is None or not is_enabled(criterion):
                return
            try:
                value = prepare()
                if inspect.isawaitable(value):
                    await value
            except Exception as exc:
                self._prepare_failures[i] = exc

        await asyncio.gather(*(one(i, c) for i, c in enumerate(self.criteria)))

    async def run(self, cases: Sequence[EvalCase], execute: Execute, *,
                  finished: dict[str, CaseResult] | None = None) -> list[CaseResult]:
        """Every case's result, in case order. ``finished`` (by case key) are not run again."""
        await self.prepare()
        keys = case_keys(cases)
        finished = finished or {}
        results: list[CaseResult | None] = [None] * len(cases)
        todo: asyncio.Queue[int] = asyncio.Queue()
        for i, key in enumerate(keys):
            if key in finished:
                results[i] = finished[key]
            else:
                todo.put_nowait(i)

        caller = ModelCaller(self.concurrency)
        self.progress.start(len(cases), len(cases) - todo.qsize())

        async def worker() -> None:
            while True:
                try:
                    i = todo.get_nowait()
                except asyncio.QueueEmpty:
                    return
                result = await self.run_case(cases[i], execute, caller, index=i, key=keys[i])
                results[i] = result
                if self.store is not None:
                    self.store.append_case(result)
                self.progress.case_finished(result)

        try:
            workers = [asyncio.create_task(worker()) for _ in range(min(self.concurrency, todo.qsize()))]
            await asyncio.gather(*workers)
        finally:
            self.progress.stop()
            caller.close()
        return [r for r in results if r is not None]

    async def run_case(self, case: EvalCase, execute: Execute, caller: ModelCaller, *,
                       index: int = 0, key: str | None = None) -> CaseResult:
        """One case, whatever happens: its status says what went wrong."""
        started = time.perf_counter()
        partial: dict[str, Any] = {}
        key = key or case.eval_id
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
                                error=f"{type(exc).__name__}: {exc}")
        result.duration_seconds = time.perf_counter() - started
        return result

    async def _run_case(self, case: EvalCase, execute: Execute, caller: ModelCaller,
                        index: int, key: str, partial: dict[str, Any]) -> CaseResult:
        model_started = time.perf_counter()
        try:
            raw = await execute(case, caller)
            execution = ExecutionResult.coerce(raw)
        except JudgeUnavailable as exc:
            # Only a front door that itself talks to a judge (the user simulator) raises this.
            return self._case(case, index, key, CaseStatus.JUDGE_ERROR, error=str(exc))
        except Exception as exc:
            return self._case(case, index, key, CaseStatus.MODEL_ERROR,
                              error=f"{type(exc).__name__}: {exc}")
        if execution.latency_s is None:
            execution.latency_s = time.perf_counter() - model_started
        partial["execution"] = execution
        if execution.error:
            return self._case(case, index, key, CaseStatus.MODEL_ERROR, execution=execution,
                              error=execution.error)

        scope = CURRENT_CASE.set(CaseScope(tuple(self.criteria)))
        try:
            scored = await asyncio.gather(*(
                self._score(i, criterion, execution, case)
                for i, criterion in enumerate(self.criteria)
            ))
        finally:
            CURRENT_CASE.reset(scope)
        status = case_status(scored)
        return self._case(case, index, key, status, execution=execution,
                          criterion_results=list(scored), error=_error_summary(scored, status),
                          token_usage=TokenUsage.total([r.token_usage for r in scored]))

    async def _score(self, i: int, criterion: Any, execution: ExecutionResult,
                     case: EvalCase) -> CriterionResult:
        if not is_enabled(criterion):
            return disabled_result(criterion)
        failure = self._prepare_failures.get(i)
        if failure is not None:
            return error_result(criterion, failure)
        try:
            value = criterion.evaluate(execution, case)
            if inspect.isawaitable(value):  # the protocol is async; a plain sync one is tolerated
                value = await value
        except Exception as exc:
            return error_result(criterion, exc)
        return _normalise(criterion, value)

    @staticmethod
    def _case(case: EvalCase, index: int, key: str, status: CaseStatus, *,
              execution: ExecutionResult | None = None,
              criterion_results: list[CriterionResult] | None = None, error: str | None = None,
              token_usage: TokenUsage | None = None) -> CaseResult:
        return CaseResult(index=index, eval_id=key, name=case.name, status=status, case=case,
                          execution=execution, criterion_results=criterion_results or [],
                          error=error, token_usage=token_usage)
