"""Calibrated thresholds for Faithfulness, Hallucination and Relevance (the multivon-style API).

The table is the document's, row for row. Lookups go by the *resolved* judge model name.

Aliases: a calibration was measured against one model snapshot, so only names that denote
that same snapshot share its row. Anthropic's ``claude-haiku-4-5`` alias (the built-in default
judge) currently points at ``claude-haiku-4-5-20251001``, and ``gpt-4o-mini-2024-07-18`` is the
snapshot behind ``gpt-4o-mini``; both therefore map to the measured row. Other dated snapshots
are *not* folded onto a row: a model the benchmark never saw gets the "Other models" value.
Matching ignores case and surrounding whitespace.

Calibration files written by ``referee calibrate`` are read here too (``file_threshold``), keyed
by evaluator, judge provider/model and question set; evaluators consult one only on opt-in
(``threshold="calibrated"``, or ``$REFEREE_CALIBRATION_FILE``).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from referee.errors import CalibrationMissing, InputError, beyond_python_limits

DEFAULT_THRESHOLD = 0.70

# The key used in threshold_table() for the document's "Other models" row.
OTHER_MODELS = "*"

CALIBRATED_EVALUATORS = ("hallucination", "faithfulness", "relevance")

_TABLE: Mapping[str, Mapping[str, float]] = MappingProxyType({
    "claude-haiku-4-5-20251001": MappingProxyType(
        {"hallucination": 0.55, "faithfulness": 0.90, "relevance": 0.30}),
    "claude-sonnet-4-6": MappingProxyType(
        {"hallucination": 0.30, "faithfulness": 0.90, "relevance": 0.30}),
    "gpt-4o-mini": MappingProxyType(
        {"hallucination": 0.30, "faithfulness": 0.90, "relevance": 0.30}),
})

_ALIASES: Mapping[str, str] = MappingProxyType({
    "claude-haiku-4-5": "claude-haiku-4-5-20251001",
    "gpt-4o-mini-2024-07-18": "gpt-4o-mini",
})


def calibration_row(model: str | None) -> str | None:
    """The table row a judge model name maps to, or None for "Other models"."""
    key = (model or "").strip().lower()
    key = _ALIASES.get(key, key)
    return key if key in _TABLE else None


def calibrated_threshold(evaluator: str, model: Any, strict: bool = False) -> float:
    """Threshold for ``evaluator`` (e.g. ``"faithfulness"``) judged by ``model`` (a model name or
    a JudgeConfig). A model without a row gets the "Other models" default, or, with
    ``strict=True``, :class:`referee.errors.CalibrationMissing`."""
    model = getattr(model, "model", model)
    if evaluator not in CALIBRATED_EVALUATORS:
        raise ValueError(
            f"no calibration for evaluator {evaluator!r}; calibrated evaluators are "
            f"{', '.join(CALIBRATED_EVALUATORS)}"
        )
    row = calibration_row(model)
    if row is None:
        if strict:
            raise CalibrationMissing(evaluator, str(model))
        return DEFAULT_THRESHOLD
    return _TABLE[row][evaluator]


def threshold_table(calibration_file: str | Path | None = None) -> ThresholdTable:
    """The full calibration table as ``{(evaluator, judge_model): threshold}``.

    Every measured model appears under its table name and under each alias; the "Other models"
    row appears as ``(evaluator, "*")``. The entries of a calibration file (``calibration_file``,
    else the one named by $REFEREE_CALIBRATION_FILE, else .referee/calibration.json when it
    exists) are listed beside it in ``.calibrated`` and in the printed table.
    """
    table = ThresholdTable()
    names_by_row: dict[str, list[str]] = {row: [row] for row in _TABLE}
    for alias, row in _ALIASES.items():
        names_by_row[row].append(alias)
    for row, thresholds in _TABLE.items():
        for evaluator in CALIBRATED_EVALUATORS:
            for name in names_by_row[row]:
                table[(evaluator, name)] = thresholds[evaluator]
    for evaluator in CALIBRATED_EVALUATORS:
        table[(evaluator, OTHER_MODELS)] = DEFAULT_THRESHOLD
    table.calibrated = read_calibration_file(calibration_file_path(calibration_file)).entries
    return table


# Calibration files written by ``referee calibrate`` ----------------------------------------------
#
# The file is read here and written by referee.calibrate; this module never imports that package.
# An entry is keyed by evaluator, judge provider/model and question set, so a threshold fit for one
# judge or one list of questions is never applied to another.

CALIBRATION_FILE_ENV = "REFEREE_CALIBRATION_FILE"
DEFAULT_CALIBRATION_FILE = Path(".referee") / "calibration.json"
CALIBRATION_FORMAT = "referee-calibration"
CALIBRATION_VERSION = 1
# question_set of an evaluator that asks no fixed questions (GEval, CustomRubric, non-QAG criteria).
NO_QUESTION_SET = "-"


class CanaryRow(BaseModel):
    """One labelled row kept with a calibration entry, and how the judge scored it then."""

    model_config = ConfigDict(extra="allow")

    case: dict[str, Any]  # the EvalCase's fields (input, context, expected output, ...)
    output: str
    passed: bool  # the people's verdict
    score: float = Field(ge=0.0, le=1.0)  # the evaluator's score at calibration time
    source: str = ""  # the labels file's row ("file:line")


class CalibrationEntry(BaseModel):
    """One fitted threshold and where it came from."""

    model_config = ConfigDict(extra="allow")

    evaluator: str
    judge_provider: str
    judge_model: str
    question_set: str = NO_QUESTION_SET
    threshold: float = Field(ge=0.0, le=1.0)
    threshold_low: float | None = None
    threshold_high: float | None = None
    metric: str = "kappa"
    n: int = Field(ge=0)
    date: str
    data_fingerprint: str
    labels: str = ""
    # What correcting a pass rate for this judge's errors needs: agreement with people at
    # ``threshold``, and how many labelled passes (positives) and fails (negatives) measured it.
    # Entries written before these existed load as None and cannot correct.
    kappa: float | None = None
    tpr: float | None = Field(default=None, ge=0.0, le=1.0)
    tnr: float | None = Field(default=None, ge=0.0, le=1.0)
    positives: int | None = Field(default=None, ge=0)
    negatives: int | None = Field(default=None, ge=0)
    agreement_source: str | None = None  # "cross-validated, K folds" or "in-sample"

    @property
    def error_counts(self) -> tuple[int, int, int, int] | None:
        """(passes kept, positives, fails caught, negatives), or None when not recorded."""
        if None in (self.tpr, self.tnr, self.positives, self.negatives):
            return None
        positives, negatives = int(self.positives or 0), int(self.negatives or 0)
        return (round(float(self.tpr or 0.0) * positives), positives,
                round(float(self.tnr or 0.0) * negatives), negatives)
    # Recorded with --force although the threshold did not separate the labels: why.
    fit_problem: str | None = None
    # The judge as the provider reported it during the calibration: the model version its
    # replies named (most frequent; None when every reply came from the reply cache) and
    # OpenAI's system fingerprints. A run served another version warns (judge drift).
    served_model: str | None = None
    system_fingerprints: list[str] | None = None
    # A few labelled rows with the judge's scores at calibration time, for
    # `referee calibrate --recheck`; None in entries written before it existed.
    canary: list[CanaryRow] | None = None

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.evaluator, self.judge_provider, self.judge_model.lower(), self.question_set)

    @property
    def provenance(self) -> str:
        forced = "; forced, does not separate the labels" if self.fit_problem else ""
        return (f"calibrated n={self.n} on {self.date}, data {self.data_fingerprint}, "
                f"{self.metric}{forced}")


class CalibrationFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: str = CALIBRATION_FORMAT
    version: int = CALIBRATION_VERSION
    entries: list[CalibrationEntry] = Field(default_factory=list)

    def find(self, evaluator: str, provider: str, model: str,
             question_set: str) -> CalibrationEntry | None:
        wanted = (evaluator, provider, model.strip().lower(), question_set)
        return next((e for e in self.entries if e.key == wanted), None)

    def with_entry(self, entry: CalibrationEntry) -> CalibrationFile:
        """A copy where ``entry`` replaces any entry with the same key."""
        kept = [e for e in self.entries if e.key != entry.key]
        return CalibrationFile(entries=[*kept, entry])


def calibration_file_path(path: str | Path | None = None) -> Path:
    """``path``, else $REFEREE_CALIBRATION_FILE, else .referee/calibration.json."""
    if path is not None:
        return Path(path)
    configured = os.environ.get(CALIBRATION_FILE_ENV, "").strip()
    return Path(configured) if configured else DEFAULT_CALIBRATION_FILE


def calibration_file_configured() -> bool:
    """Whether $REFEREE_CALIBRATION_FILE names a file whose entries evaluators should use."""
    return bool(os.environ.get(CALIBRATION_FILE_ENV, "").strip())


def read_calibration_file(path: str | Path) -> CalibrationFile:
    """The calibration file at ``path``; an empty one when it does not exist yet."""
    source = Path(path)
    if not source.exists():
        return CalibrationFile()
    try:
        text = source.read_text(encoding="utf-8-sig")  # a BOM, should an editor add one
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg} (column {exc.colno})", source=str(source),
                         line=exc.lineno) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read calibration file: {exc}", source=str(source)) from None
    except (ValueError, RecursionError) as exc:
        raise beyond_python_limits(exc, source=str(source), text=text) from None
    if not isinstance(data, dict) or data.get("format") != CALIBRATION_FORMAT:
        raise InputError("not a referee calibration file", source=str(source),
                         expected=f'a JSON object with "format": "{CALIBRATION_FORMAT}"')
    try:
        return CalibrationFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise InputError(str(first["msg"]), source=str(source), field=where) from None


def file_threshold(evaluator: str, provider: str, model: str, question_set: str, *,
                   required: bool, path: str | Path | None = None) -> CalibrationEntry | None:
    """The calibration file's entry for this evaluator, judge and question set.

    ``required`` (``threshold="calibrated"``): a missing file or entry is an error that says how
    to make one; otherwise None lets the caller fall back to the built-in table.
    """
    location = calibration_file_path(path)
    if not required and path is None and not calibration_file_configured():
        return None  # without threshold="calibrated", only a file named in config is consulted
    table = _read_cached(location)
    entry = table.find(evaluator, provider, model, question_set)
    if entry is None and required:
        known = ", ".join(f"{e.evaluator} by {e.judge_provider}/{e.judge_model}"
                          for e in table.entries) or "none"
        where = location if location.exists() else f"{location} (no such file)"
        raise ValueError(
            f"{evaluator}: threshold='calibrated' but {where} has no entry for {evaluator} "
            f"judged by {provider}/{model} with this question set (entries: {known}); run "
            f"'referee calibrate LABELS --evaluator {evaluator} --judge {provider}/{model}' first")
    return entry


_cache_lock = threading.Lock()
_read_cache: dict[Path, tuple[tuple[int, int], CalibrationFile]] = {}


def _read_cached(path: Path) -> CalibrationFile:
    """Evaluators look the file up for every case; read it again only when it changes."""
    try:
        stat = path.stat()
    except OSError:
        return CalibrationFile()
    stamp = (stat.st_mtime_ns, stat.st_size)
    key = path.resolve()
    with _cache_lock:
        hit = _read_cache.get(key)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    table = read_calibration_file(path)
    with _cache_lock:
        _read_cache[key] = (stamp, table)
    return table


class ThresholdTable(dict):  # type: ignore[type-arg]
    """``{(evaluator, judge_model): threshold}`` of the built-in table, as before.

    ``calibrated`` holds the entries of the configured calibration file, and printing the table
    shows both, each row with its provenance.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.calibrated: list[CalibrationEntry] = []

    def __str__(self) -> str:
        lines = [f"{'evaluator':<14} {'judge':<34} {'threshold':>9}  source"]
        for (evaluator, model), value in self.items():
            judge = "other models" if model == OTHER_MODELS else model
            lines.append(f"{evaluator:<14} {judge:<34} {value:>9.2f}  built-in table")
        for entry in self.calibrated:
            judge = f"{entry.judge_provider}/{entry.judge_model}"
            lines.append(f"{entry.evaluator:<14} {judge:<34} {entry.threshold:>9.2f}  "
                         f"{entry.provenance}")
        return "\n".join(lines)
