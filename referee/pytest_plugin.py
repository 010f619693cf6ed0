"""referee's pytest plugin, registered through the ``pytest11`` entry point."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import pytest

if TYPE_CHECKING:
    from referee.testing import ScriptedJudgeServer


@pytest.fixture
def judge_server() -> Iterator["ScriptedJudgeServer"]:
    """A running ScriptedJudgeServer on 127.0.0.1; ``judge_server.judge_config(...)`` points at it."""
    from referee.testing import ScriptedJudgeServer

    with ScriptedJudgeServer() as server:
        yield server
