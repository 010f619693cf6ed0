"""The async engine: status mapping, counts, ordering, concurrency, timeouts, sync models."""

from __future__ import annotations

import asyncio
import threading

import pytest

from referee import EvalCase, EvalSuite, ExecutionResult, JudgeUnavailable
from referee.criteria.base import BaseCriterion, SyncCriterion
from referee.report.model import CaseStatus
from referee.result import CriterionResult
from referee.run.engine import Engine, ModelCaller, case_keys, case_status


class Scripted(BaseCriterion):
    """Behaves according to the model output, so each case exercises one outcome."""

    name = "scripted"

    async def evaluate(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        out = actual.actual_response
        if out == "judge-down":
            raise JudgeUnavailable("judge 503", provider="openai", model="m")
        if out == "judge-kind":
            return CriterionResult(criterion=self.name, score=0.0, passed=False, threshold=0.5,
                                   error="no verdict", error_kind="judge")
        if out == "no-provider":
            return self._result(0.5, {"reasoning": "No LLM provider available",
                                      "judge_unavailable": True})
        if out == "bug":
            raise ValueError("bug in evaluator")
        if out == "evaluator-kind":
            return CriterionResult(criterion=self.name, score=0.0, passed=False, threshold=0.5,
                                   error="bad schema", error_kind="evaluator")
        if out == "skip":
            return self._skipped("no expected output")
        if out == "bad-return":
            return {"score": 1.0}  # type: ignore[return-value]
        return self._result(1.0 if out == "good" else 0.0)


def behaviour_model(prompt: str):
    if prompt == "raise":
        raise RuntimeError("model crashed")
    if prompt == "wrong-type":
        return 42
    if prompt == "agent-error":
        return ExecutionResult(error="tool backend unreachable")
    return prompt


EXPECTED = {
    "good": CaseStatus.PASSED,
    "bad": CaseStatus.FAILED,
    "raise": CaseStatus.MODEL_ERROR,
    "wrong-type": CaseStatus.MODEL_ERROR,
    "agent-error": CaseStatus.MODEL_ERROR,
    "judge-down": CaseStatus.JUDGE_ERROR,
    "judge-kind": CaseStatus.JUDGE_ERROR,
    "no-provider": CaseStatus.JUDGE_ERROR,
    "bug": CaseStatus.EVALUATOR_ERROR,
    "evaluator-kind": CaseStatus.EVALUATOR_ERROR,
    "bad-return": CaseStatus.EVALUATOR_ERROR,
    "skip": CaseStatus.SKIPPED,
}


def test_each_outcome_maps_to_its_status_and_counts():
    suite = EvalSuite("statuses").add_cases([EvalCase(input=k) for k in EXPECTED])
    suite.add_evaluator(Scripted())
    report = suite.run(behaviour_model, verbose=False, save=False)

    got = {c.case.input: c.status for c in report.cases}
    assert got == EXPECTED
    assert report.total == 12
    assert report.passed == 1 and report.failed == 1 and report.skipped == 1
    assert report.evaluated == 2
    assert report.errors == 9
    assert report.errors_by_kind == {"evaluator_error": 3, "judge_error": 3, "model_error": 3}
    assert report.pass_rate == pytest.approx(0.5)
    assert report.error_rate == pytest.approx(9 / 12)

    by_input = {c.case.input: c for c in report.cases}
    assert by_input["raise"].error == "RuntimeError: model crashed"
    assert "model returned int" in by_input["wrong-type"].error
    assert by_input["agent-error"].error == "tool backend unreachable"
    assert "judge 503" in by_input["judge-down"].error
    assert "ValueError: bug in evaluator" in by_input["bug"].error
    assert "expected a CriterionResult" in by_input["bad-return"].error
    # The document-000 fallback keeps its 0.5 score but is counted as a judge error.
    fallback = by_input["no-provider"].criterion_results[0]
    assert fallback.score == 0.5 and fallback.error_kind == "judge"
    assert report.summary.criterion_stats["scripted"].errors == 6


def test_case_status_rules_directly():
    ok = CriterionResult(criterion="a", score=1, passed=True, threshold=0.5)
    bad = CriterionResult(criterion="b", score=0, passed=False, threshold=0.5)
    skip = CriterionResult(criterion="c", score=0, passed=False, threshold=0.5, skipped=True)
    judge = CriterionResult(criterion="d", score=0, passed=False, threshold=0.5, error_kind="judge")
    ev = CriterionResult(criterion="e", score=0, passed=False, threshold=0.5, error_kind="evaluator")
    assert case_status([ok, skip]) == CaseStatus.PASSED
    assert case_status([ok, bad, skip]) == CaseStatus.FAILED
    assert case_status([skip, skip]) == CaseStatus.SKIPPED
    assert case_status([]) == CaseStatus.SKIPPED
    assert case_status([ev, judge]) == CaseStatus.JUDGE_ERROR
    assert case_status([ok, ev]) == CaseStatus.EVALUATOR_ERROR


class Passes(SyncCriterion):
    name = "passes"

    def evaluate_sync(self, actual, expected):
        return self._result(1.0)


async def test_results_come_back_in_case_order_whatever_the_completion_order():
    n = 6
    done = [asyncio.Event() for _ in range(n)]
    finish_order: list[int] = []

    async def model(prompt: str) -> str:
        i = int(prompt)
        if i + 1 < n:
            await done[i + 1].wait()  # case i finishes only after case i+1
        finish_order.append(i)
        done[i].set()
        return "ok"

    engine = Engine([Passes()], concurrency=n)
    cases = [EvalCase(input=str(i)) for i in range(n)]

    async def execute(case, caller):
        return await caller.call(model, case.input)

    results = await asyncio.wait_for(engine.run(cases, execute), 10)
    assert finish_order == list(reversed(range(n)))
    assert [r.case.input for r in results] == [str(i) for i in range(n)]
    assert [r.index for r in results] == list(range(n))


async def test_case_concurrency_is_bounded():
    active = 0
    peak = 0
    reached = asyncio.Event()

    async def model(prompt: str) -> str:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        if active == 3:
            reached.set()
        await asyncio.wait_for(reached.wait(), 5)
        await asyncio.sleep(0)
        active -= 1
        return "ok"

    suite = EvalSuite("bounded").add_cases([EvalCase(input=f"q{i}") for i in range(12)])
    suite.add_evaluator(Passes())
    report = await suite.run_async(model, verbose=False, save=False, concurrency=3)
    assert report.passed == 12
    assert peak == 3


async def test_criteria_of_one_case_run_concurrently():
    a_started, b_started = asyncio.Event(), asyncio.Event()

    class WaitsFor(BaseCriterion):
        def __init__(self, name, mine, other):
            super().__init__()
            self.name, self.mine, self.other = name, mine, other

        async def evaluate(self, actual, expected):
            self.mine.set()
            await asyncio.wait_for(self.other.wait(), 5)  # deadlocks if run one after another
            return self._result(1.0)

    suite = EvalSuite("crit").add_case(EvalCase(input="q"))
    suite.add_evaluators(WaitsFor("a", a_started, b_started), WaitsFor("b", b_started, a_started))
    report = await suite.run_async(lambda p: "x", verbose=False, save=False)
    assert report.cases[0].status == CaseStatus.PASSED
    assert [r.criterion for r in report.cases[0].criterion_results] == ["a", "b"]


async def test_a_case_past_its_timeout_is_TIMEOUT_and_the_rest_still_run():
    never = asyncio.Event()

    async def model(prompt: str) -> str:
        if prompt == "hang":
            await never.wait()
        return "ok"

    suite = EvalSuite("timeouts").add_cases([EvalCase(input="hang"), EvalCase(input="fine")])
    suite.add_evaluator(Passes())
    report = await suite.run_async(model, verbose=False, save=False, timeout=0.2)
    assert [c.status for c in report.cases] == [CaseStatus.TIMEOUT, CaseStatus.PASSED]
    assert "0.2s timeout" in report.cases[0].error
    assert report.errors_by_kind == {"timeout": 1}


def test_sync_models_run_off_the_event_loop_thread():
    threads: set[str] = set()

    def model(prompt: str) -> str:
        threads.add(threading.current_thread().name)
        return "ok"

    suite = EvalSuite("threads").add_cases([EvalCase(input=f"q{i}") for i in range(4)])
    suite.add_evaluator(Passes())
    report = suite.run(model, verbose=False, save=False)
    assert report.passed == 4
    assert threads and all(name.startswith("referee-model") for name in threads)


async def test_model_may_return_dict_execution_result_or_awaitable():
    async def later():
        return "from a coroutine"

    outputs = {
        "dict": {"output": "from a dict", "tool_calls": [{"name": "search", "args": {"q": [1]}}]},
        "exec": ExecutionResult(actual_response="from an ExecutionResult", node_visits=["n1"]),
    }

    def model(prompt: str):
        if prompt == "coro":
            return later()
        return outputs[prompt]

    suite = EvalSuite("shapes").add_cases([EvalCase(input=k) for k in ("dict", "exec", "coro")])
    suite.add_evaluator(Passes())
    report = await suite.run_async(model, verbose=False, save=False)
    assert [c.output for c in report.cases] == [
        "from a dict", "from an ExecutionResult", "from a coroutine"]
    assert report.cases[0].execution.tool_calls[0].args == {"q": [1]}
    assert report.cases[1].execution.node_visits == ["n1"]


def test_prepare_runs_once_per_run_before_any_case_and_its_failure_is_per_case():
    events: list[str] = []

    class Prepared(SyncCriterion):
        name = "prepared"

        async def prepare(self):
            events.append("prepare")

        def evaluate_sync(self, actual, expected):
            events.append("case")
            return self._result(1.0)

    class BrokenPrepare(SyncCriterion):
        name = "broken"

        async def prepare(self):
            raise JudgeUnavailable("cannot generate questions")

        def evaluate_sync(self, actual, expected):
            raise AssertionError("never called after a failed prepare")

    suite = EvalSuite("prep").add_cases([EvalCase(input=f"q{i}") for i in range(3)])
    suite.add_evaluator(Prepared())
    report = suite.run(lambda p: "x", verbose=False, save=False)
    assert events == ["prepare", "case", "case", "case"]
    assert report.passed == 3

    suite.add_evaluator(BrokenPrepare())
    report = suite.run(lambda p: "x", verbose=False, save=False)
    assert {c.status for c in report.cases} == {CaseStatus.JUDGE_ERROR}
    assert "cannot generate questions" in report.cases[0].error


def test_a_plain_sync_evaluate_is_tolerated():
    class SyncEvaluate:
        name = "sync_evaluate"
        threshold = 0.5

        def evaluate(self, actual, expected):
            return CriterionResult(criterion=self.name, score=1.0, passed=True, threshold=0.5)

    suite = EvalSuite("sync").add_case(EvalCase(input="q")).add_evaluator(SyncEvaluate())
    assert suite.run(lambda p: "x", verbose=False, save=False).passed == 1


def test_duplicate_cases_get_distinct_keys():
    cases = [EvalCase(input="same"), EvalCase(input="same"), EvalCase(input="other")]
    keys = case_keys(cases)
    assert len(set(keys)) == 3
    assert keys[1] == keys[0] + "#2"


async def test_model_caller_awaits_async_callable_objects():
    class AsyncAgent:
        async def __call__(self, prompt: str) -> str:
            return prompt.upper()

    caller = ModelCaller()
    try:
        assert await caller.call(AsyncAgent(), "hi") == "HI"
    finally:
        caller.close()


def test_engine_rejects_bad_settings():
    with pytest.raises(ValueError, match="concurrency"):
        Engine([], concurrency=0)
    with pytest.raises(ValueError, match="timeout"):
        Engine([], timeout=0)


def test_ci_output_is_line_oriented_progress_plus_the_summary(capsys):
    suite = EvalSuite("ci-run").add_cases([EvalCase(input=k) for k in ("good", "bad", "raise")])
    suite.add_evaluator(Scripted())
    suite.run(behaviour_model, save=False, concurrency=1)
    out, err = capsys.readouterr()
    assert "\x1b[" not in err  # no redraws or colour codes in a log
    lines = err.splitlines()
    assert lines[0] == "referee: running 3 case(s) for ci-run"
    assert any(" FAILED " in line for line in lines)
    assert any("MODEL_ERROR" in line and "RuntimeError: model crashed" in line for line in lines)
    assert "ci-run" in out and "Errors by kind" in out


def test_a_terminal_gets_a_rich_progress_bar_with_live_counts(monkeypatch):
    import io
    import re

    from referee.run.progress import LineProgress, RichProgress, SilentProgress, make_progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    for var in ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert isinstance(make_progress(True, "x"), RichProgress)
    assert isinstance(make_progress(False, "x"), SilentProgress)

    suite = EvalSuite("tty-run").add_cases([EvalCase(input=k) for k in ("good", "bad", "raise")])
    suite.add_evaluator(Scripted())
    suite.run(behaviour_model, save=False, concurrency=1)
    drawn = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", terminal.getvalue())
    assert "referee: running" not in drawn  # not the CI lines
    assert "tty-run" in drawn and "3/3" in drawn
    assert "1 passed 1 failed 1 errors" in " ".join(drawn.split())

    monkeypatch.setattr("sys.stderr", io.StringIO())  # a pipe, as in CI
    assert isinstance(make_progress(True, "x"), LineProgress)


async def test_an_idle_model_thread_keeps_no_result_alive() -> None:
    """A thread waiting for its next call must not hold its last one (and through the case's
    future, the model's result): a pool grown by a busy run would keep one result per thread.

    Checked once the threads are idle: a thread hands the result over and only then lets go of
    it, so right after the awaits return a busy machine may not have run that last step yet
    (this failed under load when checked at once)."""
    import gc
    import time
    import weakref

    from referee.run.engine import _DaemonWorkers

    class Output:
        pass

    made: list[weakref.ref[Output]] = []
    started = threading.Barrier(4)

    def model(_: str) -> Output:
        started.wait(timeout=10)  # four calls at once: four threads, all idle afterwards
        out = Output()
        made.append(weakref.ref(out))
        return out

    caller = ModelCaller()
    workers = caller._workers = _DaemonWorkers()  # its own threads, so their idling is countable

    async def one_call() -> None:  # the result dropped here, as the engine stores and drops it
        await caller.call(model, "q")

    await asyncio.gather(*(one_call() for _ in range(4)))
    deadline = time.monotonic() + 30
    while workers._idle < 4 and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert workers._idle == 4
    gc.collect()
    assert len(made) == 4
    assert [ref() for ref in made] == [None] * 4


def test_model_caller_max_workers_is_deprecated() -> None:
    import warnings

    # It never bounded anything: sync models run on daemon threads, cases by the run's workers.
    with pytest.warns(DeprecationWarning, match=r"max_workers=\.\.\.\) is deprecated") as caught:
        ModelCaller(4)
    assert caught[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ModelCaller()
