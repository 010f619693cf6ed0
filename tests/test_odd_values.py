"""Odd values at run time: criteria that raise what is not an ``Exception``, results changed
after they were built, secrets in the errors a model or a criterion raises. Each stays its
own case's status; no run ends early, and no exit code says more than the run did."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from referee import EvalCase, EvalSuite
from referee.criteria.base import BaseCriterion
from referee.evaluators.deterministic import Contains
from referee.evaluators.evaluator import Evaluator
from referee.report.model import CaseStatus
from referee.result import CriterionResult
from referee.run import engine

ROOT = Path(__file__).resolve().parent.parent
GOOD = "Refunds are accepted within 30 days."


class CustomThrowable(BaseException):
    """A throwable that is not an Exception, as some libraries define."""


def _raise_own_cancel() -> None:
    raise asyncio.CancelledError()


THROWS = {
    "sys-exit": lambda: sys.exit(0),
    "custom-base": lambda: (_ for _ in ()).throw(CustomThrowable("not an Exception")),
    "own-cancel": _raise_own_cancel,
}


class ThrowsOnOneCase(BaseCriterion):
    """An async criterion that raises a non-Exception on the case named by its input."""

    name = "throws"

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    async def evaluate(self, actual, expected) -> CriterionResult:
        if expected.input == "odd":
            THROWS[self.kind]()
        return self._result(1.0)


class ThrowsOnAThread(Evaluator):
    """multivon's sync Evaluator (run on a worker thread) raising a non-Exception."""

    name = "throws-on-thread"

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    def evaluate(self, case, output):
        if case.input == "odd":
            THROWS[self.kind]()
        return self._result(1.0)


@pytest.fixture(params=["task-counts-cancellations", "own-task"])
def guard(request, monkeypatch) -> str:
    if request.param == "own-task":
        monkeypatch.setattr(engine, "_guarded", engine._guarded_in_own_task)
    return request.param


@pytest.mark.parametrize("kind", sorted(THROWS))
@pytest.mark.parametrize("where", ["async", "thread"])
def test_a_criterion_raising_a_non_exception_is_its_case_evaluator_error(kind: str, where: str,
                                                                         guard: str) -> None:
    criterion = ThrowsOnOneCase(kind) if where == "async" else ThrowsOnAThread(kind)
    suite = EvalSuite("criterion-throws")
    suite.add_cases([EvalCase(input=p, name=p) for p in ("before", "odd", "after")])
    suite.add_evaluator(Contains(["30 days"]))
    suite.add_evaluator(criterion)
    report = suite.run(lambda prompt: GOOD, verbose=False, save=False, concurrency=1)

    assert [c.status for c in report.cases] == [CaseStatus.PASSED, CaseStatus.EVALUATOR_ERROR,
                                                CaseStatus.PASSED]
    odd = report.cases[1]
    broken = odd.get_criterion_result(criterion.name)
    expected_name = {"sys-exit": "SystemExit", "custom-base": "CustomThrowable",
                     "own-cancel": "CancelledError"}[kind]
    assert broken is not None and broken.error_kind == "evaluator"
    assert expected_name in (broken.error or ""), broken.error
    assert odd.get_criterion_result("contains").passed  # the other criterion's verdict is kept


@pytest.mark.parametrize("kind", sorted(THROWS))
def test_a_prepare_raising_a_non_exception_errors_that_criterion_on_every_case(kind: str) -> None:
    class PrepareThrows(BaseCriterion):
        name = "prepare-throws"

        async def prepare(self) -> None:
            THROWS[kind]()

        async def evaluate(self, actual, expected) -> CriterionResult:
            return self._result(1.0)

    suite = EvalSuite("prepare-throws")
    suite.add_cases([EvalCase(input=p, name=p) for p in ("a", "b")])
    suite.add_evaluator(Contains(["30 days"]))
    suite.add_evaluator(PrepareThrows())
    report = suite.run(lambda prompt: GOOD, verbose=False, save=False)
    assert [c.status for c in report.cases] == [CaseStatus.EVALUATOR_ERROR] * 2
    for case in report.cases:
        assert case.get_criterion_result("prepare-throws").error_kind == "evaluator"


EXITING_SUITE = textwrap.dedent("""
    import sys
    from referee import EvalCase, EvalSuite
    from referee.criteria.base import BaseCriterion

    class ExitsOnOneCase(BaseCriterion):
        name = "exits"

        async def evaluate(self, actual, expected):
            if expected.input == "b":
                sys.exit(0)
            return self._result(0.0)  # every scored case fails

    suite = EvalSuite("exits")
    suite.add_cases([EvalCase(input=i, name=i) for i in "abc"])
    suite.add_evaluator(ExitsOnOneCase())

    def model(prompt):
        return "out"
""")


def test_a_criterion_calling_sys_exit_0_cannot_make_a_failing_run_exit_0(tmp_path: Path) -> None:
    """``sys.exit(0)`` inside a criterion used to end ``referee run`` with exit 0 after one
    case: a CI gate read a failing run as a pass."""
    target = tmp_path / "eval_exits.py"
    target.write_text(EXITING_SUITE)
    runs = tmp_path / "runs"
    proc = subprocess.run(
        [sys.executable, "-m", "referee", "run", str(target), "--out", str(runs),
         "--concurrency", "1", "--fail-threshold", "0.9", "--format", "json"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    [run_dir] = [p for p in runs.iterdir() if p.is_dir()]
    statuses = {row["case"]["name"]: row["status"] for row in map(
        json.loads, (run_dir / "cases.jsonl").read_text().splitlines())}
    assert statuses == {"a": "FAILED", "b": "EVALUATOR_ERROR", "c": "FAILED"}
