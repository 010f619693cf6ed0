"""A resume keeps the run's label unless it is given a new one (issue 31, item 3)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from referee import EvalCase
from referee.cli import main
from referee.run.agent import AgentEvaluator

SUITE = """
    from referee import EvalCase, EvalSuite
    from referee.evaluators.deterministic import Contains
    suite = EvalSuite("labels")
    suite.add_cases([EvalCase(input=f"question {{i}}") for i in range(3)])
    suite.add_evaluator(Contains([{needle!r}]))
    def {function}(prompt):
        return "refunds within 30 days"
    model = {function}
"""


def _suite(tmp_path: Path, function: str, needle: str) -> Path:
    path = tmp_path / f"{function}.py"
    path.write_text(textwrap.dedent(SUITE.format(function=function, needle=needle)))
    return path


def _labels(run_dir: Path) -> tuple[str, str]:
    meta = json.loads((run_dir / "meta.json").read_text())
    report = json.loads((run_dir / "report.json").read_text())
    return meta["model_id"], report["model_id"]


def test_a_rescore_without_a_label_keeps_the_runs_label(tmp_path: Path, capsys) -> None:
    runs = tmp_path / "runs"
    broken = _suite(tmp_path, "broken_model", "30 days")
    assert main(["run", str(broken), "--out", str(runs), "--label", "broken-v2", "-q"]) == 0
    (run_dir,) = runs.iterdir()
    other = _suite(tmp_path, "other_model", "60 days")
    assert main(["run", str(other), "--resume", str(run_dir), "--rescore", "-q"]) == 0
    assert _labels(run_dir) == ("broken-v2", "broken-v2")
    assert json.loads((run_dir / "versions" / "1" / "meta.json").read_text())["model_id"] \
        == "broken-v2"
    capsys.readouterr()
    assert main(["list", "--dir", str(runs)]) == 0
    listed = capsys.readouterr().out
    assert "broken-v2" in listed and "other_model" not in listed


def test_a_plain_resume_keeps_the_label_and_a_given_label_replaces_it(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    broken = _suite(tmp_path, "broken_model", "30 days")
    assert main(["run", str(broken), "--out", str(runs), "--label", "broken-v2", "-q"]) == 0
    (run_dir,) = runs.iterdir()
    assert main(["run", str(broken), "--resume", str(run_dir), "-q"]) == 0
    assert _labels(run_dir) == ("broken-v2", "broken-v2")
    other = _suite(tmp_path, "other_model", "60 days")
    assert main(["run", str(other), "--resume", str(run_dir), "--rescore", "--label", "v3",
                 "-q"]) == 0
    assert _labels(run_dir) == ("v3", "v3")


def test_an_unlabelled_run_is_named_after_its_function_and_resumes_so(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    first = _suite(tmp_path, "first_model", "30 days")
    assert main(["run", str(first), "--out", str(runs), "-q"]) == 0
    (run_dir,) = runs.iterdir()
    second = _suite(tmp_path, "second_model", "60 days")
    assert main(["run", str(second), "--resume", str(run_dir), "--rescore", "-q"]) == 0
    assert _labels(run_dir) == ("first_model", "first_model")


def test_an_agent_evaluators_resume_keeps_the_label_it_was_given(tmp_path: Path) -> None:
    def first_agent(message: str) -> str:
        return "done"

    def second_agent(message: str) -> str:
        return "done"

    cases = [EvalCase(eval_id=f"c{i}", input=f"question {i}") for i in range(2)]
    labelled = AgentEvaluator(first_agent, model_id="agent-v1", criteria=[])
    report = labelled.evaluate_sync(cases, output_dir=tmp_path, verbose=False)
    run_dir = Path(report.metadata["run_dir"])
    resumed = AgentEvaluator(second_agent, criteria=[])
    assert resumed.model_id == "second_agent"
    again = resumed.evaluate_sync(cases, resume=run_dir, rescore=True, verbose=False)
    assert again.model_id == "agent-v1" and _labels(run_dir) == ("agent-v1", "agent-v1")
    relabelled = AgentEvaluator(second_agent, criteria=[])
    relabelled.model_id = "agent-v2"
    assert relabelled.evaluate_sync(cases, resume=run_dir, rescore=True,
                                    verbose=False).model_id == "agent-v2"
