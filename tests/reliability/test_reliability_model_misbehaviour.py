"""Issue 10, section 3: models that hang for good, raise anything at all, or answer in a shape
referee does not know. Each stays that case's TIMEOUT or MODEL_ERROR; nothing holds the run.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from referee import EvalCase, EvalSuite
from referee.criteria.base import BaseCriterion
from referee.evaluators.deterministic import Contains
from referee.execution import RESPONSE_KEYS
from referee.report.model import CaseStatus
from referee.report.store import load_run
from referee.result import CriterionResult
from referee.run import engine

GOOD = "Refunds are accepted within 30 days."

HUNG_SUITE = textwrap.dedent(f"""
    import threading, time
    from referee import EvalCase, EvalSuite
    from referee.evaluators.deterministic import Contains

    suite = EvalSuite("hung-models")
    # The hung cases come first, so that they take every slot before the healthy ones start.
    suite.add_cases([EvalCase(input=f"hang {{i}}", name=f"hang {{i}}") for i in range(3)]
                    + [EvalCase(input=f"ok {{i}}", name=f"ok {{i}}") for i in range(6)])
    suite.add_evaluator(Contains(["30 days"]))
    lock = threading.Lock()
    running = 0
    most_running = 0

    def model(prompt):
        global running, most_running
        if prompt.startswith("hang"):
            while True:  # never returns, never gives up its thread
                time.sleep(3600)
        with lock:
            running += 1
            most_running = max(most_running, running)
        try:
            time.sleep(0.05)
            with open({{path!r}}, "a") as fh:
                fh.write(f"{{most_running}}\\n")
            return {GOOD!r}
        finally:
            with lock:
                running -= 1
""")


def test_hung_sync_models_time_out_and_never_hold_the_run_or_its_slots(tmp_path: Path) -> None:
    peaks = tmp_path / "peaks.txt"
    suite = tmp_path / "hung_suite.py"
    suite.write_text(HUNG_SUITE.replace("{path!r}", repr(str(peaks))))
    runs = tmp_path / "runs"
    env = {**os.environ, "REFEREE_CACHE": "0", "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("REFEREE_DEBUG", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "referee.cli", "run", str(suite), "--out", str(runs),
         "--concurrency", "2", "--timeout", "1", "-q", "--format", "json"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Three threads stay stuck forever; the process must still end once the report is out.
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"referee run did not exit with hung model threads: {out} {err}")
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert out.startswith("6 passed, 0 failed, 3 errors"), out

    [run_dir] = list(runs.iterdir())
    report = load_run(run_dir).to_dict()  # report.json refers to cases.jsonl for the cases
    statuses = {c["name"]: c["status"] for c in report["cases"]}
    assert statuses == {**{f"hang {i}": "TIMEOUT" for i in range(3)},
                        **{f"ok {i}": "PASSED" for i in range(6)}}
    for case in report["cases"]:
        if case["status"] == "TIMEOUT":
            assert "did not finish within its 1s timeout" in case["error"]
    # The healthy cases ran at the configured concurrency, never above it.
    assert max(int(line) for line in peaks.read_text().split()) <= 2


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("__str__ is broken too")

    def __repr__(self) -> str:
        raise RuntimeError("and so is __repr__")


class HalfPrintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("__str__ is broken")

    def __repr__(self) -> str:
        return "HalfPrintable(code=7)"


# case input -> (what the sync model does, words the MODEL_ERROR must carry)
RAISES: dict[str, tuple[BaseException | None, tuple[str, ...]]] = {
    "good": (None, ()),
    "str-raises": (HalfPrintable(), ("HalfPrintable", "code=7")),
    "nothing-prints": (Unprintable(), ("Unprintable",)),
    "cancelled": (asyncio.CancelledError("gave up"), ("CancelledError",)),
    "system-exit": (SystemExit(3), ("SystemExit",)),
    "keyboard-interrupt-in-model": (KeyboardInterrupt(), ("KeyboardInterrupt",)),
    "good-too": (None, ()),
}
# An async model on the event loop: KeyboardInterrupt there is Ctrl-C's, so it is not listed.
ASYNC_RAISES = {k: v for k, v in RAISES.items() if k != "keyboard-interrupt-in-model"}


def _sync_model(prompt: str) -> str:
    exc = RAISES[prompt][0]
    if exc is not None:
        raise exc
    return GOOD


async def _async_model(prompt: str) -> str:
    await asyncio.sleep(0)
    exc = RAISES[prompt][0]
    if exc is not None:
        raise exc
    return GOOD


@pytest.fixture(params=["task-counts-cancellations", "own-task"])
def guard(request, monkeypatch) -> str:
    """Both ways of telling a model's CancelledError from the case's: Python 3.11+ asks the
    task how often it was cancelled; 3.10 runs the model in a task of its own."""
    if request.param == "own-task":
        monkeypatch.setattr(engine, "_guarded", engine._guarded_in_own_task)
    return request.param


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_every_exception_a_model_raises_is_its_case_model_error(tmp_path: Path, kind: str,
                                                                 guard: str) -> None:
    cases = RAISES if kind == "sync" else ASYNC_RAISES
    suite = EvalSuite(f"raises-{kind}")
    suite.add_cases([EvalCase(input=name, name=name) for name in cases])
    suite.add_evaluator(Contains(["30 days"]))
    model = _sync_model if kind == "sync" else _async_model
    report = suite.run(model, verbose=False, concurrency=3, runs_dir=tmp_path, formats=["json"])

    got = {c.name: c.status for c in report.cases}
    assert got == {name: CaseStatus.PASSED if spec[0] is None else CaseStatus.MODEL_ERROR
                   for name, spec in cases.items()}
    for case in report.cases:
        for word in cases[case.name][1]:
            assert word in (case.error or ""), (case.name, case.error)


def test_a_model_that_escapes_cancellation_of_its_own_does_not_cancel_the_run(guard: str) -> None:
    """CancelledError from a model awaiting something that was cancelled under it."""

    async def model(prompt: str) -> str:
        if prompt == "own-cancel":
            inner = asyncio.ensure_future(asyncio.sleep(10))
            asyncio.get_running_loop().call_soon(inner.cancel)
            await inner  # raises CancelledError into the model, which lets it escape
        return GOOD

    suite = EvalSuite("own-cancel")
    suite.add_cases([EvalCase(input=p, name=p) for p in ("before", "own-cancel", "after")])
    suite.add_evaluator(Contains(["30 days"]))
    report = suite.run(model, verbose=False, save=False, concurrency=1)
    assert [c.status for c in report.cases] == [CaseStatus.PASSED, CaseStatus.MODEL_ERROR,
                                                CaseStatus.PASSED]
    assert "CancelledError" in (report.cases[1].error or "")


def test_an_async_model_past_its_timeout_is_still_a_timeout(guard: str) -> None:
    async def model(prompt: str) -> str:
        if prompt == "slow":
            await asyncio.sleep(3600)
        return GOOD

    suite = EvalSuite("async-timeout")
    suite.add_cases([EvalCase(input=p, name=p) for p in ("slow", "quick")])
    suite.add_evaluator(Contains(["30 days"]))
    report = suite.run(model, verbose=False, save=False, timeout=0.5)
    assert [c.status for c in report.cases] == [CaseStatus.TIMEOUT, CaseStatus.PASSED]


class BrokenMessageCriterion(BaseCriterion):
    name = "broken-message"

    async def evaluate(self, actual, expected) -> CriterionResult:
        raise Unprintable()


def test_a_criterion_exception_that_cannot_be_printed_is_still_its_evaluator_error() -> None:
    suite = EvalSuite("criterion-unprintable")
    suite.add_cases([EvalCase(input="q", name="q")])
    suite.add_evaluator(Contains(["30 days"]))
    suite.add_evaluator(BrokenMessageCriterion())
    report = suite.run(lambda prompt: GOOD, verbose=False, save=False)
    [case] = report.cases
    assert case.status == CaseStatus.EVALUATOR_ERROR
    broken = case.get_criterion_result("broken-message")
    assert broken is not None and "Unprintable" in (broken.error or "")
    assert case.get_criterion_result("contains").passed


def test_a_dict_without_a_response_key_is_a_model_error_naming_the_accepted_keys() -> None:
    answers = {"known-key": {"output": GOOD}, "unknown-key": {"answer": GOOD},
               "empty": {}, "tools-only": {"tool_calls": [{"name": "lookup"}]}}
    suite = EvalSuite("dict-keys")
    suite.add_cases([EvalCase(input=k, name=k) for k in answers])
    suite.add_evaluator(Contains(["30 days"]))
    report = suite.run(lambda prompt: answers[prompt], verbose=False, save=False)
    got = {c.name: c for c in report.cases}
    assert got["known-key"].status == CaseStatus.PASSED
    for name in ("unknown-key", "empty", "tools-only"):
        case = got[name]
        assert case.status == CaseStatus.MODEL_ERROR, name
        assert case.criterion_results == []  # nothing was scored
        assert "no response key" in case.error
        assert all(key in case.error for key in RESPONSE_KEYS), case.error
    assert "'answer'" in got["unknown-key"].error


def test_model_threads_are_reused_when_idle_and_replaced_when_stuck() -> None:
    import threading

    workers = engine._DaemonWorkers()
    release = threading.Event()
    try:
        for _ in range(3):  # three hung calls, each holding its thread
            workers.submit(lambda: release.wait(60))
        for _ in range(20):  # one call at a time after them: never waits for the stuck three
            done = threading.Event()
            workers.submit(done.set)
            assert done.wait(30), "a call waited behind stuck threads"
            deadline = time.monotonic() + 30
            while workers._idle == 0 and time.monotonic() < deadline:  # back in the pool
                time.sleep(0.001)
        # The twenty calls shared one thread: three stuck, one reused.
        assert workers._started == 4
        assert all(t.daemon for t in threading.enumerate() if t.name.startswith("referee-model"))
    finally:
        release.set()
