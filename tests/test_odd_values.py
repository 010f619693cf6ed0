"""Odd values at run time: criteria that raise what is not an ``Exception``, results changed
after they were built, secrets in the errors a model or a criterion raises, tool arguments
JSON cannot hold, values that contain themselves, a criterion that never scored, another
package's ExecutionResult. Each stays its own case's status; no run ends early, nothing is
lost, and no exit code or assertion says more than the run did."""

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


# Results changed after they were built ------------------------------------------------------

MUTATIONS = {
    # An OpenAI reply that only calls tools has content None.
    "response-none": lambda run: setattr(run, "actual_response", None),
    "response-int": lambda run: setattr(run, "actual_response", 30),
    "tool-calls-none": lambda run: setattr(run, "tool_calls", None),
    "node-visit-int": lambda run: run.node_visits.append(1),
    "metadata-none": lambda run: setattr(run, "metadata", None),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_an_execution_result_changed_into_a_wrong_shape_is_its_case_model_error(
        mutation: str, tmp_path: Path) -> None:
    """An agent that fills in an ExecutionResult field by field used to take the run down:
    the store wrote a record it could not read back."""
    from referee import ExecutionResult
    from referee.report.store import load_run

    def agent(prompt: str) -> ExecutionResult:
        run = ExecutionResult(actual_response=GOOD)
        if prompt == "odd":
            MUTATIONS[mutation](run)
        return run

    suite = EvalSuite("mutated-run")
    suite.add_cases([EvalCase(input=p, name=p) for p in ("before", "odd", "after")])
    suite.add_evaluator(Contains(["30 days"]))
    report = suite.run(agent, verbose=False, runs_dir=tmp_path, concurrency=1,
                       formats=["json", "junit", "html"])
    assert [c.status for c in report.cases] == [CaseStatus.PASSED, CaseStatus.MODEL_ERROR,
                                                CaseStatus.PASSED]
    error = report.cases[1].error or ""
    field = {"response-none": "actual_response", "response-int": "actual_response",
             "tool-calls-none": "tool_calls", "node-visit-int": "node_visits",
             "metadata-none": "metadata"}[mutation]
    assert field in error and "\n" not in error, error
    stored = load_run(report.metadata["run_dir"])
    assert [c.status for c in stored.cases] == [c.status for c in report.cases]


def test_a_criterion_result_changed_after_it_was_built_is_checked_like_a_new_one(
        tmp_path: Path) -> None:
    """numpy values assigned to a result used to take the run down (the tally summed
    numpy bools into a number JSON cannot hold); a None score lost every verdict of the case."""
    np = pytest.importorskip("numpy")

    class AssignsNumpy(BaseCriterion):
        name = "assigns-numpy"

        async def evaluate(self, actual, expected) -> CriterionResult:
            result = CriterionResult(criterion=self.name, score=0.0, passed=False)
            result.score = np.float64(0.7)
            result.passed = result.score >= 0.5
            return result

    class AssignsNone(BaseCriterion):
        name = "assigns-none"

        async def evaluate(self, actual, expected) -> CriterionResult:
            result = self._result(1.0)
            if expected.input == "odd":
                result.score = None
            return result

    suite = EvalSuite("mutated-result")
    suite.add_cases([EvalCase(input=p, name=p) for p in ("before", "odd")])
    suite.add_evaluator(Contains(["30 days"]))
    suite.add_evaluator(AssignsNumpy())
    suite.add_evaluator(AssignsNone())
    report = suite.run(lambda prompt: GOOD, verbose=False, runs_dir=tmp_path,
                       formats=["json", "junit", "html"])
    assert [c.status for c in report.cases] == [CaseStatus.PASSED, CaseStatus.EVALUATOR_ERROR]
    odd = report.cases[1]
    assert odd.get_criterion_result("contains").passed
    numpy_result = odd.get_criterion_result("assigns-numpy")
    assert numpy_result.passed is True and type(numpy_result.score) is float
    broken = odd.get_criterion_result("assigns-none")
    assert broken.error_kind == "evaluator" and "score" in (broken.error or "")
    summary = json.loads((Path(report.metadata["run_dir"]) / "results.json").read_text())
    assert summary["summary"]["criterion_stats"]["assigns-numpy"]["passed"] == 2


# Secrets in what a model or a criterion raises ------------------------------------------------

# A gateway key of no known shape (known only because it is in the environment) and a
# provider-shaped one.
ENV_KEY = "gw-CANARY-model-under-test-5c1e9a7b3d"
SHAPED_KEY = "sk-proj-CANARYshapedKey8d6f4b2a0c"


def test_a_key_in_a_model_or_criterion_error_reaches_no_report(tmp_path: Path,
                                                               monkeypatch) -> None:
    """The model under test often uses the same provider key as the judge, and a gateway's
    401 echoes it; such an error used to be stored and reported as it was."""
    from referee import ExecutionResult
    from referee.report.store import load_run

    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)

    class RaisesWithAKey(BaseCriterion):
        name = "raises-with-a-key"

        async def evaluate(self, actual, expected) -> CriterionResult:
            if expected.input == "criterion-raises":
                raise PermissionError(f"401: Incorrect API key provided: {SHAPED_KEY}")
            if expected.input == "criterion-fails":  # 10xgraph's helper: the error is the reason
                return self._failure(f"judge call failed: bad key {ENV_KEY}")
            return self._result(1.0)

    def model(prompt: str):
        if prompt == "model-raises":
            raise RuntimeError(f"401 from the gateway: bad key {ENV_KEY}")
        if prompt == "model-reports":  # the 10xgraph way: the agent records its own failure
            return ExecutionResult(actual_response="", error=f"auth failed for {SHAPED_KEY}")
        return GOOD

    suite = EvalSuite("keys-in-errors")
    suite.add_cases([EvalCase(input=p, name=p)
                     for p in ("model-raises", "model-reports", "criterion-raises",
                               "criterion-fails", "fine")])
    suite.add_evaluator(RaisesWithAKey())
    runs = tmp_path / "runs"
    report = suite.run(model, verbose=False, runs_dir=runs, formats=["json", "junit", "html"])
    assert [c.status for c in report.cases] == [
        CaseStatus.MODEL_ERROR, CaseStatus.MODEL_ERROR, CaseStatus.EVALUATOR_ERROR,
        CaseStatus.EVALUATOR_ERROR, CaseStatus.PASSED]
    assert "401 from the gateway" in (report.cases[0].error or "")  # the evidence stays

    [run_dir] = list(runs.iterdir())
    texts = {p.name: p.read_text() for p in run_dir.iterdir() if p.is_file()}
    assert {"cases.jsonl", "report.json", "results.json", "junit.xml", "report.html"} <= set(texts)
    texts["csv"] = report.to_csv()
    texts["loaded"] = load_run(run_dir).to_json()
    leaks = [(where, key) for where, text in texts.items() for key in (ENV_KEY, SHAPED_KEY)
             if key in text]
    assert leaks == []


def test_assert_criterion_passed_fails_for_a_criterion_that_scored_no_case() -> None:
    """Its mean covers scored results only; with none it is no 0.0 that clears min_score=0.0
    (the default): a criterion that errored on every case used to pass the assertion."""
    from referee.run.assertions import assert_criterion_passed

    class AlwaysRaises(BaseCriterion):
        name = "always-raises"

        async def evaluate(self, actual, expected) -> CriterionResult:
            raise RuntimeError("judge client misconfigured")

    suite = EvalSuite("never-scored")
    suite.add_cases([EvalCase(input=p, name=p) for p in ("a", "b")])
    suite.add_evaluator(Contains(["30 days"]))
    suite.add_evaluator(AlwaysRaises())
    report = suite.run(lambda prompt: GOOD, verbose=False, save=False)
    assert_criterion_passed(report, "contains")
    with pytest.raises(AssertionError, match="always-raises.*scored no case.*2 error"):
        assert_criterion_passed(report, "always-raises")


# Tool calls whose arguments JSON cannot hold -------------------------------------------------

class ArgObject:
    def __repr__(self) -> str:
        return "ArgObject()"


@pytest.mark.parametrize("arg", ["object", "bytes", "numpy"])
@pytest.mark.parametrize("composite", [False, True], ids=["trajectory", "composite"])
def test_a_tool_argument_json_cannot_hold_is_scored_and_stored_as_a_stand_in(
        arg: str, composite: bool, tmp_path: Path) -> None:
    """The trajectory criterion (and a composite over it) put the calls in ``details`` through
    JSON: an argument JSON cannot hold made it an evaluator error instead of a verdict."""
    from referee import AgentEvaluator, ExecutionResult, ToolCall
    from referee.config import CriterionConfig, MatchType
    from referee.criteria import CompositeCriterion, TrajectoryMatchCriterion
    from referee.report.store import load_run

    value = {"object": ArgObject, "bytes": lambda: b"\xff\xfe",
             "numpy": lambda: pytest.importorskip("numpy").array([1, 2])}[arg]()

    def agent(message: str) -> ExecutionResult:
        return ExecutionResult(actual_response="looked it up",
                               tool_calls=[ToolCall(name="lookup", args={"q": value})])

    trajectory = TrajectoryMatchCriterion(CriterionConfig(match_type=MatchType.EXACT))
    criterion = CompositeCriterion([trajectory]) if composite else trajectory
    case = EvalCase(input="find it", name="odd-args",
                    expected_tool_trajectory=[ToolCall(name="lookup")])
    evaluator = AgentEvaluator(agent, criteria=[criterion], runs_dir=tmp_path)
    report = evaluator.evaluate_sync([case], verbose=False, formats=["json", "junit", "html"])
    [result] = report.cases
    scored = result.get_criterion_result(criterion.name)
    assert scored.error is None and scored.score == 1.0 and scored.passed, scored
    stored = load_run(report.metadata["run_dir"])
    [kept] = stored.cases
    assert kept.get_criterion_result(criterion.name).passed
    assert any("details" in c.path for c in kept.converted), kept.converted


# Values that contain themselves, or nest without end ------------------------------------------

def _cyclic() -> dict:
    value: dict = {"a": 1}
    value["self"] = value
    return value


def _deep(levels: int = 5000) -> dict:
    value: dict = {}
    inner = value
    for _ in range(levels):
        inner["x"] = {}
        inner = inner["x"]
    return value


@pytest.mark.parametrize("shape", ["cyclic", "deep"])
@pytest.mark.parametrize("source", ["model-metadata", "criterion-details"])
def test_a_value_that_contains_itself_or_nests_without_end_is_stored_as_a_stand_in(
        shape: str, source: str, tmp_path: Path) -> None:
    """Storing such a value recursed until RecursionError, which took the run down."""
    from referee.report.store import load_run

    make = {"cyclic": _cyclic, "deep": _deep}[shape]

    class KeepsDetails(BaseCriterion):
        name = "keeps-details"

        async def evaluate(self, actual, expected) -> CriterionResult:
            extra = {"evidence": make()} if source == "criterion-details" else {}
            return self._result(1.0, {"reason": "fine", **extra})

    def model(prompt: str):
        if source == "model-metadata":
            return {"output": GOOD, "metadata": {"trace": make()}}
        return GOOD

    suite = EvalSuite("self-containing")
    suite.add_cases([EvalCase(input=p, name=p) for p in ("a", "b")])
    suite.add_evaluator(KeepsDetails())
    report = suite.run(model, verbose=False, runs_dir=tmp_path, formats=["json", "junit", "html"])
    assert [c.status for c in report.cases] == [CaseStatus.PASSED] * 2
    where = "execution.metadata.trace" if source == "model-metadata" else "details.evidence"
    for case in load_run(report.metadata["run_dir"]).cases:
        assert case.status == CaseStatus.PASSED
        assert any(where in c.path and c.stored_as == "repr()" for c in case.converted), \
            case.converted


def test_an_execution_result_of_another_package_is_named_by_its_module() -> None:
    """An agent still returning the peer package's ExecutionResult (one import left unchanged)
    read "model returned ExecutionResult; expected str, dict or ExecutionResult"."""

    class ExecutionResult:  # what ``tenxgraph.qa.evaluation`` would hand back
        actual_response = GOOD

    suite = EvalSuite("foreign-result")
    suite.add_cases([EvalCase(input="q", name="q")])
    suite.add_evaluator(Contains(["30 days"]))
    report = suite.run(lambda prompt: ExecutionResult(), verbose=False, save=False)
    [case] = report.cases
    assert case.status == CaseStatus.MODEL_ERROR
    assert f"model returned {__name__}." in (case.error or ""), case.error


def test_a_result_left_as_built_is_not_validated_again_and_every_changed_field_is() -> None:
    # Validating every result again cost 13-16 us per object (benchmarks/micro_costs.py), on
    # every case and criterion: a result whose fields hold exactly their types is kept.
    import numpy as np

    from referee import ExecutionResult
    from referee._strict import checked_again, well_typed
    from referee.case import ToolCall
    from referee.usage import TokenUsage

    result = CriterionResult(criterion="c", score=1.0, passed=True, threshold=1, details={"a": 1},
                             token_usage=TokenUsage(input_tokens=3), error_kind="judge")
    execution = ExecutionResult(actual_response="x", tool_calls=[ToolCall(name="t", args={})],
                                latency_s=0.5)
    assert checked_again(result, "r") is result and checked_again(execution, "e") is execution
    changes = [("score", np.float64(0.5)), ("score", None), ("passed", 1), ("details", {1: "a"}),
               ("error", "a changed error"), ("error_kind", "other"), ("error_kind", ["judge"]),
               ("token_usage", {"input_tokens": 3})]
    for field, value in changes:
        changed = result.model_copy()
        setattr(changed, field, value)
        assert not well_typed(changed), (field, value)
    nested = result.model_copy(deep=True)
    nested.token_usage.input_tokens = "3"  # type: ignore[union-attr,assignment]
    for field, value in [("actual_response", None), ("tool_calls", ["t"]), ("tool_calls", None),
                         ("latency_s", "0.5"), ("node_visits", [1])]:
        changed = execution.model_copy()
        setattr(changed, field, value)
        assert not well_typed(changed), (field, value)
    assert not well_typed(nested)  # a nested model is looked into as well
