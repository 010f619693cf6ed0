"""The run store: a run on disk, written case by case (``RunStore``), read back as a report
(``load_run``, ``list_runs``), its cases read from cases.jsonl on demand (``StoredCases``) and
its earlier scorings kept under versions/<n>/ (read as ``RUN_DIR@N``).

The store keeps the record (:mod:`referee.record`) and renders nothing; the views in
:mod:`referee.report` read what it stores.
"""

from referee.store._case_file import StoredCases, scan_offsets
from referee.store._run_store import (
    CASES_FILE,
    DAMAGED_LINES_FILE,
    DEFAULT_RUNS_DIR,
    LABELS_FILE,
    LOCK_FILE,
    META_FILE,
    RENDERED_FILES,
    REPORT_FILE,
    RUNS_DIR_ENV,
    RunInfo,
    RunInUse,
    RunStore,
    RunStoreWriteError,
    case_fingerprint,
    list_runs,
    load_run,
    read_report_file,
    runs_dir_or_default,
)
from referee.store._versions import (
    VERSION_KEY,
    VERSIONS_DIR,
    describe,
    earlier_versions,
    split_ref,
    version_dir,
    version_number,
)

__all__ = [
    "CASES_FILE",
    "DAMAGED_LINES_FILE",
    "DEFAULT_RUNS_DIR",
    "LABELS_FILE",
    "LOCK_FILE",
    "META_FILE",
    "RENDERED_FILES",
    "REPORT_FILE",
    "RUNS_DIR_ENV",
    "VERSIONS_DIR",
    "VERSION_KEY",
    "RunInUse",
    "RunInfo",
    "RunStore",
    "RunStoreWriteError",
    "StoredCases",
    "case_fingerprint",
    "describe",
    "earlier_versions",
    "list_runs",
    "load_run",
    "read_report_file",
    "runs_dir_or_default",
    "scan_offsets",
    "split_ref",
    "version_dir",
    "version_number",
]
