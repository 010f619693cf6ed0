"""``referee labels import``: labels made elsewhere (the self-contained report's "Download
labels", or another copy's ``referee labels export``) appended to a run's labels.jsonl.

Every line is checked against the run before anything is written: a bad line is a one-line
error naming the file, the line and the field, and then nothing is stored, so the file can be
fixed and imported again without doubling the good lines. A line equal to a label already
stored is skipped, so importing the same file twice adds nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from referee.errors import InputError
from referee.formats import jsonl_lines, parse_json, read_text
from referee.labels._export import case_fields, run_root
from referee.labels._store import Label, LabelStore, now
from referee.record import EvalReport
from referee.redact import redact
from referee.store import load_run, version_number

_EXPECTED_ROW = "one labels row a line, as `referee labels export` writes"
_LABEL_KEYS = ("scoring", "verdict", "human", "human_score", "comment", "judge_passed",
               "judge_score", "labeller", "at")


class LabelImportError(InputError):
    """Some lines of a labels file do not fit the run; ``problems`` has one line per fault
    (lines with the same fault share one), ``bad_lines`` counts the lines."""

    def __init__(self, problems: list[InputError], bad_lines: int | None = None) -> None:
        self.problems = problems
        self.bad_lines = len(problems) if bad_lines is None else bad_lines
        more = f" (and {len(problems) - 1} more fault(s))" if len(problems) > 1 else ""
        super().__init__(f"{problems[0]}{more}; nothing was imported")


@dataclass(frozen=True)
class Imported:
    added: int
    already: int  # lines equal to a label the run already had


def import_labels(run_dir: str | Path, labels_file: str | Path, *,
                  labeller: str | None = None) -> Imported:
    """Append the labels of ``labels_file`` to the run's labels.jsonl; ``labeller`` names the
    labels whose line names nobody (default: the OS user)."""
    from referee.labels._store import default_labeller

    root = run_root(run_dir)
    source = Path(labels_file)
    report = load_run(root)
    scoring = version_number(report.metadata)
    fallback_labeller = labeller or default_labeller()
    labels: list[Label] = []
    problems: list[InputError] = []
    # Lines with the same fault (every line of another run's file) are told once.
    same_fault: dict[tuple[str | None, str, str | None], list[int]] = {}
    for number, line in jsonl_lines(read_text(source)):
        try:
            row = parse_json(line, str(source), number)
            labels.append(_label_from_row(row, report, scoring=scoring,
                                          labeller=fallback_labeller))
        except _BadField as bad:
            same_fault.setdefault((bad.field, bad.message, bad.expected), []).append(number)
        except InputError as exc:
            problems.append(exc)
    for (field, message, expected), numbers in same_fault.items():
        if len(numbers) == 1:
            problems.append(InputError(message, source=str(source), line=numbers[0],
                                       field=field, expected=expected))
        else:
            problems.append(InputError(f"{message} ({_count_lines(numbers, labels)})",
                                       source=f"{source}: lines {_spans(numbers)}",
                                       field=field, expected=expected))
    if problems:
        grouped = sum(len(numbers) - 1 for numbers in same_fault.values())
        raise LabelImportError(problems, bad_lines=len(problems) + grouped)
    if not labels:
        raise InputError("no labels", source=str(source), expected=_EXPECTED_ROW)
    store = LabelStore(root)
    stored = store.all()
    added = 0
    for label in labels:
        if label in stored:
            continue
        store.append(label)
        stored.append(label)
        added += 1
    return Imported(added=added, already=len(labels) - added)


def _spans(numbers: list[int]) -> str:
    """``[1, 2, 3, 7]`` as ``1-3, 7``."""
    spans: list[list[int]] = []
    for number in numbers:
        if spans and number == spans[-1][1] + 1:
            spans[-1][1] = number
        else:
            spans.append([number, number])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def _count_lines(numbers: list[int], good: list[Label]) -> str:
    return f"all {len(numbers)} lines" if not good else f"{len(numbers)} lines"


def _cut_fields(metadata: dict[str, Any]) -> Any:
    """The fields a report cut in this row (its download names them in metadata.cut_fields)."""
    cut = metadata.get("cut_fields")
    if cut is None or isinstance(cut, (dict, list)):
        return cut or ()
    raise _BadField("metadata.cut_fields", f"a JSON {type(cut).__name__}",
                    "the names of the fields the report cut")


def _same_output(given: Any, stored: str, *, cut: bool) -> bool:
    """Whether a row's output is the one the run stored: a report's download carries it with
    any key masked (referee.redact), and, where the page cut it, only its beginning. Only the
    label is stored, so the beginning is enough to know the row is this run's."""
    if not isinstance(given, str):
        return False
    if cut:
        return stored.startswith(given) or redact(stored).startswith(given)
    return given in (stored, redact(stored))


class _BadField(Exception):
    def __init__(self, field: str | None, message: str, expected: str | None = None) -> None:
        super().__init__(message)
        self.field, self.message, self.expected = field, message, expected


def _label_from_row(row: Any, report: EvalReport, *, scoring: int, labeller: str) -> Label:
    if not isinstance(row, dict):
        raise _BadField(None, f"a JSON {type(row).__name__}, not an object", _EXPECTED_ROW)
    verdict = row.get("label")
    if verdict not in ("pass", "fail"):
        raise _BadField("label", f"{verdict!r} is not a label", "pass or fail")
    metadata = row.get("metadata")
    if not isinstance(metadata, dict):
        raise _BadField("metadata", "missing" if metadata is None else "not an object",
                        "the case_id and criterion the label is on")
    run_id = metadata.get("run_id")
    if run_id is not None and run_id != report.run_id:
        raise _BadField("metadata.run_id", f"labels of run {run_id!r}, not of this run "
                        f"{report.run_id!r}")
    case_id = metadata.get("case_id")
    case = next((c for c in report.cases if c.eval_id == case_id), None)
    if case is None:
        raise _BadField("metadata.case_id", f"the run has no case {case_id!r}")
    criterion = metadata.get("criterion")
    result = next((r for r in case.criterion_results
                   if r.criterion == criterion and not r.skipped), None)
    if result is None:
        raise _BadField("metadata.criterion", f"case {case_id!r} has no judged criterion "
                        f"{criterion!r}")
    fields = case_fields(case)
    if fields is not None and "output" in row and not _same_output(
            row["output"], fields["output"], cut="output" in _cut_fields(metadata)):
        raise _BadField("output", f"not the output the run stored for case {case_id!r}: the "
                        "label was made on another run")
    given = {key: metadata[key] for key in _LABEL_KEYS if key in metadata}
    values: dict[str, Any] = {"scoring": scoring, "labeller": labeller, "at": now(),
                              "judge_passed": result.passed, "judge_score": result.score,
                              **given}
    if values.get("verdict") is None and values.get("human") is None:
        values["human"] = verdict  # a hand-written row: its label is the person's own verdict
    try:
        label = Label(case_id=case.eval_id, criterion=result.criterion, **values)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = "metadata." + ".".join(str(part) for part in first["loc"])
        raise _BadField(field, first["msg"]) from None
    if label.human_passed != (verdict == "pass"):
        raise _BadField("label", f"{verdict!r} disagrees with the label's own verdict in "
                        f"metadata (verdict {label.verdict!r}, human {label.human!r}, "
                        f"judge_passed {label.judge_passed!r})")
    return label
