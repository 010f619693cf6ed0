"""``referee run`` builds its RunOptions once, changes none of the user's objects, and runs
through the one front door, ``run_evaluation`` (issue 29)."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import pytest

import referee.cli as cli
import referee.run.evaluation as evaluation
from referee import AgentEvaluator, EvalCase, EvalConfig, EvalSuite
from referee.evaluators import Contains
from referee.run.options import RunOptions


def _module(**names: Any) -> types.ModuleType:
    module = types.ModuleType("user_target")
    module.__dict__.update(names)
    return module


@pytest.fixture()
def seen(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, RunOptions]]:
    """Each (request, options) that reached the front door; and how many RunOptions were built."""
    calls: list[tuple[Any, RunOptions]] = []
    real = evaluation.run_evaluation

    async def spy(request: Any, options: RunOptions) -> Any:
        calls.append((request, options))
        return await real(request, options)

    monkeypatch.setattr(evaluation, "run_evaluation", spy)
    return calls


def _count_options(monkeypatch: pytest.MonkeyPatch) -> list[RunOptions]:
    built: list[RunOptions] = []
    real_init = RunOptions.__init__

    def counting(self: RunOptions, **values: Any) -> None:
        real_init(self, **values)
        built.append(self)

    monkeypatch.setattr(RunOptions, "__init__", counting)
    return built


def test_an_agent_evaluator_is_run_without_being_changed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        seen: list[tuple[Any, RunOptions]]) -> None:
    evaluator = AgentEvaluator(lambda message: "ok", EvalConfig(timeout=30.0),
                               criteria=[Contains(["ok"])], model_id="mine")
    config_before = evaluator.config
    module = _module(evaluator=evaluator, eval_set=[EvalCase(input="q", eval_id="c")])
    monkeypatch.setattr(cli, "load_python_file", lambda path: module)
    built = _count_options(monkeypatch)
    target = tmp_path / "agent_target.py"
    target.write_text("# loaded through the patched loader\n")
    args = cli.build_parser().parse_args(["run", str(target), "--timeout", "5", "--label",
                                          "cli-label", "--out", str(tmp_path), "-q"])
    names_before = set(vars(args))

    assert cli.cmd_run(args) == 0

    assert evaluator.config is config_before and evaluator.config.timeout == 30.0
    assert evaluator.model_id == "mine"
    assert set(vars(args)) == names_before  # nothing stashed on the namespace
    (request, options), = seen
    assert built == [options] and options.timeout == 5.0 and options.run_id
    stored = json.loads((options.run_dir / "report.json").read_text())
    assert stored["model_id"] == "cli-label"
    assert stored["config_used"]["timeout"] == 5.0  # what the run used, as before
    assert request.execute == evaluator._execute


def test_a_suite_is_run_without_being_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              seen: list[tuple[Any, RunOptions]]) -> None:
    suite = EvalSuite("kept").add_cases([EvalCase(input="q", eval_id="c")]).add_evaluators(
        Contains(["ok"]))

    def model(question: str) -> str:
        return "ok"

    monkeypatch.setattr(cli, "load_python_file", lambda path: _module(suite=suite, model=model))
    built = _count_options(monkeypatch)
    target = tmp_path / "suite_target.py"
    target.write_text("# loaded through the patched loader\n")
    assert cli.main(["run", str(target), "--label", "cli-label", "--out", str(tmp_path),
                     "-q", "--concurrency", "2"]) == 0
    assert suite.model_id == ""
    (request, options), = seen
    assert built == [options] and options.concurrency == 2
    assert request.model_id == "cli-label" and options.metadata == {"target": str(target)}
    assert options.run_dir is not None and (options.run_dir / "meta.json").is_file()


def test_an_agent_evaluators_defaults_lie_under_the_flags(tmp_path: Path) -> None:
    evaluator = AgentEvaluator(lambda m: "ok", EvalConfig(parallel=True, max_concurrency=3,
                                                          timeout=9.0), runs_dir=tmp_path)
    assert evaluator.option_defaults() == {"concurrency": 3, "timeout": 9.0, "save": True,
                                           "runs_dir": tmp_path}
    assert evaluator.run_options().concurrency == 3
    assert evaluator.run_options(parallel=False).concurrency == 1
    assert evaluator.run_options(max_concurrency=5, output_dir=tmp_path / "o").runs_dir == \
        tmp_path / "o"
