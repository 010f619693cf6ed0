"""The views behind the record's peer rendering methods (``format_summary()``, ``to_html()``,
``to_junit_xml()``, ``compare()``, ``save_*``), installed into the record when this module is
imported (the record imports it by name on its first rendering call), so the record renders
through the one renderer of each format and imports none."""

from __future__ import annotations

from pathlib import Path

from referee.record import EvalReport, install_views
from referee.report.compare import Comparison, compare_reports
from referee.report.console import render_text
from referee.report.html import render_html
from referee.report.junit import render_junit
from referee.report.writers import save_text


class RecordViews:
    def summary_text(self, report: EvalReport) -> str:
        return render_text(report)

    def html(self, report: EvalReport) -> str:
        return render_html(report)

    def junit_xml(self, report: EvalReport) -> str:
        return render_junit(report)

    def compare(self, baseline: EvalReport, other: EvalReport) -> Comparison:
        return compare_reports(baseline, other)

    def save_text(self, path: str | Path, text: str) -> None:
        save_text(path, text)


install_views(RecordViews())
