"""Issue 10, section 3: values JSON cannot hold stay in their case as marked stand-ins.

Objects, bytes, lone surrogates and NaN, returned by a model (text, tool args, tool results,
metadata) or by a custom criterion (details, score): the run and every report are written,
each stand-in is listed on its case, and the report warns about them.
"""

from __future__ import annotations

import base64
import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from referee import EvalCase, EvalSuite, ExecutionResult
from referee.case import ToolCall
from referee.criteria.base import BaseCriterion
from referee.evaluators.deterministic import Contains
from referee.report.model import CaseStatus
from referee.report.store import load_run
from referee.result import CriterionResult


class Opaque:
    """A value no serialiser knows."""

    def __repr__(self) -> str:
        return "Opaque(handle=42)"


class UnreprOpaque:
    def __repr__(self) -> str:
        raise RuntimeError("no repr either")


RAW = b"\x89PNG\x00\xff"


def hostile_model(prompt: str) -> ExecutionResult:
    if prompt != "hostile":
        return ExecutionResult(actual_response="Refunds within 30 days.")
    return ExecutionResult(
        actual_response="Refunds within 30 days \ud83d and \ud83d\ude00.",  # lone, then a pair
        tool_calls=[ToolCall(name="fetch", args={"blob": RAW, "ok": "yes", "index": {Opaque(): 1}},
                             result=Opaque())],
        metadata={"session": UnreprOpaque(), "ratio": math.nan, "ceiling": -math.inf,
                  "nested": [{"text": "caf\udce9"}], "utf8": "naïve".encode()},
        latency_s=math.nan,
    )


class DetailedCriterion(BaseCriterion):
    """A user's criterion that puts odd things in details; one case gets a NaN score."""

    name = "detailed"
    threshold = 0.5

    async def evaluate(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        score = math.nan if expected.input == "nan-score" else 1.0
        details = {"trace": Opaque(), "weights": [0.5, math.inf]} if expected.input == "hostile" else {}
        return CriterionResult(criterion=self.name, score=score, passed=True, threshold=0.5,
                               details=details)


def _strict_json(text: str):
    def refuse(constant: str):
        raise AssertionError(f"non-standard JSON constant {constant}")
    return json.loads(text, parse_constant=refuse)


def test_unstorable_values_are_stored_as_marked_stand_ins(tmp_path: Path, capsys) -> None:
    suite = EvalSuite("unstorable")
    suite.add_cases([EvalCase(input=p, name=p) for p in ("hostile", "plain", "nan-score")])
    suite.add_evaluator(Contains(["30 days"]))
    suite.add_evaluator(DetailedCriterion())
    report = suite.run(hostile_model, verbose=True, runs_dir=tmp_path,
                       formats=["console", "json", "junit", "html"])

    got = {c.name: c for c in report.cases}
    assert got["hostile"].status == CaseStatus.PASSED
    assert got["plain"].status == CaseStatus.PASSED
    # A NaN score is no verdict: that criterion is the evaluator's error, stored as 0.0.
    nan_case = got["nan-score"]
    assert nan_case.status == CaseStatus.EVALUATOR_ERROR
    nan_result = nan_case.get_criterion_result("detailed")
    assert nan_result.error_kind == "evaluator" and "score of nan" in nan_result.error
    assert nan_result.score == 0.0

    [run_dir] = [p for p in tmp_path.iterdir() if p.is_dir()]
    lines = (run_dir / "cases.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3 and all(_strict_json(line) for line in lines)
    stored = {c.name: c for c in load_run(run_dir).cases}
    hostile = stored["hostile"]

    # Faithful stand-ins.
    execution = hostile.execution
    assert execution.actual_response == "Refunds within 30 days \ufffd and \U0001F600."
    call = execution.tool_calls[0]
    assert call.result == "Opaque(handle=42)"
    assert base64.b64decode(call.args["blob"]) == RAW
    assert call.args["ok"] == "yes" and call.args["index"] == {"Opaque(handle=42)": 1}
    assert execution.metadata["session"].startswith("<UnreprOpaque object")
    assert execution.metadata["ratio"] == "NaN" and execution.metadata["ceiling"] == "-Infinity"
    assert execution.metadata["nested"] == [{"text": "caf\ufffd"}]
    assert execution.metadata["utf8"] == "naïve"
    assert execution.latency_s is None
    details = hostile.get_criterion_result("detailed").details
    assert details == {"trace": "Opaque(handle=42)", "weights": [0.5, "Infinity"]}

    # Each one marked on its case.
    marked = {c.path: c.stored_as for c in hostile.converted}
    assert marked == {
        "execution.actual_response": "U+FFFD for each lone surrogate",
        "execution.tool_calls[0].args.blob": "base64",
        "execution.tool_calls[0].args.index key Opaque(handle=42)": "repr()",
        "execution.tool_calls[0].result": "repr()",
        "execution.latency_s": "null",
        "execution.metadata.session": "repr()",
        "execution.metadata.ratio": '"NaN"',
        "execution.metadata.ceiling": '"-Infinity"',
        "execution.metadata.nested[0].text": "U+FFFD for each lone surrogate",
        "criterion_results[1].details.trace": "repr()",
        "criterion_results[1].details.weights[1]": '"Infinity"',
    }
    assert stored["plain"].converted == [] and stored["nan-score"].converted == []

    # And the report says so, in every format that a person reads.
    data = _strict_json((run_dir / "report.json").read_text(encoding="utf-8"))
    [warning] = data["warnings"]
    assert warning.startswith("11 value(s) in 1 case(s) could not be stored as JSON")
    assert "execution.tool_calls[0].args.blob: bytes (6) stored as base64" in warning
    assert report.warnings == data["warnings"]
    console = capsys.readouterr().out
    assert "Warning: 11 value(s) in 1 case(s) could not be stored" in console
    assert "could not be stored as JSON" in (run_dir / "report.html").read_text(encoding="utf-8")
    suites = ET.parse(run_dir / "junit.xml").getroot()
    assert suites.iter("testcase")


def test_the_users_own_objects_are_not_modified(tmp_path: Path) -> None:
    shared = ExecutionResult(actual_response="30 days", metadata={"blob": b"\xff"})
    suite = EvalSuite("untouched")
    suite.add_cases([EvalCase(input="a", name="a")])
    suite.add_evaluator(Contains(["30 days"]))
    report = suite.run(lambda prompt: shared, verbose=False, runs_dir=tmp_path)
    assert shared.metadata == {"blob": b"\xff"}
    assert report.cases[0].execution.metadata == {"blob": "/w=="}


@pytest.mark.parametrize("value", [float("nan"), b"\xff", "\udfff", Opaque()])
def test_run_on_cases_stores_unstorable_outputs_too(tmp_path: Path, value) -> None:
    suite = EvalSuite("pairs")
    suite.add_evaluator(Contains(["30 days"]))
    output = ExecutionResult(actual_response="30 days", metadata={"v": value})
    report = suite.run_on_cases([(EvalCase(input="q"), output)], verbose=False, runs_dir=tmp_path)
    [case] = report.cases
    assert case.status == CaseStatus.PASSED
    assert [c.path for c in case.converted] == ["execution.metadata.v"]
