"""The framework examples run offline and pass."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


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
