"""10xgraph's reporter classes, over referee's own renderers.

``ConsoleReporter``, ``JSONReporter``, ``JUnitXMLReporter`` and ``HTMLReporter`` keep 10xgraph's
constructors and methods (``report``, ``to_dict``/``to_json``, ``to_xml``, ``to_html``, ``save``,
``quick_save``, ``generate``), and ``ReporterManager`` runs the ones a ``ReporterConfig`` enables,
plus any ``BaseReporter`` of the user's. What they write is what ``referee run --format`` writes:
the console summary, the lean JSON report, JUnit XML and the HTML report. Their ``include_*``
switches trim a copy of the report before it is rendered; the renderers never learn of them.
"""

from __future__ import annotations

import abc
import json
import logging
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TextIO

from referee.config import ReporterConfig
from referee.record import CaseResult, EvalReport
from referee.report.console import NON_TERMINAL_WIDTH, render_text
from referee.report.html import render_html
from referee.report.json_report import lean_report_dict
from referee.report.junit import render_junit
from referee.report.writers import FILE_RENDERERS, save_text

logger = logging.getLogger("referee.report")

# Where 10xgraph's result fields live in referee's model, for the include_* switches.
_TRAJECTORY_KEYS = ("actual_trajectory", "trajectory")
_NODE_RESPONSE_KEYS = ("node_responses", "node_details")


def trimmed_report(report: EvalReport, *, details: bool = True, trajectory: bool = True,
                   tool_call_details: bool = True, node_responses: bool = True,
                   actual_response: bool = True) -> EvalReport:
    """A copy of ``report`` without what the switches turn off (the original is untouched),
    with stand-ins for values JSON cannot hold (a report built by hand may carry any object).

    ``tool_call_details=False`` keeps each call's name and drops its arguments and result;
    ``actual_response=False`` drops the final response and each turn's response.
    """
    dropped_keys = ((() if trajectory else _TRAJECTORY_KEYS)
                    + (() if node_responses else _NODE_RESPONSE_KEYS))

    def without(metadata: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in metadata.items() if k not in dropped_keys}

    def bare_calls(calls: list[Any]) -> list[Any]:
        return calls if tool_call_details else [
            c.model_copy(update={"args": {}, "result": None,
                                 "nested_calls": bare_calls(c.nested_calls)}) for c in calls]

    def trim(case: CaseResult) -> CaseResult:
        case = case.storable()
        update: dict[str, Any] = {"metadata": without(case.metadata)}
        if not details:
            update["criterion_results"] = [r.model_copy(update={"details": {}})
                                           for r in case.criterion_results]
        run = case.execution
        if run is not None:
            turns = [t.model_copy(update={"tool_calls": bare_calls(t.tool_calls),
                                          **({} if actual_response else {"response": ""})})
                     for t in run.turns]
            update["execution"] = run.model_copy(update={
                "metadata": without(run.metadata), "tool_calls": bare_calls(run.tool_calls),
                "turns": turns, **({} if actual_response else {"actual_response": ""})})
        return case.model_copy(update=update)

    return report.model_copy(update={"cases": [trim(c) for c in report.cases]})


class BaseReporter(abc.ABC):
    """A reporter ``ReporterManager`` can run: ``generate`` renders ``report``, writing a file
    under ``output_dir`` (its path is returned) or, without one, returning the text (None
    for reporters that only print)."""

    @abc.abstractmethod
    def generate(self, report: EvalReport, output_dir: str | None = None) -> str | None:
        ...

    @property
    def name(self) -> str:
        return type(self).__name__


class _FileReporter(BaseReporter):
    """A reporter of one of referee's file formats, written under that format's file name."""

    format_name: ClassVar[str]

    @abc.abstractmethod
    def render(self, report: EvalReport) -> str:
        ...

    def generate(self, report: EvalReport, output_dir: str | None = None) -> str | None:
        if output_dir is None:
            return self.render(report)
        path = str(Path(output_dir) / FILE_RENDERERS[self.format_name][0])
        self.save(report, path)
        return path

    def save(self, report: EvalReport, path: str | Path) -> None:
        """Write the report to ``path``, creating its folder."""
        save_text(path, self.render(report))

    @classmethod
    def quick_save(cls, report: EvalReport, path: str | Path) -> None:
        cls().save(report, path)


class Colors:
    """10xgraph's ANSI colour constants, for users' own console output. referee's console
    report colours itself; ``ConsoleReporter(use_color=False)`` turns that off."""

    RESET = "\033[0m"
    BOLD = "\033[1m"
    DIM = "\033[2m"
    RED = "\033[31m"
    GREEN = "\033[32m"
    YELLOW = "\033[33m"
    BLUE = "\033[34m"
    MAGENTA = "\033[35m"
    CYAN = "\033[36m"
    WHITE = "\033[37m"
    BG_RED = "\033[41m"
    BG_GREEN = "\033[42m"

    @classmethod
    def disable(cls) -> None:
        """Blank every constant (for every user of the class)."""
        for name in [n for n in vars(cls) if n.isupper()]:
            setattr(cls, name, "")


class ConsoleReporter(BaseReporter):
    """Prints referee's console summary to ``output`` (stdout by default).

    ``use_color=None`` colours only when ``output`` is a terminal. ``verbose`` lists every
    case, not only the first failed and errored ones. ``include_trajectory`` and
    ``include_actual_response`` are kept for 10xgraph code but change nothing: the summary
    shows no responses or trajectories; the HTML and JSON reports carry them.
    """

    def __init__(self, use_color: bool | None = True, verbose: bool = False,
                 output: TextIO | None = None, include_trajectory: bool = False,
                 include_actual_response: bool = False) -> None:
        self.use_color = use_color
        self.verbose = verbose
        self.output = output or sys.stdout
        self.include_trajectory = include_trajectory
        self.include_actual_response = include_actual_response

    def generate(self, report: EvalReport, output_dir: str | None = None) -> str | None:
        self.report(report)
        return None

    def render(self, report: EvalReport) -> str:
        """The summary as ``report`` prints it, with colour codes when colour is on."""
        is_terminal = bool(getattr(self.output, "isatty", lambda: False)())
        color = is_terminal if self.use_color is None else self.use_color
        width = shutil.get_terminal_size().columns if is_terminal else NON_TERMINAL_WIDTH
        return render_text(report, width=width, soft_wrap=not is_terminal, color=color,
                           every_case=self.verbose)

    def report(self, report: EvalReport) -> None:
        text = self.render(report)
        try:
            self.output.write(text)
        except UnicodeEncodeError:
            # A console that cannot show a character (a legacy Windows code page) gets "?".
            encoding = getattr(self.output, "encoding", None) or "ascii"
            self.output.write(text.encode(encoding, errors="replace").decode(encoding))
        flush = getattr(self.output, "flush", None)
        if callable(flush):
            flush()


def print_report(report: EvalReport, verbose: bool = False, use_color: bool = True) -> None:
    """Print referee's console summary of ``report`` to stdout."""
    ConsoleReporter(use_color=use_color, verbose=verbose).report(report)


class _TrimmingReporter(_FileReporter):
    """A file reporter with 10xgraph's ``include_*`` switches (set by its constructor)."""

    include_details: bool
    include_trajectory: bool
    include_node_responses: bool
    include_actual_response: bool
    include_tool_call_details: bool

    def _trimmed(self, report: EvalReport) -> EvalReport:
        return trimmed_report(
            report, details=self.include_details, trajectory=self.include_trajectory,
            tool_call_details=self.include_tool_call_details,
            node_responses=self.include_node_responses,
            actual_response=self.include_actual_response)


class JSONReporter(_TrimmingReporter):
    """referee's JSON report (``results.json`` under ``generate``'s ``output_dir``)."""

    format_name = "json"

    def __init__(self, indent: int | None = 2, include_details: bool = True,
                 include_trajectory: bool = True, include_node_responses: bool = True,
                 include_actual_response: bool = True,
                 include_tool_call_details: bool = True) -> None:
        self.indent = indent
        self.include_details = include_details
        self.include_trajectory = include_trajectory
        self.include_node_responses = include_node_responses
        self.include_actual_response = include_actual_response
        self.include_tool_call_details = include_tool_call_details

    def to_dict(self, report: EvalReport) -> dict[str, Any]:
        return lean_report_dict(self._trimmed(report))

    def to_json(self, report: EvalReport) -> str:
        return json.dumps(self.to_dict(report), indent=self.indent, ensure_ascii=False)

    def render(self, report: EvalReport) -> str:
        return self.to_json(report)

    @classmethod
    def quick_save(cls, report: EvalReport, path: str | Path, indent: int | None = 2) -> None:
        cls(indent=indent).save(report, path)


class JUnitXMLReporter(_FileReporter):
    """referee's JUnit XML (``junit.xml``): one test per criterion of each case;
    ``suite_name`` names the outer ``<testsuites>`` element."""

    format_name = "junit"

    def __init__(self, suite_name: str = "agent-evaluation") -> None:
        self.suite_name = suite_name

    def to_xml(self, report: EvalReport) -> str:
        return render_junit(report, suites_name=self.suite_name)

    def render(self, report: EvalReport) -> str:
        return self.to_xml(report)


class HTMLReporter(_TrimmingReporter):
    """referee's self-contained HTML report (``report.html``)."""

    format_name = "html"

    def __init__(self, include_details: bool = True, include_actual_response: bool = True,
                 include_tool_call_details: bool = True, include_node_responses: bool = True,
                 include_trajectory: bool = True) -> None:
        self.include_details = include_details
        self.include_actual_response = include_actual_response
        self.include_tool_call_details = include_tool_call_details
        self.include_node_responses = include_node_responses
        self.include_trajectory = include_trajectory

    def to_html(self, report: EvalReport) -> str:
        return render_html(self._trimmed(report))

    def render(self, report: EvalReport) -> str:
        return self.to_html(report)


@dataclass
class ReporterOutput:
    """What ``ReporterManager.run_all`` produced: the files written, whether the console
    summary printed, and ``(reporter name, error)`` for each reporter that failed.
    ``custom_paths`` holds what the user's own reporters returned, by reporter name."""

    json_path: str | None = None
    html_path: str | None = None
    junit_path: str | None = None
    console_output: bool = False
    errors: list[tuple[str, str]] = field(default_factory=list)
    custom_paths: dict[str, str] = field(default_factory=dict)

    @property
    def has_errors(self) -> bool:
        return bool(self.errors)

    @property
    def generated_files(self) -> list[str]:
        built_in = [p for p in (self.json_path, self.html_path, self.junit_path) if p]
        return built_in + list(self.custom_paths.values())


class ReporterManager:
    """Runs the reporters ``config`` enables, then ``reporters`` (your own ``BaseReporter``s,
    each given the output folder). A reporter that fails is recorded in the output's
    ``errors`` and the others still run.

    Files are named after the eval set (``<id>.json``, ``<id>.html``, ``<id>_junit.xml``,
    with ``_<YYYYmmdd_HHMMSS>`` of the run's start unless ``timestamp_files=False``).
    """

    def __init__(self, config: ReporterConfig | None = None,
                 reporters: list[BaseReporter] | None = None) -> None:
        self.config = config if config is not None else ReporterConfig()
        self.reporters: list[BaseReporter] = list(reporters or [])

    def run_all(self, report: EvalReport, output_dir: str | None = None) -> ReporterOutput:
        out = ReporterOutput()
        cfg = self.config
        if not cfg.enabled:
            return out
        folder = Path(output_dir or cfg.output_dir).absolute()
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            # The console summary can still print; each file reporter then records its own error.
            out.errors.append(("directory", str(exc)))
        stem = self._build_stem(report)
        trims = dict(include_details=cfg.include_details,
                     include_trajectory=cfg.include_trajectory,
                     include_node_responses=cfg.include_node_responses,
                     include_actual_response=cfg.include_actual_response,
                     include_tool_call_details=cfg.include_tool_call_details)
        if cfg.console:
            console = ConsoleReporter(use_color=None, verbose=cfg.verbose,
                                      include_trajectory=cfg.include_trajectory,
                                      include_actual_response=cfg.include_actual_response)
            out.console_output, _ = self._attempt(out, console, lambda: console.report(report))
        planned: list[tuple[bool, str, _FileReporter, str]] = [
            (cfg.json_report, "json_path", JSONReporter(**trims), f"{stem}.json"),
            (cfg.html, "html_path", HTMLReporter(**trims), f"{stem}.html"),
            (cfg.junit_xml, "junit_path", JUnitXMLReporter(), f"{stem}_junit.xml"),
        ]
        for enabled, slot, reporter, filename in planned:
            if not enabled:
                continue
            path = str(folder / filename)
            saved, _ = self._attempt(out, reporter,
                                     lambda: reporter.save(report, path))  # noqa: B023  # called at once
            if saved:
                setattr(out, slot, path)
        for custom in self.reporters:
            ran, written = self._attempt(
                out, custom, lambda: custom.generate(report, str(folder)))  # noqa: B023  # called at once
            if ran and isinstance(written, str) and written:
                out.custom_paths[custom.name] = written
        return out

    @staticmethod
    def _attempt(out: ReporterOutput, reporter: BaseReporter,
                 action: Callable[[], Any]) -> tuple[bool, Any]:
        """Run one reporter's step: (True, what it returned), or (False, None) with its error
        recorded."""
        try:
            return True, action()
        except Exception as exc:  # one reporter's fault never stops the others
            logger.error("%s failed: %s", reporter.name, exc)
            out.errors.append((reporter.name, str(exc) or type(exc).__name__))
            return False, None

    def _build_stem(self, report: EvalReport) -> str:
        raw = report.eval_set_id or report.name or "eval"
        stem = "".join(c if c.isalnum() or c in "-_" else "_" for c in raw)
        if self.config.timestamp_files:
            stem += time.strftime("_%Y%m%d_%H%M%S", time.localtime(report.started_at))
        return stem
