"""Calibrating from a stored run: its outputs and the labels people made on it in
``referee view`` (referee.labels), read exactly as their export file would be read."""

from __future__ import annotations

from pathlib import Path

from referee.calibrate._labels import LabelledCase, row_from_mapping
from referee.errors import InputError
from referee.labels._export import export_rows, run_root
from referee.labels._store import LabelStore
from referee.store import LABELS_FILE


def labelled_cases_from_run(run_dir: str | Path, *, criterion: str | None = None,
                            evaluator_name: str | None = None) -> list[LabelledCase]:
    """The run's labels as ``LabelledCase`` rows, read as the export file would be read.

    ``criterion`` picks the criterion whose labels to use; without it, the only labelled one,
    else the one named like the evaluator.
    """
    root = run_root(run_dir)
    store = LabelStore(root)
    source = str(store.path)
    labelled = sorted({label.criterion for label in store.latest().values()
                       if label.human_passed is not None})
    if criterion is None:
        if len(labelled) == 1:
            criterion = labelled[0]
        elif evaluator_name is not None and evaluator_name in labelled:
            criterion = evaluator_name
        elif labelled:
            raise InputError("labels on several criteria", source=source,
                             expected="--criterion, one of " + ", ".join(labelled))
    rows = export_rows(root, criterion=criterion)
    if not rows:
        raise InputError("no pass/fail labels" + (f" on criterion {criterion!r}" if criterion
                                                  else ""),
                         source=source,
                         expected="labels made in `referee view` (right/wrong or pass/fail)")
    return [row_from_mapping(row, f"{root}/{LABELS_FILE}", number)
            for number, row in enumerate(rows, start=1)]
