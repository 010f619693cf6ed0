"""A stored case line leaves out the fields that hold their default, and reads back whole
(issue 31, item 8: disk per case at scale)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

# The benchmark lives at the repository root, outside the installed package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.scale import GeneratedCases, model  # noqa: E402
from referee import EvalCase, EvalSuite  # noqa: E402
from referee.config import CriterionConfig, MatchType  # noqa: E402
from referee.criteria.trajectory import TrajectoryMatchCriterion  # noqa: E402
from referee.evaluators.deterministic import Contains  # noqa: E402
from referee.record import CaseResult  # noqa: E402
from referee.store import StoredCases  # noqa: E402


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
