"""A stored case line leaves out the fields that hold their default, and reads back whole
(issue 31, item 8: disk per case at scale)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

# The benchmark lives at the repository root, outside the installed package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pytest  # noqa: E402

from benchmarks.scale import GeneratedCases, model  # noqa: E402
from referee import EvalCase, EvalSuite, ExecutionResult, ToolCall  # noqa: E402
from referee.config import CriterionConfig, MatchType  # noqa: E402
from referee.criteria.trajectory import TrajectoryMatchCriterion  # noqa: E402
from referee.errors import InputError  # noqa: E402
from referee.evaluators.deterministic import Contains  # noqa: E402
from referee.record import CaseResult  # noqa: E402
from referee.report.writers import write_reports  # noqa: E402
from referee.result import CriterionResult  # noqa: E402
from referee.store import RunStore, StoredCases, load_run  # noqa: E402
from referee.store._case_line import RESTORE_KEY, case_line, read_case_line  # noqa: E402


def _scale_suite() -> EvalSuite:
    suite = EvalSuite("scale", model_id="scripted").stream_cases(GeneratedCases(4))
    suite.add_evaluators(Contains(["refund"]), TrajectoryMatchCriterion(
        CriterionConfig.trajectory(threshold=1.0, match_type=MatchType.IN_ORDER,
                                   check_args=True)))
    return suite


def test_the_scale_workloads_line_holds_no_default_and_stays_small(tmp_path: Path) -> None:
    report = _scale_suite().run(model, verbose=False, runs_dir=tmp_path)
    lines = (Path(report.metadata["run_dir"]) / "cases.jsonl").read_text().splitlines()
    record = json.loads(lines[1])
    for unset in ("traceback", "run_results", "converted", "error", "token_usage", "metadata"):
        assert unset not in record, unset
    assert "description" not in record["case"] and "session_input" not in record["case"]
    assert all("call_id" not in call and "result" not in call
               for call in record["execution"]["tool_calls"])
    # 3,304 bytes when every default was written out; the durations vary by a few bytes.
    assert len(lines[1].encode()) < 2_700


def test_a_line_without_its_defaults_reads_back_as_the_case_result(tmp_path: Path) -> None:
    def flaky(prompt: str) -> str:
        if prompt == "boom":
            raise RuntimeError("upstream unavailable")
        return "refund issued"

    suite = EvalSuite("odd").add_cases([EvalCase(input="q", name="plain"),
                                        EvalCase(input="boom", tags=["x"]),
                                        EvalCase(input="")])
    suite.add_evaluator(Contains(["refund"]))
    in_memory = suite.run(flaky, verbose=False, save=False, runs=2)
    for result in in_memory.cases:
        line = result.model_dump_json(exclude_defaults=True)
        assert CaseResult.model_validate_json(line) == result
    stored = suite.run(flaky, verbose=False, runs_dir=tmp_path, runs=2)
    read_back = list(StoredCases(Path(stored.metadata["run_dir"]) / "cases.jsonl"))
    assert [c.status for c in read_back] == [c.status for c in in_memory.cases]
    assert read_back[1].traceback and len(read_back[0].run_results) == 2


# The trajectory criterion's copies of the line's own calls (issue 31, item 8) --------------

def _old_line(result: CaseResult) -> str:
    """The line as the store wrote it before it left those copies out."""
    return result.model_dump_json(exclude_defaults=True)


def _reads_back_exactly(result: CaseResult) -> CaseResult:
    """What reading the stored line gives, checked against reading the line of before: the
    same values, types and order of keys (the JSON a reader writes out is the same)."""
    before = CaseResult.model_validate_json(_old_line(result))
    after = read_case_line(case_line(result).encode())
    assert after == before
    assert after.model_dump_json() == before.model_dump_json()
    for was, now in zip(before.criterion_results, after.criterion_results):
        assert list(now.details) == list(was.details)  # the details keep their order
    return after


def test_the_scale_workloads_line_stores_each_trajectory_once_and_reads_back_whole(
        tmp_path: Path) -> None:
    report = _scale_suite().run(model, verbose=False, runs_dir=tmp_path)
    run_dir = Path(report.metadata["run_dir"])
    lines = (run_dir / "cases.jsonl").read_text().splitlines()
    record = json.loads(lines[1])
    details = record["criterion_results"][1]["details"]
    assert details["expected_trajectory"] is None and details["actual_trajectory"] is None
    assert record[RESTORE_KEY] == {
        "criterion_results.1.details.expected_trajectory": "case.expected_tool_trajectory",
        "criterion_results.1.details.actual_trajectory": "execution.tool_calls"}
    # 2,608 bytes with both copies; the durations vary by a few bytes.
    assert len(lines[1].encode()) < 2_200

    in_memory = _scale_suite().run(model, verbose=False, save=False)
    for stored, kept in zip(StoredCases(run_dir / "cases.jsonl"), in_memory.cases):
        assert stored == _reads_back_exactly(stored)
        trajectory = stored.criterion_results[1].details
        assert trajectory == {**kept.criterion_results[1].details,
                              "reason": trajectory["reason"]}
        assert trajectory["expected_trajectory"][2] == {
            "name": "issue_refund", "args": {"order_id": f"A{100000 + stored.index}",
                                             "amount": 10 + stored.index % 90},
            "result": None, "call_id": None}
        assert [c["name"] for c in trajectory["actual_trajectory"]] == [
            "lookup_order", "lookup_customer", "check_policy", "issue_refund"]
    loaded = load_run(run_dir)
    assert list(loaded.cases) == list(StoredCases(run_dir / "cases.jsonl"))


def _odd_calls_model(prompt: str) -> ExecutionResult:
    inner = ToolCall(name="verify", args={"invoice": "INV-7", "amount": 1.0},
                     nested_calls=[ToolCall(name="audit", args=None)])
    calls = [ToolCall(name="lookup", args={"id": 7, "ratio": 0.1, "big": 10**30, "flag": True,
                                           "nested": {"b": [1, 2.5, None], "a": "ü ✓ 😀"},
                                           "pair": (1, 2)},
                      result={"found": True}, call_id="c1"),
              ToolCall(name="checker", args={"invoice": "INV-7"}, nested_calls=[inner]),
              ToolCall(name="odd", args={"nan": float("nan"), "obj": object()}),
              ToolCall(name="unrecorded", args=None, result="ok")]
    return ExecutionResult(actual_response=f"done: {prompt}", tool_calls=calls)


def _odd_cases() -> list[EvalCase]:
    expected = [ToolCall(name="lookup", args={"id": 7.0}), ToolCall(name="verify", args={}),
                ToolCall(name="unrecorded")]
    return [
        EvalCase.single_turn("plain", expected_tool_trajectory=expected),
        EvalCase.multi_turn([{"user_content": "first", "expected_tool_trajectory": expected[:1]},
                             {"user_content": "second", "expected_tool_trajectory": expected[1:]}],
                            metadata={"_restore": {"criterion_results.0.details.x": "case"}}),
        EvalCase(input="no expectations", tags=["_restore"]),
    ]


def _odd_suite() -> EvalSuite:
    suite = EvalSuite("odd-calls").add_cases(_odd_cases())
    suite.add_evaluators(
        TrajectoryMatchCriterion(CriterionConfig.trajectory(match_type=MatchType.ANY_ORDER,
                                                            check_args=True)),
        TrajectoryMatchCriterion(CriterionConfig.trajectory(match_type=MatchType.IN_ORDER,
                                                            include_nested=True)))
    return suite


def test_odd_calls_runs_and_nested_calls_read_back_as_written(tmp_path: Path) -> None:
    in_memory = _odd_suite().run(_odd_calls_model, verbose=False, save=False, runs=2)
    kinds: set[str] = set()
    for result in in_memory.cases:
        _reads_back_exactly(result)
        for run in result.run_results:
            assert run.case is None  # a run's expected calls are its case's
        kinds.update(json.loads(case_line(result)).get(RESTORE_KEY, {}).values())
    # Each way a details value can copy the line's calls was left out somewhere.
    assert kinds == {"case.expected_tool_trajectory", "execution.tool_calls",
                     "execution.tool_calls, flattened"}
    record = json.loads(case_line(in_memory.cases[0]))
    assert "run_results.1.criterion_results.1.details.actual_trajectory" in record[RESTORE_KEY]
    assert record["run_results"][1]["criterion_results"][1]["details"]["actual_trajectory"] is None

    stored = _odd_suite().run(_odd_calls_model, verbose=False, runs_dir=tmp_path)
    run_dir = Path(stored.metadata["run_dir"])
    read_back = list(StoredCases(run_dir / "cases.jsonl"))
    for line in (run_dir / "cases.jsonl").read_bytes().splitlines():
        assert RESTORE_KEY.encode() in line
        _reads_back_exactly(read_case_line(line))
    nested = read_back[0].criterion_results[1].details["actual_trajectory"]
    assert [c["name"] for c in nested] == ["lookup", "checker", "verify", "audit", "odd",
                                           "unrecorded"]
    assert nested[3]["args"] is None and nested[0]["args"]["big"] == 10**30
    assert read_back[1].case is not None
    assert read_back[1].case.metadata["_restore"] == {"criterion_results.0.details.x": "case"}


def test_a_value_that_only_looks_like_the_calls_is_stored_as_it_is() -> None:
    calls = [ToolCall(name="lookup", args={"id": 7})]
    case = EvalCase.single_turn("q", expected_tool_trajectory=calls)
    dumped = [c.model_dump() for c in calls]
    unlike = [
        [{**dumped[0], "args": {"id": 7.0}}],  # 7.0 is not 7
        [{**dumped[0], "args": {"id": True}}],
        [{"args": {"id": 7}, "name": "lookup", "result": None, "call_id": None}],  # key order
        [*dumped, *dumped],
        "lookup",
    ]
    for value in unlike:
        result = CaseResult(
            eval_id=case.eval_id, status="PASSED", case=case,
            execution=ExecutionResult(tool_calls=calls),
            criterion_results=[CriterionResult(criterion="c", score=1.0, passed=True,
                                               details={"expected_trajectory": value,
                                                        "actual_trajectory": dumped})])
        line = json.loads(case_line(result))
        assert line["criterion_results"][0]["details"]["expected_trajectory"] == value
        assert line[RESTORE_KEY] == {
            "criterion_results.0.details.actual_trajectory": "execution.tool_calls"}
        _reads_back_exactly(result)


def test_lines_stored_before_read_as_they_did_and_a_bad_restore_is_a_damaged_line(
        tmp_path: Path) -> None:
    in_memory = _scale_suite().run(model, verbose=False, save=False)
    result = in_memory.cases[0]
    for older in (result.model_dump_json(), _old_line(result)):  # with and without defaults
        assert read_case_line(older.encode()) == CaseResult.model_validate_json(older)

    report = _scale_suite().run(model, verbose=False, runs_dir=tmp_path)
    run_dir = Path(report.metadata["run_dir"])
    path = run_dir / "cases.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    lines[2] = lines[2].replace("criterion_results.1.details.actual", "criterion_results.7.details.actual")
    path.write_text("".join(lines))
    store = RunStore(run_dir)
    assert [c.index for c in store.read_cases()] == [0, 1, 3]
    assert store.damage == [
        "cases.jsonl line 3: unreadable: _restore names "
        "'criterion_results.7.details.actual_trajectory', which this line does not hold; "
        "that case is left out and runs again on --resume"]
    with pytest.raises(InputError, match="unreadable case record: _restore names"):
        StoredCases(path)[2]


def test_every_report_of_a_run_is_what_it_was_with_the_copies_stored(tmp_path: Path) -> None:
    report = _odd_suite().run(_odd_calls_model, verbose=False, runs_dir=tmp_path / "runs")
    run_dir = Path(report.metadata["run_dir"])
    before = tmp_path / "before" / run_dir.name  # the same run, stored as before
    shutil.copytree(run_dir, before)
    lines = (run_dir / "cases.jsonl").read_bytes().splitlines()
    (before / "cases.jsonl").write_text(
        "".join(_old_line(read_case_line(line)) + "\n" for line in lines))
    assert (before / "cases.jsonl").stat().st_size > (run_dir / "cases.jsonl").stat().st_size

    rendered = {}
    for directory in (run_dir, before):
        written = write_reports(load_run(directory), directory, ["json", "junit", "html"])
        rendered[directory] = {  # report.json names the run's first directory
            name: path.read_text().replace(str(directory), "RUN").replace(str(run_dir), "RUN")
            for name, path in written.items()}
    assert rendered[run_dir] == rendered[before]
