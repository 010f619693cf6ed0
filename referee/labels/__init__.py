"""People's verdicts on a stored run's criterion results: kept beside the run in labels.jsonl,
ordered into a review queue for the viewer, and exported as rows ``referee calibrate`` reads."""

from __future__ import annotations

from referee._lazy import lazy_getattr

_EXPORTS = {
    "LABELS_FILE": "referee.labels._store",
    "Label": "referee.labels._store",
    "LabelStore": "referee.labels._store",
    "review_queue": "referee.labels._queue",
    "QueueItem": "referee.labels._queue",
    "export_rows": "referee.labels._export",
    "write_export": "referee.labels._export",
    "estimate_run": "referee.labels._estimate",
    "estimate_report": "referee.labels._estimate",
}

__all__ = list(_EXPORTS)

__getattr__ = lazy_getattr(__name__, globals(), _EXPORTS)
