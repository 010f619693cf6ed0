"""Which calibration each judged criterion of a run has: the calibration file's entry for its
evaluator, judge provider/model and question set, judged at the entry's threshold.

The record (record/_correction.py's JudgeCalibration) goes into the report, which corrects the
criterion's pass rate with it; the gates in run/judge_gate.py read it too.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from referee.criteria.base import Criterion, JudgedCriterion, criterion_label
from referee.errors import InputError
from referee.evaluators.calibration import (
    NO_QUESTION_SET,
    CalibrationEntry,
    CalibrationFile,
    calibration_file_path,
    read_calibration_file,
)
from referee.judge.served import ServedLog
from referee.record import JudgeCalibration
from referee.result import unique_labels

# Thresholds equal to this many decimals are the same classifier (a file stores floats).
_THRESHOLD_DIGITS = 9


def is_judged(criterion: object) -> bool:
    """A criterion that asks a judge: it can say which one (``judge_config``)."""
    return isinstance(criterion, JudgedCriterion) and callable(criterion.judge_config)


def calibration_records(criteria: Sequence[Criterion], path: str | Path | None = None, *,
                        served: ServedLog | None = None,
                        judges: dict[str, dict[str, Any]] | None = None,
                        ) -> dict[str, JudgeCalibration]:
    """By criterion label (as the report keys them): the calibration of each judged criterion.

    Looked up after the run, when every criterion has prepared (a CheckEvaluator's questions,
    and so its question set, exist only then). A broken calibration file never stops a run:
    each judged criterion is recorded as uncalibrated, with the file's error as the reason.
    ``served``: the model versions the run's judge replies named; a matched entry calibrated
    against another version is marked as drifted. ``judges``: by label, each criterion's judge
    as the run described it before its first case (not resolved again here).
    """
    location = calibration_file_path(path)
    labels = unique_labels([criterion_label(c) for c in criteria])
    judged = [(label, c) for label, c in zip(labels, criteria) if is_judged(c)]
    if not judged:
        return {}
    table: CalibrationFile | None = None
    unreadable = ""
    try:
        table = read_calibration_file(location)
    except InputError as exc:
        unreadable = f"the calibration file cannot be read: {exc}"
    records = {label: _record(criterion, table, location, unreadable,
                              (judges or {}).get(label))
               for label, criterion in judged}
    for record in records.values():
        record.served_models = served.models(record.judge) if served is not None else []
        record.drift = drift_between(record.calibrated_served_model, record.served_models)
    return records


def drift_between(calibrated: str | None, served: Sequence[str]) -> str | None:
    """What to say when the provider served other versions than the calibrated one; None when
    it did not, or when either side is unknown (an older entry, replies from the cache)."""
    if not calibrated:
        return None
    others = [name for name in served if name.strip().lower() != calibrated.strip().lower()]
    if not others:
        return None
    return (f"calibrated against {calibrated}, but the provider now serves "
            f"{', '.join(others)}: the measured agreement may no longer hold (run "
            f"'referee calibrate --recheck', or calibrate again)")


def _identity(criterion: Any, described: dict[str, Any] | None = None,
              ) -> tuple[str, str, str, str, float | None]:
    """(evaluator, provider, model, question set, threshold) as calibrate keys them.

    ``described``: the criterion's judge as the run described it (run/describe.py), resolved
    once for the whole run; without it (or for a panel) the judge is resolved here."""
    name = str(getattr(criterion, "name", type(criterion).__name__))
    if described and described.get("provider") and described.get("model"):
        provider, model = str(described["provider"]), str(described["model"])
    else:
        try:
            config = criterion.judge_config()
        except Exception:  # an unresolvable judge shows up as the case errors, not here
            config = None
        provider = str(getattr(config, "provider", "") or "")
        model = str(getattr(config, "model", "") or "")
    describe = getattr(criterion, "question_set", None)
    try:
        question_set = str(describe()) if callable(describe) else NO_QUESTION_SET
    except Exception:
        question_set = NO_QUESTION_SET
    threshold = getattr(criterion, "threshold", None)
    return (name, provider, model, question_set,
            float(threshold) if isinstance(threshold, (int, float)) else None)


def _record(criterion: Any, table: CalibrationFile | None, location: Path,
            unreadable: str, described: dict[str, Any] | None = None) -> JudgeCalibration:
    name, provider, model, question_set, threshold = _identity(criterion, described)
    record = JudgeCalibration(evaluator=name, judge=f"{provider}/{model}" if provider else "none",
                              question_set=question_set, threshold=threshold, file=str(location))
    if unreadable:
        record.reason = unreadable
        return record
    if not provider:
        record.reason = "no judge could be resolved for this criterion"
        return record
    entry = table.find(name, provider, model, question_set) if table is not None else None
    if entry is None:
        where = location if location.exists() else f"{location} (no such file)"
        record.reason = (f"{where} has no entry for {name} judged by {provider}/{model} with "
                         f"this question set; run 'referee calibrate LABELS --evaluator {name} "
                         f"--judge {provider}/{model}'")
        return record
    _fill(record, entry)
    if threshold is None or round(threshold, _THRESHOLD_DIGITS) != round(entry.threshold,
                                                                         _THRESHOLD_DIGITS):
        shown = "an unknown threshold" if threshold is None else f"threshold {threshold:g}"
        record.matched = False
        record.reason = (f"calibrated at threshold {entry.threshold:g}, but the run judged at "
                         f"{shown}: the measured TPR/TNR belong to the calibrated threshold "
                         f"(use threshold='calibrated' or $REFEREE_CALIBRATION_FILE)")
        return record
    counts = entry.error_counts
    if counts is None or counts[1] == 0 or counts[3] == 0:
        record.reason = ("the entry records no TPR/TNR with both labelled passes and fails "
                         "(an older referee calibrate, or labels of one verdict): calibrate "
                         "again to correct pass rates")
    return record


def _fill(record: JudgeCalibration, entry: CalibrationEntry) -> None:
    record.matched = True
    record.calibrated_threshold = entry.threshold
    record.kappa = entry.kappa
    record.tpr, record.tnr = entry.tpr, entry.tnr
    record.positives, record.negatives = entry.positives, entry.negatives
    record.n, record.date = entry.n, entry.date
    record.data_fingerprint = entry.data_fingerprint
    record.agreement_source = entry.agreement_source
    record.calibrated_served_model = entry.served_model
