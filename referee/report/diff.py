"""Expected against actual, side by side: word diffs, tool-call and node-order alignments.

These are for people reading a report; the scores come from the criteria, which keep their own
documented matching rules. The alignment here is the longest common subsequence of names
(difflib), so a reader sees which calls line up, which are missing, which are extra, and which
line up by name but were called with other arguments.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any, Literal

from referee.messages import NOT_RECORDED

WordOp = Literal["same", "removed", "added"]
CallOutcome = Literal["matched", "wrong_args", "missing", "extra"]

# Words, runs of punctuation and runs of whitespace: "days." against "days" differs in the full
# stop alone, not in the whole word.
_WORDS = re.compile(r"\s+|\w+|[^\w\s]+")
# Past this many tokens a diff costs more than it explains; the two texts are shown whole.
MAX_DIFF_TOKENS = 4000


@dataclass(frozen=True)
class WordPiece:
    op: WordOp
    text: str


def word_diff(before: str, after: str) -> list[WordPiece] | None:
    """Word-level diff of two texts (whitespace kept), or None when they are too long to diff."""
    a, b = _WORDS.findall(before), _WORDS.findall(after)
    if len(a) + len(b) > MAX_DIFF_TOKENS:
        return None
    pieces: list[WordPiece] = []
    matcher = SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            pieces.append(WordPiece("same", "".join(a[i1:i2])))
            continue
        if i2 > i1:
            pieces.append(WordPiece("removed", "".join(a[i1:i2])))
        if j2 > j1:
            pieces.append(WordPiece("added", "".join(b[j1:j2])))
    return pieces


@dataclass(frozen=True)
class CallRow:
    outcome: CallOutcome
    expected_name: str | None
    expected_args: str | None
    actual_name: str | None
    actual_args: str | None
    differing_keys: tuple[str, ...] = ()


def _args_text(args: Any) -> str:
    if args is None:
        return NOT_RECORDED
    return json.dumps(args, sort_keys=True, ensure_ascii=False, default=str) if args else "{}"


def _differing_keys(expected: dict[str, Any], actual: dict[str, Any]) -> tuple[str, ...]:
    keys = sorted(set(expected) | set(actual), key=str)
    return tuple(str(k) for k in keys if expected.get(k, _MISSING) != actual.get(k, _MISSING))


_MISSING = object()


def align_calls(expected: Sequence[Any], actual: Sequence[Any]) -> list[CallRow]:
    """Rows pairing expected and actual tool calls (anything with ``name`` and ``args``)."""
    rows: list[CallRow] = []
    matcher = SequenceMatcher(None, [c.name for c in expected], [c.name for c in actual],
                              autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for e, a in zip(expected[i1:i2], actual[j1:j2]):
                e_args, a_args = dict(e.args or {}), dict(a.args or {})
                # Arguments the recording left out (None) differ in nothing that is known.
                differing = () if a.args is None else _differing_keys(e_args, a_args)
                rows.append(CallRow("wrong_args" if differing else "matched", e.name,
                                    _args_text(e_args), a.name, _args_text(a.args), differing))
            continue
        rows.extend(CallRow("missing", e.name, _args_text(e.args), None, None)
                    for e in expected[i1:i2])
        rows.extend(CallRow("extra", None, None, a.name, _args_text(a.args))
                    for a in actual[j1:j2])
    return rows


@dataclass(frozen=True)
class NodeRow:
    outcome: Literal["matched", "missing", "extra"]
    expected: str | None
    actual: str | None


def align_nodes(expected: Sequence[str], actual: Sequence[str]) -> list[NodeRow]:
    rows: list[NodeRow] = []
    matcher = SequenceMatcher(None, list(expected), list(actual), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            rows.extend(NodeRow("matched", e, a) for e, a in zip(expected[i1:i2], actual[j1:j2]))
            continue
        rows.extend(NodeRow("missing", e, None) for e in expected[i1:i2])
        rows.extend(NodeRow("extra", None, a) for a in actual[j1:j2])
    return rows
