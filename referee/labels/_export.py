"""Labels as the rows ``referee calibrate`` reads (docs/calibration.md, "Labelled data"): the
case's input, context and expected output, the output the run stored, and the person's verdict.

A case whose judge was shown images or PDFs carries them as references (type, media type,
sha256, path: never the bytes) in ``media`` (the case's) and ``output_media`` (the output's),
and ``blobs``, the folder holding their bytes: the run's blobs/, or, for an export written to
FILE, ``FILE.blobs/`` beside it (each blob once, named by its hash), so the file and its folder
move together. A row without images has none of these keys.

The self-contained report builds the same rows in the browser from ``case_fields`` and
``label_metadata``'s keys (labels.js), so a downloaded file and an export read alike; only a
field the page cut differs (its beginning, named in metadata.cut_fields).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from referee.content._blobs import BLOBS_DIR, BlobStore
from referee.content._load import find_parts
from referee.content._parts import DocumentPart, ImagePart, distinct_parts
from referee.errors import InputError
from referee.labels._store import Label, LabelStore
from referee.record import CaseResult
from referee.store import load_run


def run_root(run_dir: str | Path) -> Path:
    path = Path(run_dir)
    if not path.is_dir():
        raise InputError("a file, not a directory" if path.exists() else "no such directory",
                         source=str(path),
                         expected="a stored run's directory, as `referee list` shows it")
    return path


def case_fields(result: CaseResult) -> dict[str, Any] | None:
    """The row's case part: input, output, and context and expected output where the case has
    them; None for a case without a text input (nothing a calibration could replay)."""
    case = result.case
    if case is None or case.input is None:
        return None
    output = result.execution.actual_response if result.execution is not None else ""
    fields: dict[str, Any] = {"input": case.input_text, "output": output}
    if case.context is not None:
        fields["context"] = case.text_context
    if case.expected_output is not None:
        fields["expected_output"] = case.expected_output
    return fields


def part_reference(part: ImagePart | DocumentPart) -> dict[str, Any]:
    """An image or PDF as a row names it: by its hash (a remote one by its URL), never its
    bytes; ``path`` is where the case file had it, for people."""
    reference: dict[str, Any] = {"type": part.type, "media_type": part.media_type}
    if part.sha256:
        reference["sha256"] = part.sha256
    else:
        reference["url"] = part.url
    if part.path:
        reference["path"] = part.path
    return reference


def media_fields(result: CaseResult) -> dict[str, list[dict[str, Any]]]:
    """The images and PDFs the run's judge was shown with this case, as the engine's
    ``judging_content`` finds them: the case's, then those of the output not already among
    them (``media``, ``output_media``; a key only where it has some)."""
    case_parts = distinct_parts(find_parts(result.case))
    output_parts = distinct_parts(find_parts(result.execution),
                                  leaving_out={part.content_key() for part in case_parts})
    fields: dict[str, list[dict[str, Any]]] = {}
    for key, parts in (("media", case_parts), ("output_media", output_parts)):
        if parts:
            fields[key] = [part_reference(part) for part in parts]
    return fields


def label_metadata(label: Label, *, run: str, run_id: str) -> dict[str, Any]:
    """Where a row's label came from, with all that ``referee labels import`` needs to store
    the same label again (the verdict as given, and the judge's verdict it was given on)."""
    metadata: dict[str, Any] = {"run": run, "run_id": run_id, "case_id": label.case_id,
                                "criterion": label.criterion, "scoring": label.scoring,
                                "labeller": label.labeller, "at": label.at}
    for key in ("verdict", "human", "human_score", "judge_passed", "judge_score"):
        value = getattr(label, key)
        if value is not None:
            metadata[key] = value
    if label.comment:
        metadata["comment"] = label.comment
    return metadata


def row_id(case_id: str, criterion: str, *, several_criteria: bool) -> str:
    """A row's id: the case id, or ``case id#criterion`` when labels span several criteria
    (each row stays unique)."""
    return f"{case_id}#{criterion}" if several_criteria else case_id


def export_rows(run_dir: str | Path, *, criterion: str | None = None) -> list[dict[str, Any]]:
    """One labelled row per (case, criterion) whose latest label says pass or fail."""
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
        fields = case_fields(result) if result is not None else None
        if fields is None:
            continue
        row = {"id": row_id(label.case_id, label.criterion, several_criteria=several),
               "input": fields.pop("input"), "output": fields.pop("output"),
               "label": "pass" if label.human_passed else "fail",
               "metadata": label_metadata(label, run=str(root), run_id=report.run_id),
               **fields}
        media = media_fields(result) if result is not None else {}
        if media:  # a text-only row keeps exactly the keys it always had
            row.update(media, blobs=str(root / BLOBS_DIR))
        rows.append(row)
    return rows


def blobs_beside(out: Path) -> Path:
    """Where an export written to ``out`` keeps the bytes of its images and PDFs."""
    return out.with_name(out.name + ".blobs")


def _copy_blobs(rows: list[dict[str, Any]], run: Path, out: Path) -> None:
    """The blobs ``rows`` reference copied from the run into ``out``'s own blobs folder (each
    once), the rows pointing at it relative to the file, so file and folder travel together."""
    source, target = BlobStore(run), BlobStore.in_folder(blobs_beside(out))
    for row in rows:
        if "blobs" not in row:
            continue
        for reference in (*row.get("media", ()), *row.get("output_media", ())):
            digest = reference.get("sha256")
            if digest and not target.path_of(digest).exists():
                target.put(source.get(digest))
        row["blobs"] = blobs_beside(out).name


def write_rows(rows: list[dict[str, Any]], run_dir: str | Path,
               out: str | Path | None = None) -> str:
    """``rows`` (of the run in ``run_dir``) as JSONL, written to ``out`` with the blobs they
    reference in ``out.blobs/``; rows with no ``out`` point at the run's own blobs/."""
    if out is not None:
        _copy_blobs(rows, run_root(run_dir), Path(out))
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    if out is not None:
        Path(out).write_text(text, encoding="utf-8")
    return text


def write_export(run_dir: str | Path, out: str | Path | None = None, *,
                 criterion: str | None = None) -> tuple[str, int]:
    """The rows as JSONL, written to ``out`` (see ``write_rows``), and returned as text."""
    rows = export_rows(run_dir, criterion=criterion)
    return write_rows(rows, run_dir, out), len(rows)
