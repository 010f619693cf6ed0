"""How the peers' rendering methods on the record reach the views without the record importing
them: 10xgraph's ``format_summary()`` and multivon's ``to_html()``, ``to_junit_xml()``,
``save_json()``, ``compare()`` and the rest are methods users call on a report, while the
console, HTML, JUnit and compare views live above the record in :mod:`referee.report`.

The views module installs itself here when imported; the record loads it by name on the
first rendering call, the one name the record knows of the views (as ``run.backends`` loads a
backend by the module path a run names), so importing the record never loads a view.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from referee.record._model import EvalReport

VIEWS_MODULE = "referee.report._record_views"


class ReportViews(Protocol):
    """What the record's peer methods ask of the views."""

    def summary_text(self, report: EvalReport) -> str: ...
    def html(self, report: EvalReport) -> str: ...
    def junit_xml(self, report: EvalReport) -> str: ...
    def compare(self, baseline: EvalReport, other: EvalReport) -> Any: ...
    def save_text(self, path: str | Path, text: str) -> None: ...


_installed: list[ReportViews] = []


def install_views(views: ReportViews) -> None:
    """Called by the views module when imported; the latest installed views answer."""
    _installed[:] = [views]


def report_views() -> ReportViews:
    if not _installed:
        import_module(VIEWS_MODULE)  # installs its views on import
    return _installed[0]
