"""The views of a run: console, JSON, JUnit, HTML, the viewer, compare. Every format renders one
stored run; the record they render is :mod:`referee.record`, the run store :mod:`referee.store`.

The record and the store once lived here, and their old module paths still import:
``referee.report.model``, ``referee.report.store`` and the rest are the moved modules
themselves (not copies), so what a user imports, patches or unpickles under an old path is the
one object.
"""

import sys
from importlib import import_module

from referee.record import (
    ERROR_STATUSES,
    CaseResult,
    CaseStatus,
    CriterionStats,
    EvalReport,
    EvalSummary,
)
from referee.report.compare import Comparison, compare_reports

_MOVED_MODULES = {
    "model": "referee.record._model",
    "trials": "referee.record._trials",
    "agreement": "referee.record._agreement",
    "correction": "referee.record._correction",
    "store": "referee.store._run_store",
    "case_file": "referee.store._case_file",
    "versions": "referee.store._versions",
}
for _old, _new in _MOVED_MODULES.items():
    sys.modules[f"{__name__}.{_old}"] = globals()[_old] = import_module(_new)

__all__ = ["CaseResult", "CaseStatus", "Comparison", "CriterionStats", "ERROR_STATUSES", "EvalReport",
           "EvalSummary", "compare_reports"]
