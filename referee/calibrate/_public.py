"""Loaders for public human-labelled sets, mapped onto labelled cases.

referee downloads nothing: the user fetches the file from the set's repository and names it.

* SummEdits (github.com/salesforce/factualNLG, ``data/summedits/summedits_*.json``): a JSON list
  of ``{id, doc, summary, label, ...}``; label 1 = consistent with the document. Fits
  Faithfulness: context = the document, output = the summary.
* HaluEval (github.com/RUCAIBox/HaluEval, ``data/{qa,dialogue,summarization}_data.json``): JSON
  Lines. Each record has a right and a hallucinated output; both become rows (pass and fail).
  Fits Hallucination: context = the knowledge or document.
* EVOUNA (github.com/wangcunxiang/QA-Eval, ``EVOUNA/NQ.json`` or ``TQ.json``): a JSON list of
  questions, each with a golden answer and the answers of five QA systems, each judged correct or
  not by people. Fits AnswerAccuracy: expected output = the golden answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from referee.calibrate._labels import LabelledCase
from referee.errors import InputError, beyond_python_limits
from referee.formats import jsonl_lines, read_text
from referee.storable import SURROGATE_EXPECTED, LoneSurrogate, surrogate_pairs_joined

SUMMARISE = "Summarise the document."
EVOUNA_SYSTEMS = ("fid", "gpt35", "chatgpt", "gpt4", "newbing")


def _json_document(path: Path) -> Any:
    text = read_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg} (column {exc.colno})", source=str(path),
                         line=exc.lineno) from None
    except (ValueError, RecursionError) as exc:
        raise beyond_python_limits(exc, source=str(path), text=text) from None
    return _valid_text(data, str(path), None)


def _valid_text(value: Any, source: str, line: int | None) -> Any:
    """``value`` with its surrogate pairs joined; a lone surrogate is an error naming where."""
    try:
        return surrogate_pairs_joined(value)
    except LoneSurrogate as exc:
        field = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in exc.loc)
        raise InputError(str(exc), source=source, line=line, field=field.lstrip(".") or None,
                         expected=SURROGATE_EXPECTED) from None


def _record_lines(text: str) -> list[int]:
    """Line on which each top-level list item starts (for messages), by a light scan."""
    lines, depth, line, in_string, escaped = [], 0, 1, False, False
    for char in text:
        if char == "\n":
            line += 1
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char in "[{":
            if depth == 1 and char == "{":
                lines.append(line)
            depth += 1
        elif char in "]}":
            depth -= 1
    return lines


def _field(record: dict[str, Any], key: str, source: str, line: int | None,
           index: int | None = None) -> str:
    value = record.get(key)
    if not isinstance(value, str) or not value.strip():
        raise InputError("missing or not text", source=source, line=line,
                         field=_item(index, key))
    return value


def _item(index: int | None, key: str) -> str:
    """``[3].label``: a record's position, since a whole set may sit on one line."""
    return key if index is None else f"[{index}].{key}"


def _records(path: Path, what: str,
             expected: str) -> Iterator[tuple[int, int | None, dict[str, Any]]]:
    """(index, line, record) of each object in a JSON-list set; anything else is an error."""
    data = _json_document(path)
    if not isinstance(data, list):
        raise InputError(f"top level is {type(data).__name__}", source=str(path),
                         expected=f"the JSON list of a {what} file")
    lines: list[int | None] = list(_record_lines(read_text(path)))
    if len(lines) != len(data):
        lines = [None] * len(data)
    for index, (record, line) in enumerate(zip(data, lines)):
        if not isinstance(record, dict):
            raise InputError(f"is a {type(record).__name__}", source=str(path), line=line,
                             field=f"[{index}]", expected=expected)
        yield index, line, record


def load_summedits(path: str | Path) -> list[LabelledCase]:
    """SummEdits: each (document, summary) pair labelled consistent (1) or not (0)."""
    source = Path(path)
    rows = []
    for index, line, record in _records(source, "SummEdits",
                                        "an object with doc, summary and label"):
        label = record.get("label")
        if label not in (0, 1) or isinstance(label, bool):
            raise InputError(f"{label!r} is not 0 or 1", source=str(source), line=line,
                             field=_item(index, "label"),
                             expected="1 (consistent) or 0 (inconsistent)")
        rows.append(LabelledCase.make(
            input=SUMMARISE, context=_field(record, "doc", str(source), line, index),
            output=_field(record, "summary", str(source), line, index), passed=label == 1,
            id=record.get("id"), source=f"{source}:{line}",
            metadata={"dataset": "summedits", "edit_types": record.get("edit_types") or []}))
    return rows


def load_halueval(path: str | Path) -> list[LabelledCase]:
    """HaluEval qa/dialogue/summarization: each record gives a right row and a hallucinated one."""
    source = Path(path)
    rows = []
    for number, line in jsonl_lines(read_text(source)):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {exc.msg} (column {exc.colno})",
                             source=str(source), line=number) from None
        except (ValueError, RecursionError) as exc:
            raise beyond_python_limits(exc, source=str(source), text=line,
                                       line=number) from None
        record = _valid_text(record, str(source), number)
        if not isinstance(record, dict):
            raise InputError(f"is a {type(record).__name__}", source=str(source), line=number,
                             expected="a HaluEval record object")
        rows.extend(_halueval_rows(record, str(source), number))
    if not rows:
        raise InputError("no records", source=str(source), expected="HaluEval JSON Lines")
    return rows


def _halueval_rows(record: dict[str, Any], source: str, line: int) -> list[LabelledCase]:
    if "question" in record:
        task, ask, context = "qa", _field(record, "question", source, line), "knowledge"
        right, wrong = "right_answer", "hallucinated_answer"
    elif "dialogue_history" in record:
        task, ask, context = "dialogue", _field(record, "dialogue_history", source, line), "knowledge"
        right, wrong = "right_response", "hallucinated_response"
    elif "document" in record:
        task, ask, context = "summarization", SUMMARISE, "document"
        right, wrong = "right_summary", "hallucinated_summary"
    elif "user_query" in record:
        raise InputError("HaluEval's general set has no knowledge or document to judge "
                         "against", source=source, line=line, field="user_query",
                         expected="a qa, dialogue or summarization record")
    else:
        raise InputError("not a HaluEval record", source=source, line=line,
                         expected="question, dialogue_history or document with its right and "
                                  "hallucinated outputs")
    knowledge = _field(record, context, source, line)
    return [LabelledCase.make(input=ask, context=knowledge,
                              output=_field(record, key, source, line), passed=passed,
                              id=f"halueval-{task}-{line}-{'right' if passed else 'hallucinated'}",
                              source=f"{source}:{line}",
                              metadata={"dataset": f"halueval-{task}"})
            for key, passed in ((right, True), (wrong, False))]


def load_evouna(path: str | Path, *, systems: Sequence[str] = EVOUNA_SYSTEMS,
                include_improper: bool = False) -> list[LabelledCase]:
    """EVOUNA: one row per (question, QA system) whose answer people judged.

    Answers without a judgement (null) are left out, and so are questions marked ``improper``
    (no stable answer) unless ``include_improper``. Golden answers separated by "/" are
    alternatives.
    """
    unknown = [s for s in systems if s not in EVOUNA_SYSTEMS]
    if unknown:
        raise ValueError(f"unknown EVOUNA system {unknown[0]!r}; expected some of "
                         f"{', '.join(EVOUNA_SYSTEMS)}")
    source = Path(path)
    rows = []
    for index, line, record in _records(source, "EVOUNA",
                                        "an object with question, golden_answer and answers"):
        if record.get("improper") and not include_improper:
            continue
        question = _field(record, "question", str(source), line, index)
        golden = [g.strip() for g in
                  _field(record, "golden_answer", str(source), line, index).split("/")
                  if g.strip()]
        expected = golden[0] if len(golden) == 1 else (
            f"{golden[0]} (also accepted: {', '.join(golden[1:])})")
        for system in systems:
            answer, judged = record.get(f"answer_{system}"), record.get(f"judge_{system}")
            if not isinstance(answer, str) or not answer.strip() or judged is None:
                continue
            if not isinstance(judged, bool):
                raise InputError(f"{judged!r} is not true, false or null", source=str(source),
                                 line=line, field=_item(index, f"judge_{system}"))
            rows.append(LabelledCase.make(
                input=question, expected_output=expected, output=answer, passed=judged,
                id=f"evouna-{index}-{system}", source=f"{source}:{line}",
                metadata={"dataset": "evouna", "system": system}))
    return rows


PUBLIC_SETS: dict[str, tuple[Callable[..., list[LabelledCase]], str]] = {
    "summedits": (load_summedits, "faithfulness"),
    "halueval": (load_halueval, "hallucination"),
    "evouna": (load_evouna, "answer_accuracy"),
}
