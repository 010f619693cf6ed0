"""Carrying a framework's own conversation state from one turn to the next.

AgentEvaluator calls the agent once per turn with the earlier turns as ``TurnResult``s; a
framework needs its native history instead (the Agents SDK's ``to_input_list()``, LangGraph's
messages). The adapter files that history under the turns it produced, and finds it again from
the ``history`` it is handed, so concurrent cases never share state.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from referee.case import canonical_json
from referee.execution import TurnResult


def _key(turns: Sequence[TurnResult]) -> str:
    return canonical_json([[turn.user_content, turn.response] for turn in turns])


class NativeHistory:
    """History-keyed store: ``recall(history)`` returns what ``keep(turns, state)`` filed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._states: dict[str, list[Any]] = {}

    def keep(self, turns: Sequence[TurnResult], state: Any) -> None:
        with self._lock:
            self._states.setdefault(_key(turns), []).append(state)

    def recall(self, history: Sequence[TurnResult]) -> Any:
        """The framework's state after ``history``; None for a first turn."""
        if not history:
            return None
        with self._lock:
            states = self._states.get(_key(history))
            if states:
                state = states.pop()
                if not states:
                    del self._states[_key(history)]
                return state
        raise RuntimeError(f"turn {len(history) + 1} of a conversation whose earlier turns this "
                           f"adapter did not run; call it for every turn, from the first")
