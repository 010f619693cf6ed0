"""What the viewer's labelling page shows and what it accepts: the queue with each result's
current label, and a posted label checked against the run before it is stored."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from referee.content._blobs import BLOBS_DIR
from referee.content._gallery import Gallery
from referee.labels._export import case_fields, media_fields
from referee.labels._queue import review_queue
from referee.labels._store import Label, now
from referee.record import CaseResult, EvalReport
from referee.redact import redact_secrets, redacted_head
from referee.store import version_number

POSTED_FIELDS = {"case_id", "criterion", "verdict", "human", "comment"}


def describe(label: Label | None) -> tuple[str, str]:
    """(a short code for the page's state, the words shown) for a label."""
    if label is None:
        return "", ""
    parts = []
    if label.verdict is not None:
        parts.append(f"judge {label.verdict}")
    if label.human is not None:
        parts.append(f"person says {label.human}")
    if label.comment:
        parts.append(f"comment: {label.comment}")
    words = "; ".join(parts) or "no verdict"
    # A comment alone is no verdict: the result still counts as unlabelled in the queue.
    code = (f"{label.verdict or '-'}/{label.human or '-'}"
            if label.verdict is not None or label.human is not None else "")
    return code, f"{words} ({label.labeller})"


def queue_items(report: EvalReport, labels: dict[tuple[str, str], Label], *,
                cases: list[CaseResult] | None = None, with_fields: bool = True,
                gallery: Gallery | None = None) -> list[dict[str, Any]]:
    """The queue as the labelling pages' script (labels.js) builds it: one entry per result,
    with its current label; ``cases``: only these of the report's; ``with_fields``: the case's
    input, context, expected output and output, as (name, value) pairs; ``gallery``: the
    case's images and PDFs too, as thumbnails and links (``media``)."""
    by_id = {case.eval_id: case for case in (report.cases if cases is None else cases)}
    items = []
    for item in review_queue(report, by_id.values()):
        entry: dict[str, Any] = {
            "case_id": item.case_id, "case_index": item.case_index, "case_name": item.case_name,
            "criterion": item.criterion, "score": _number(item.score),
            "threshold": _number(item.threshold), "passed": item.passed, "why": item.why}
        for key in ("error", "unknown", "reason"):
            if getattr(item, key):
                entry[key] = getattr(item, key)
        if with_fields:
            result = by_id[item.case_id]
            case = result.case
            output = result.execution.actual_response if result.execution is not None else None
            fields = [] if case is None else [("input", case.input_text), ("context", case.text_context),
                                              ("expected output", case.expected_output)]
            entry["fields"] = [*fields, ("output", output)]
            if gallery is not None:
                entry["media"] = gallery.of_case(case, result.execution)
        label = labels.get((item.case_id, item.criterion))
        if label is not None:
            code, words = describe(label)
            entry.update(label=code, label_text=words, comment=label.comment,
                         verdict=label.verdict or "", human=label.human or "")
        items.append(entry)
    return items


def _number(value: float) -> float | None:
    """A score as the page's JSON can hold it (a criterion's NaN would make it unreadable)."""
    return value if math.isfinite(value) else None


def report_labelling(report: EvalReport, cases: list[CaseResult], *,
                     max_field_chars: int) -> dict[str, Any]:
    """What the self-contained report's labelling panel needs: the queue of ``cases`` (the
    page shows each case once, in its own details), and per case the fields of a labels row
    (labels/_export.case_fields), from which the page builds its "Download labels" file.

    A text field longer than ``max_field_chars`` is cut as the rest of the page cuts it, and
    the row's ``cut_fields`` says how many characters of which field were left out: a runaway
    output must not make the page bigger than it, and the mark rides along into the
    downloaded rows (metadata.cut_fields), which calibrate refuses and import accepts.

    A case whose judge was shown images or PDFs carries them by hash (``media``,
    ``output_media``, as the export names them), and ``blobs`` is the run's blobs folder as an
    absolute path (the page may be opened from anywhere; the download lands elsewhere), so
    calibrating the downloaded file shows the judge the same parts while the run is there,
    and leaves those rows out, one line each, once it is gone. ``blobs`` is absent when the
    report does not know its run's directory."""
    rows = {}
    for case in cases:
        fields = case_fields(case)
        if fields is None:
            continue
        row = redact_secrets(fields)  # the page is a report: no key reaches it, even in an output
        cut_fields = {}
        for name, value in row.items():
            if isinstance(value, str):
                row[name], left_out = redacted_head(value, max_field_chars)
            elif isinstance(value, list):  # a context of several passages: each is cut alone
                heads = [redacted_head(v, max_field_chars) if isinstance(v, str) else (v, 0)
                         for v in value]
                row[name] = [head for head, _ in heads]
                left_out = sum(n for _, n in heads)
            else:
                left_out = 0
            if left_out:
                cut_fields[name] = left_out
        if cut_fields:
            row["cut_fields"] = cut_fields
        # References only (hashes, media types, the case file's paths, a remote part's URL,
        # masked like any text of the page): no bytes reach the page.
        row.update(redact_secrets(media_fields(case)))
        rows[case.eval_id] = row
    run_dir = report.run_dir
    labelling = {"run_id": report.run_id, "scoring": version_number(report.metadata),
                 "run": str(run_dir) if run_dir else "",
                 "queue": queue_items(report, {}, cases=cases, with_fields=False), "rows": rows,
                 "cut": any("cut_fields" in row for row in rows.values()),
                 "media": any("media" in row or "output_media" in row for row in rows.values()),
                 "max_field_chars": max_field_chars}
    if run_dir:
        labelling["blobs"] = str(Path(run_dir).resolve() / BLOBS_DIR)
    return labelling


class RefusedLabel(ValueError):
    """A posted label that does not fit the run (the message says why)."""


def label_from_post(body: bytes, report: EvalReport, *, scoring: int, labeller: str) -> Label:
    """A label from the page's JSON, for a criterion result that exists in ``report``."""
    try:
        posted = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise RefusedLabel("the body is not JSON") from None
    if not isinstance(posted, dict):
        raise RefusedLabel("the body is not a JSON object")
    unknown = sorted(set(posted) - POSTED_FIELDS)
    if unknown:
        raise RefusedLabel(f"unknown field {unknown[0]!r}")
    case = next((c for c in report.cases if c.eval_id == posted.get("case_id")), None)
    if case is None:
        raise RefusedLabel(f"the run has no case {posted.get('case_id')!r}")
    result = next((r for r in case.criterion_results
                   if r.criterion == posted.get("criterion") and not r.skipped), None)
    if result is None:
        raise RefusedLabel(f"case {case.eval_id!r} has no judged criterion "
                           f"{posted.get('criterion')!r}")
    try:
        return Label(case_id=case.eval_id, criterion=result.criterion, scoring=scoring,
                     verdict=posted.get("verdict"), human=posted.get("human"),
                     comment=posted.get("comment") or "", judge_passed=result.passed,
                     judge_score=result.score, labeller=labeller, at=now())
    except ValidationError as exc:
        first = exc.errors()[0]
        raise RefusedLabel(f"field {'.'.join(str(p) for p in first['loc'])}: "
                           f"{first['msg']}") from None
