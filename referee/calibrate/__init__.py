"""Calibration: how far an evaluator with a given judge agrees with people, and the threshold it
deserves (``referee calibrate``).

Reads human-labelled cases (referee's JSONL/CSV/YAML format, or the public SummEdits, HaluEval and
EVOUNA files), scores them through the engine as a stored, resumable run, and reports agreement
with bootstrap intervals, the agreement curve, the fitted threshold and, for QAG evaluators, the
questions that disagree with people most. The statistics need numpy (``referee[calibrate]``).
"""

from __future__ import annotations

from referee._lazy import lazy_getattr

_EXPORTS = {
    "calibrate": "referee.calibrate._run",
    "calibrate_async": "referee.calibrate._run",
    "CalibrationReport": "referee.calibrate._report",
    "LabelledCase": "referee.calibrate._labels",
    "load_labels": "referee.calibrate._labels",
    "load_summedits": "referee.calibrate._public",
    "load_halueval": "referee.calibrate._public",
    "load_evouna": "referee.calibrate._public",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_getattr(__name__, globals(), _EXPORTS)
