"""referee's pytest plugin, registered through the ``pytest11`` entry point.

Gives tests ``assert_passes`` (also importable from here), the ``judge_server`` fixture, and a
one-line summary of the session's assert_passes checks at the end of the run. Everything heavy
is imported lazily, so the plugin costs nothing in projects that do not use it.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Iterator

import pytest

if TYPE_CHECKING:
    from referee.testing import ScriptedJudgeServer


@pytest.fixture
def judge_server() -> Iterator["ScriptedJudgeServer"]:
    """A running ScriptedJudgeServer on 127.0.0.1; ``judge_server.judge_config(...)`` points at it."""
    from referee.testing import ScriptedJudgeServer

    with ScriptedJudgeServer() as server:
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
