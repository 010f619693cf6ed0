"""Carrying a framework's own conversation state from one turn to the next.

AgentEvaluator calls the agent once per turn with the earlier turns as ``TurnResult``s; a
framework needs its native history instead (the Agents SDK's ``to_input_list()``, LangGraph's
messages). The adapter files that history under the turns it produced, and finds it again from
the ``history`` it is handed, so concurrent cases never share state. That native history holds
the earlier turns' images and PDFs in the framework's own shape, as each turn sent them.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from referee.case import canonical_json
from referee.content._parts import TextPart
from referee.execution import TurnResult


def _key(turns: Sequence[TurnResult]) -> str:
    return canonical_json([[turn.user_text, turn.response] for turn in turns])


def _media(turns: Sequence[TurnResult]) -> list[list[str]]:
    """Each turn's images and PDFs by hash: two conversations that say the same words about
    different pictures are different conversations."""
    return [[part.content_key() for part in turn.user_parts or []
             if not isinstance(part, TextPart)] for turn in turns]


class NativeHistory:
    """History-keyed store: ``recall(history)`` returns what ``keep(turns, state)`` filed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._states: dict[str, list[tuple[list[list[str]], Any]]] = {}

    def keep(self, turns: Sequence[TurnResult], state: Any) -> None:
        with self._lock:
            self._states.setdefault(_key(turns), []).append((_media(turns), state))

    def recall(self, history: Sequence[TurnResult]) -> Any:
        """The framework's state after ``history``; None for a first turn."""
        if not history:
            return None
        media = _media(history)
        # A history given as text alone (a caller that keeps only what was said) matches the
        # turns with those words, whatever images they held.
        text_only = not any(media)
        key = _key(history)
        with self._lock:
            entries = self._states.get(key, [])
            for index in reversed(range(len(entries))):
                if text_only or entries[index][0] == media:
                    state = entries.pop(index)[1]
                    if not entries:
                        del self._states[key]
                    return state
        raise RuntimeError(f"turn {len(history) + 1} of a conversation whose earlier turns this "
                           f"adapter did not run; call it for every turn, from the first")
