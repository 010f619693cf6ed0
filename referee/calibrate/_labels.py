"""Human-labelled cases: what ``referee calibrate`` measures an evaluator against.

A row is a case (input, output, context, expected output, or a conversation) and a human
verdict: ``label`` pass/fail, or ``human_score`` in [0, 1] with a ``cutoff`` (default 0.5; a
score at or above it is a pass). Files are JSONL (one object per line), CSV (a header row; a
``context`` or ``conversation`` cell may hold a JSON list) or YAML (a list of mappings, or a
mapping with ``cases``). A bad row is a one-line error naming the file, the line and the field.

A row exported from a run whose judge saw images or PDFs names them by hash in ``media`` (the
case's) and ``output_media`` (the output's), their bytes in the ``blobs`` folder (relative to
the labels file); the replay shows the judge the same parts. A blob that is not there leaves
that row out with one line naming the file, the line and the hash; the other rows replay.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from referee.case import EvalCase, Invocation, canonical_json
from referee.content._blobs import BlobStore
from referee.content._parts import ContentError, DocumentPart, ImagePart
from referee.errors import InputError, beyond_python_limits
from referee.formats import csv_rows, jsonl_values, parse_yaml, read_text
from referee.storable import SURROGATE_EXPECTED, LoneSurrogate, surrogate_pairs_joined

DEFAULT_CUTOFF = 0.5
PASS_WORDS = {"pass", "passed", "true", "yes", "1", "good", "correct", "consistent"}
FAIL_WORDS = {"fail", "failed", "false", "no", "0", "bad", "incorrect", "inconsistent"}
LABEL_KEY = "calibration"  # where a labelled case keeps its label in EvalCase.metadata
ROW_FIELDS = ("id", "input", "output", "context", "expected_output", "conversation", "label",
              "human_score", "cutoff", "metadata", "media", "output_media", "blobs")
MEDIA_FIELDS = ("media", "output_media")
_EXPECTED_REFERENCE = ('a list of {"type": "image" or "document", "media_type", "sha256"}, as '
                       "`referee labels export` writes")
Media = ImagePart | DocumentPart
_SHA256 = re.compile(r"[0-9a-f]{64}")
SUFFIXES = (".jsonl", ".csv", ".yaml", ".yml")


class LabelledCase(BaseModel):
    """One case, the output to be judged, and the human verdict on that output."""

    model_config = ConfigDict(extra="forbid")

    case: EvalCase
    output: str
    passed: bool
    human_score: float | None = Field(default=None, ge=0.0, le=1.0)
    cutoff: float | None = Field(default=None, ge=0.0, le=1.0)
    source: str = ""  # "file:line", for messages that point back at the row
    # The images and PDFs the labelled judge was shown: the case's, then the output's.
    media: list[Media] = Field(default_factory=list)
    outputs: list[Media] = Field(default_factory=list)
    # Why the row cannot be replayed as it was judged (a blob not found): it is left out.
    missing: str | None = None

    @classmethod
    def make(cls, *, output: str, passed: bool | None = None, human_score: float | None = None,
             cutoff: float | None = None, input: str | None = None,
             context: str | list[str] | None = None, expected_output: str | None = None,
             conversation: list[Any] | None = None, id: str | None = None,
             metadata: dict[str, Any] | None = None, source: str = "",
             media: list[Media] | None = None, outputs: list[Media] | None = None,
             missing: str | None = None) -> LabelledCase:
        """A labelled case from its parts; give ``passed`` or ``human_score`` (with ``cutoff``)."""
        if passed is None:
            if human_score is None:
                raise ValueError("a labelled case needs passed= or human_score=")
            passed = human_score >= (DEFAULT_CUTOFF if cutoff is None else cutoff)
        fields: dict[str, Any] = {"input": input, "context": context,
                                  "expected_output": expected_output,
                                  "metadata": dict(metadata or {})}
        if conversation:
            fields["conversation"] = conversation
        if id:
            fields["eval_id"] = str(id)
            fields["name"] = str(id)
        case = EvalCase.model_validate(fields)
        if not id:
            # Rows often share a case and differ in the output judged: the id covers both, so
            # each row keeps its own stored result across a resume.
            digest = hashlib.sha1(canonical_json({
                "case": case.model_dump(mode="json", exclude={"eval_id"}),
                "output": output, **_media_identity(media, outputs)}).encode()).hexdigest()[:12]
            case = case.model_copy(update={"eval_id": f"row-{digest}"})
        return cls(case=case, output=output, passed=passed, human_score=human_score,
                   cutoff=cutoff, source=source, media=list(media or ()),
                   outputs=list(outputs or ()), missing=missing)

    def labelled_case(self) -> EvalCase:
        """The case as the run stores it: the output and label ride along in its metadata, so a
        stored run can be calibrated again without the labels file."""
        meta = dict(self.case.metadata)
        meta[LABEL_KEY] = {"output": self.output, "passed": self.passed,
                           "human_score": self.human_score, "cutoff": self.cutoff,
                           "source": self.source}
        # The parts ride in the case, so the run refuses a judge without vision before the
        # first replay, and the judge of each row is shown them (the case's, then the output's).
        for key, value in (("media", self.media), ("outputs", self.outputs),
                           ("missing", self.missing)):
            if value:
                meta[LABEL_KEY][key] = value
        return self.case.model_copy(update={"metadata": meta})


def _media_identity(*groups: list[Media] | None) -> dict[str, Any]:
    """What tells the rows' images and PDFs apart, for a digest; nothing for a text-only row,
    so its digest is what it was before rows held images."""
    identities = [part.identity() for group in groups for part in group or ()]
    return {"media": identities} if identities else {}


def data_fingerprint(rows: Iterable[LabelledCase]) -> str:
    """A digest of the cases, outputs and labels (not of where they were read from)."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update(canonical_json({
            "case": row.case.model_dump(mode="json", exclude={"metadata"}),
            "output": row.output, "passed": row.passed,
            **_media_identity(row.media, row.outputs)}).encode())
        digest.update(b"\n")
    return digest.hexdigest()[:16]


# Reading files ---------------------------------------------------------------------------------

def load_labels(path: str | Path, *, cutoff: float | None = None) -> list[LabelledCase]:
    """Labelled cases from a JSONL, CSV or YAML file; ``cutoff`` applies to rows without one."""
    source = Path(path)
    suffix = source.suffix.lower()
    if suffix not in SUFFIXES:
        raise InputError(f"unsupported labels file type {suffix or '(none)'!r}",
                         source=str(source), expected=", ".join(SUFFIXES))
    text = read_text(source)
    if suffix == ".jsonl":
        raw_rows = jsonl_values(text, str(source))
    elif suffix == ".csv":
        raw_rows = _csv_rows(text, str(source))
    else:
        raw_rows = _yaml_rows(text, str(source))
    rows = [row_from_mapping(raw, str(source), line, default_cutoff=cutoff)
            for raw, line in raw_rows]
    first_line: dict[str, int] = {}
    for row, (raw, line) in zip(rows, raw_rows):
        if raw.get("id") is None:
            continue
        seen = first_line.setdefault(row.case.eval_id, line)
        if seen != line:
            raise InputError(f"repeats id {row.case.eval_id!r} first used on line {seen}",
                             source=str(source), line=line, field="id",
                             expected="a unique id per row")
    if not rows:
        raise InputError("no labelled rows", source=str(source),
                         expected="at least one row with an output and a label")
    return rows


def _check_csv_header(header: list[str], source: str) -> None:
    if not header:
        raise InputError("empty file", source=source, expected="a header row naming columns")
    for column in header:
        if column not in ROW_FIELDS and not column.startswith("metadata."):
            raise InputError(f"unknown column {column!r}", source=source, line=1,
                             expected="columns among " + ", ".join(ROW_FIELDS)
                             + " or metadata.NAME")


def _csv_rows(text: str, source: str) -> list[tuple[Any, int]]:
    rows = []
    for cells, line in csv_rows(text, source, _check_csv_header):
        raw: dict[str, Any] = {}
        for column, cell in cells.items():
            if column.startswith("metadata."):
                raw.setdefault("metadata", {})[column.removeprefix("metadata.")] = cell
            elif column in ("conversation", "metadata", *MEDIA_FIELDS) or (
                    column == "context" and cell.lstrip().startswith("[")):
                raw[column] = _json_cell(cell, source, line, column)
            else:
                raw[column] = cell
        rows.append((raw, line))
    return rows


def _json_cell(cell: str, source: str, line: int, column: str) -> Any:
    try:
        return json.loads(cell)
    except json.JSONDecodeError as exc:
        if column == "context":
            return cell  # a context that merely starts with "[" is plain text
        raise InputError(f"invalid JSON: {exc.msg}", source=source, line=line, field=column,
                         expected="a JSON value") from None
    except (ValueError, RecursionError) as exc:
        raise beyond_python_limits(exc, source=source, text=cell, line=line) from None


def _yaml_rows(text: str, source: str) -> list[tuple[Any, int]]:
    try:
        document = yaml.compose(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise InputError(f"invalid YAML: {exc.problem or 'malformed YAML'}", source=source,
                         line=mark.line + 1 if mark else None) from None
    if document is None:
        raise InputError("empty document", source=source, expected="a list of labelled rows")
    data = parse_yaml(text, source)
    node = document
    if isinstance(data, dict):
        if set(data) != {"cases"} or not isinstance(data["cases"], list):
            raise InputError("top level is a mapping without a 'cases' list", source=source,
                             line=1, expected="a list of rows, or a mapping with 'cases'")
        data = data["cases"]
        node = next(v for k, v in document.value if k.value == "cases")
    if not isinstance(data, list):
        raise InputError(f"top level is {type(data).__name__}", source=source,
                         expected="a list of labelled rows")
    return [(row, item.start_mark.line + 1) for row, item in zip(data, node.value)]


def _label(value: Any, source: str, line: int) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    word = str(value).strip().lower()
    if word in PASS_WORDS:
        return True
    if word in FAIL_WORDS:
        return False
    raise InputError(f"{value!r} is not a verdict", source=source, line=line, field="label",
                     expected="pass or fail (also yes/no, true/false, 1/0)")


def _fraction(value: Any, source: str, line: int, field: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or math.isnan(number) or not 0.0 <= number <= 1.0:
        raise InputError(f"{value!r} is not a number between 0 and 1", source=source, line=line,
                         field=field, expected="a number in [0, 1]")
    return number


def row_from_mapping(raw: Any, source: str, line: int, *,
                     default_cutoff: float | None = None) -> LabelledCase:
    """One labelled row from a parsed mapping; errors name ``source:line`` and the field."""
    if not isinstance(raw, dict):
        raise InputError(f"is a {type(raw).__name__}", source=source, line=line,
                         expected="an object with output and label (or human_score)")
    try:
        raw = surrogate_pairs_joined(raw)
    except LoneSurrogate as exc:
        raise InputError(str(exc), source=source, line=line,
                         field=".".join(str(part) for part in exc.loc) or None,
                         expected=SURROGATE_EXPECTED) from None
    except RecursionError as exc:  # a YAML alias that contains itself
        raise beyond_python_limits(exc, source=source, text="", line=line) from None
    unknown = [k for k in raw if k not in ROW_FIELDS]
    if unknown:
        raise InputError(f"unknown field {unknown[0]!r}", source=source, line=line,
                         field=str(unknown[0]), expected="fields among " + ", ".join(ROW_FIELDS))
    output = raw.get("output")
    if output is None:
        raise InputError("missing", source=source, line=line, field="output",
                         expected="the output the human judged")
    if not isinstance(output, str):
        raise InputError(f"is a {type(output).__name__}", source=source, line=line,
                         field="output", expected="text")
    if raw.get("input") is None and not raw.get("conversation"):
        raise InputError("missing", source=source, line=line, field="input",
                         expected="an 'input' or a 'conversation'")
    has_label, has_score = raw.get("label") is not None, raw.get("human_score") is not None
    if has_label == has_score:
        raise InputError("give exactly one of 'label' and 'human_score'", source=source,
                         line=line, field="label",
                         expected="label pass/fail, or human_score in [0, 1] with a cutoff")
    human_score = _fraction(raw["human_score"], source, line, "human_score") if has_score else None
    cutoff = (_fraction(raw["cutoff"], source, line, "cutoff") if raw.get("cutoff") is not None
              else default_cutoff)
    passed = _label(raw["label"], source, line) if has_label else None
    metadata = raw.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise InputError(f"is a {type(metadata).__name__}", source=source, line=line,
                         field="metadata", expected="an object")
    if metadata.get("cut_fields"):
        raise _cut_row(metadata["cut_fields"], source, line)
    media, outputs, missing = row_media(raw, source, line)
    conversation = raw.get("conversation")
    try:
        if conversation is not None:
            if not isinstance(conversation, list):
                raise InputError(f"is a {type(conversation).__name__}", source=source,
                                 line=line, field="conversation", expected="a list of turns")
            conversation = [Invocation.model_validate(turn) for turn in conversation]
        return LabelledCase.make(
            output=output, passed=passed, human_score=human_score, cutoff=cutoff,
            input=_text(raw.get("input"), source, line, "input"),
            context=raw.get("context"),
            expected_output=_text(raw.get("expected_output"), source, line, "expected_output"),
            conversation=conversation, id=None if raw.get("id") is None else str(raw["id"]),
            metadata=metadata, source=f"{source}:{line}", media=media, outputs=outputs,
            missing=missing)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or None
        raise InputError(str(first["msg"]).removeprefix("Value error, "), source=source,
                         line=line, field=where) from None


def row_media(raw: dict[str, Any], source: str, line: int | None
               ) -> tuple[list[Media], list[Media], str | None]:
    """The row's images and PDFs (the case's, the output's) with their bytes read from its
    ``blobs`` folder, and the first blob not found there (the row is then left out, in one
    line naming the file, the line and the hash)."""
    folder = raw.get("blobs")
    if folder is not None and not isinstance(folder, str):
        raise InputError(f"is a {type(folder).__name__}", source=source, line=line,
                         field="blobs", expected="the folder holding the row's images and PDFs")
    # Relative to the labels file, so the file and its blobs folder can move together.
    store = BlobStore.in_folder(Path(source).parent / folder) if folder else None
    missing: str | None = None
    found: list[list[Media]] = []
    for key in MEDIA_FIELDS:
        references = raw.get(key) or []
        if not isinstance(references, list):
            raise InputError(f"is a {type(references).__name__}", source=source, line=line,
                             field=key, expected=_EXPECTED_REFERENCE)
        parts = []
        for index, reference in enumerate(references):
            field = f"{key}[{index}]"
            part = _referenced_part(reference, source, line, field)
            if part.data is None and part.url is None:
                try:
                    if store is None:
                        raise ContentError(f"{part.type} {part.sha256} has no blobs folder "
                                           "to be read from")
                    part = type(part).model_validate({**reference, "data": store.get(
                        str(part.sha256))})
                except ContentError as exc:
                    missing = missing or str(ContentError(str(exc), source=source, line=line,
                                                          field=field))
            parts.append(part)
        found.append(parts)
    return found[0], found[1], missing


def _referenced_part(reference: Any, source: str, line: int | None, field: str) -> Media:
    """A part as a row names it, never read from its ``path`` (where the case file had it,
    kept for people): its bytes are the blob its hash names."""
    kind = reference.get("type") if isinstance(reference, dict) else None
    if kind not in ("image", "document"):
        raise InputError("is not an image or PDF reference", source=source, line=line,
                         field=field, expected=_EXPECTED_REFERENCE)
    digest = reference.get("sha256")
    if digest is not None and not _SHA256.fullmatch(str(digest)):
        raise InputError(f"sha256 {digest!r} is not a SHA-256", source=source, line=line,
                         field=field, expected="64 lowercase hex digits")
    try:
        return (ImagePart if kind == "image" else DocumentPart).model_validate(reference)
    except (ValidationError, ContentError) as exc:
        message = (exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc))
        raise InputError(str(message).removeprefix("Value error, "), source=source,
                         line=line, field=field, expected=_EXPECTED_REFERENCE) from None


def _cut_row(cut_fields: Any, source: str, line: int) -> InputError:
    """The error for a row the self-contained report cut (its "Download labels" marks it in
    metadata.cut_fields): a cut output would calibrate the judge on text it never saw."""
    names = ([cut_fields] if isinstance(cut_fields, str)  # a CSV's metadata.cut_fields cell
             else list(cut_fields) if isinstance(cut_fields, (dict, list)) else [])
    field = str(names[0]) if names else "metadata.cut_fields"
    return InputError("was cut by the report it was labelled in (metadata.cut_fields), and a "
                      "cut field would calibrate the judge on text it never saw",
                      source=source, line=line, field=field,
                      expected="the whole row: import the file into its run with `referee "
                      "labels import RUN_DIR FILE` and calibrate with `--from-run RUN_DIR`, or "
                      "export the run's rows with `referee labels export RUN_DIR`")


def _text(value: Any, source: str, line: int, field: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise InputError(f"is a {type(value).__name__}", source=source, line=line, field=field,
                     expected="text")
