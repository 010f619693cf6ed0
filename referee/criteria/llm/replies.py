"""Reading the fields of one parsed judge reply."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from referee.errors import JudgeUnavailable
from referee.judge import score_problem


def reply_score(reply: dict[str, Any]) -> float:
    """The reply's top-level ``score``, a number from 0.0 to 1.0.

    A reply without one (missing, nested under another key, not a number, NaN, outside
    [0, 1]) has failed: JudgeUnavailable, so that the sample is dropped, never read as 0.0 or
    clamped into range. GEval reads its replies by the same rule (``score_problem``).
    """
    problem = score_problem(reply.get("score"))
    if problem is not None:
        raise JudgeUnavailable(f"judge reply has no usable score: {problem}")
    return float(reply["score"])


def reply_text(reply: dict[str, Any], field: str = "reasoning") -> str:
    value = reply.get(field)
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def reply_strings(reply: dict[str, Any], field: str) -> list[str]:
    """A list-of-strings field; a lone string counts as one item, non-strings are rendered."""
    value = reply.get(field)
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        text = item if isinstance(item, str) else json.dumps(item, ensure_ascii=False, default=str)
        if text.strip():
            out.append(text.strip())
    return out


def unique(items: Iterable[str]) -> list[str]:
    """De-duplicated, first occurrence first (samples often repeat the same finding)."""
    seen: set[str] = set()
    out = []
    for item in items:
        key = " ".join(item.split()).casefold()
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out
