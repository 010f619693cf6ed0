"""People's verdicts on a stored run's criterion results: kept beside the run in labels.jsonl,
ordered into a review queue for the viewer, and exported as rows ``referee calibrate`` reads."""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "LABELS_FILE": "referee.labels._store",
    "Label": "referee.labels._store",
    "LabelStore": "referee.labels._store",
    "review_queue": "referee.labels._queue",
    "QueueItem": "referee.labels._queue",
    "export_rows": "referee.labels._export",
    "write_export": "referee.labels._export",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'referee.labels' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
