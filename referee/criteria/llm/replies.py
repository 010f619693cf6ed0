"""Reading the fields of one parsed judge reply."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

from referee.errors import JudgeUnavailable


def reply_score(reply: dict[str, Any]) -> float:
    """The reply's ``score`` clamped to [0, 1]; missing counts 0.0 as the 10xgraph-style API says.

    A score that is present but not a number is a judge malfunction, not a verdict.
    """
    if "score" not in reply or reply["score"] is None:
        return 0.0
    raw = reply["score"]
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        raise JudgeUnavailable(f"judge reply field 'score' is not a number: {raw!r}")
    try:
        value = float(raw)
    except ValueError:
        raise JudgeUnavailable(f"judge reply field 'score' is not a number: {raw!r}") from None
    if math.isnan(value):
        raise JudgeUnavailable("judge reply field 'score' is NaN")
    return min(1.0, max(0.0, value))


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
