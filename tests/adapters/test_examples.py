"""The framework examples run offline and pass."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_openai_agents_example_passes():
    pytest.importorskip("agents")
    report = load(EXAMPLES / "openai_agents" / "eval_agents_sdk.py").main()
    assert (report.total, report.passed) == (1, 1), report.cases[0].criterion_results
    assert report.cases[0].execution.node_visits == ["triage", "orders"] * 2


def test_langgraph_example_passes():
    pytest.importorskip("langgraph")
    pytest.importorskip("langchain_openai")
    report = load(EXAMPLES / "langgraph" / "eval_langgraph.py").main()
    assert (report.total, report.passed) == (1, 1), report.cases[0].criterion_results
    assert report.cases[0].execution.node_visits == ["assistant", "tools", "assistant"] * 2


@pytest.mark.parametrize("script,needs", [
    ("openai_agents/eval_agents_sdk.py", ("agents",)),
    ("langgraph/eval_langgraph.py", ("langgraph", "langchain_openai")),
])
def test_an_example_run_as_a_script_prints_its_summary_and_where_the_run_is(tmp_path, script,
                                                                            needs):
    for module in needs:
        pytest.importorskip(module)
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path)
    env.pop("REFEREE_RUNS_DIR", None)
    done = subprocess.run([sys.executable, str(EXAMPLES / script)], capture_output=True,
                          text=True, timeout=180, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    [run_dir] = (tmp_path / ".referee" / "runs").iterdir()
    assert f"Run stored in .referee/runs/{run_dir.name}" in done.stdout
    assert "pass rate" in done.stdout and "100.0%" in done.stdout
