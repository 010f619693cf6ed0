"""One public front door to a run, ``run_evaluation(RunRequest, RunOptions)``: EvalSuite,
AgentEvaluator and UserSimulator come in by it, and none drives the stored run itself
(issue 29)."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path
from typing import Any

import pytest

import referee.run.evaluation as evaluation
from referee import AgentEvaluator, EvalCase, EvalSuite
from referee.errors import EvalGateFailure
from referee.evaluators import Contains
from referee.run import RunOptions, RunRequest, run_evaluation
from referee.run.engine import ModelCaller

PACKAGE = Path(__file__).resolve().parent.parent / "referee"


@pytest.mark.parametrize("module", ["run/suite.py", "run/agent.py", "run/simulator.py",
                                    "adapters/_traces.py", "calibrate/_run.py", "cli.py"])
def test_no_front_door_drives_the_stored_run_itself(module: str) -> None:
    names = {alias.name for node in ast.walk(ast.parse((PACKAGE / module).read_text()))
             if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert "run_evaluation" in names
    assert not names & {"run_stored", "gate"}


def test_eval_suite_and_agent_evaluator_come_in_by_the_front_door(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    stored = evaluation.run_stored

    async def counting(**fields: Any) -> Any:
        seen.append(fields["name"])
        return await stored(**fields)

    monkeypatch.setattr(evaluation, "run_stored", counting)
    case = EvalCase(input="q", expected_output="ok", eval_id="c")
    EvalSuite("suite").add_cases([case]).add_evaluators(Contains(["ok"])).run(
        lambda q: "ok", verbose=False, runs_dir=tmp_path)
    AgentEvaluator(lambda message: "ok", criteria=[Contains(["ok"])], runs_dir=tmp_path
                   ).evaluate_sync([case], verbose=False)
    assert seen == ["suite", "eval set"]


def test_a_request_runs_through_the_front_door_and_sees_its_report_before_the_gates(
        tmp_path: Path) -> None:
    seen = []

    async def execute(case: EvalCase, caller: ModelCaller) -> str:
        return "no"

    request = RunRequest(name="direct", cases=[EvalCase(input="q", eval_id="c")],
                         criteria=[Contains(["ok"])], execute=execute, model_id="m",
                         after_run=seen.append)
    options = RunOptions(runs_dir=tmp_path, verbose=False, fail_threshold=1.0)
    with pytest.raises(EvalGateFailure) as failure:
        asyncio.run(run_evaluation(request, options))
    (report,) = seen
    assert failure.value.report is report and report.failed == 1 and report.model_id == "m"
    assert report.run_dir is not None and (report.run_dir / "report.json").is_file()
