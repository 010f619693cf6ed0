"""Labels as the rows ``referee calibrate`` reads (docs/calibration.md, "Labelled data"): the
case's input, context and expected output, the output the run stored, and the person's verdict.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from referee.errors import InputError
from referee.labels._store import LabelStore
from referee.store import load_run


def run_root(run_dir: str | Path) -> Path:
    path = Path(run_dir)
    if not path.is_dir():
        raise InputError("not a run directory", source=str(path),
                         expected="the directory of a stored run (its labels.jsonl lies there)")
    return path


def export_rows(run_dir: str | Path, *, criterion: str | None = None) -> list[dict[str, Any]]:
    """One labelled row per (case, criterion) whose latest label says pass or fail.

    A row's id is the case id; with labels on several criteria it is ``case id#criterion``, so
    each row stays unique. Cases without a text input (nothing a calibration could replay)
    are left out.
    """
    root = run_root(run_dir)
    labels = [label for label in LabelStore(root).latest().values()
              if label.human_passed is not None
              and (criterion is None or label.criterion == criterion)]
    if not labels:
        return []
    report = load_run(root)
    cases = {case.eval_id: case for case in report.cases}
    several = len({label.criterion for label in labels}) > 1
    rows = []
    for label in labels:
        result = cases.get(label.case_id)
        if result is None or result.case is None or result.case.input is None:
            continue
        case = result.case
        output = result.execution.actual_response if result.execution is not None else ""
        metadata: dict[str, Any] = {"run": str(root), "case_id": label.case_id,
                                    "criterion": label.criterion, "scoring": label.scoring,
                                    "labeller": label.labeller, "at": label.at}
        if label.comment:
            metadata["comment"] = label.comment
        row: dict[str, Any] = {
            "id": f"{label.case_id}#{label.criterion}" if several else label.case_id,
            "input": case.input, "output": output,
            "label": "pass" if label.human_passed else "fail", "metadata": metadata}
        if case.context is not None:
            row["context"] = case.context
        if case.expected_output is not None:
            row["expected_output"] = case.expected_output
        rows.append(row)
    return rows


def write_export(run_dir: str | Path, out: str | Path | None = None, *,
                 criterion: str | None = None) -> tuple[str, int]:
    """The rows as JSONL, written to ``out`` (or returned as text when ``out`` is None)."""
    rows = export_rows(run_dir, criterion=criterion)
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    if out is not None:
        Path(out).write_text(text, encoding="utf-8")
    return text, len(rows)

