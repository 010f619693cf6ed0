"""Progress while a run is going: a rich bar on a terminal, a few plain lines in CI."""

from __future__ import annotations

import sys
from typing import IO, Any, Protocol

from referee.record import CaseResult, CaseStatus
from referee.redact import redact
from referee.terminal import terminal_safe


class ProgressReporter(Protocol):
    def start(self, total: int, already_done: int) -> None: ...
    def case_finished(self, result: CaseResult) -> None: ...
    def stop(self) -> None: ...


class SilentProgress:
    def start(self, total: int, already_done: int) -> None:
        pass

    def case_finished(self, result: CaseResult) -> None:
        pass

    def stop(self) -> None:
        pass


class LineProgress:
    """CI logs: one line per problem case and one per tenth of the run, never a redraw."""

    def __init__(self, stream: IO[str] | None = None, label: str = "") -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.label = label
        self.total = 0
        self.done = 0
        self._step = 1
        self._next_mark = 1

    def start(self, total: int, already_done: int) -> None:
        self.total = total
        self.done = already_done
        self._step = max(1, total // 10)
        self._next_mark = self.done + self._step
        resumed = f" ({already_done} already finished)" if already_done else ""
        self._write(f"referee: running {total} case(s){resumed}{self._suffix()}")

    def case_finished(self, result: CaseResult) -> None:
        self.done += 1
        if result.status not in (CaseStatus.PASSED, CaseStatus.SKIPPED):
            reason = f": {result.error}" if result.error else ""
            self._write(f"referee: [{self.done}/{self.total}] {result.status.value} "
                        f"{result.label}{reason}")
        elif self.done >= self._next_mark or self.done == self.total:
            self._write(f"referee: [{self.done}/{self.total}] done")
        while self._next_mark <= self.done:
            self._next_mark += self._step

    def stop(self) -> None:
        pass

    def _suffix(self) -> str:
        return f" for {self.label}" if self.label else ""

    def _write(self, line: str) -> None:
        # Case names and errors are untrusted text: no escape sequence reaches the terminal.
        print(terminal_safe(redact(line)), file=self.stream, flush=True)


class RichProgress:
    """A live bar with pass/fail/error counts, drawn on stderr so stdout stays clean."""

    def __init__(self, label: str = "") -> None:
        from rich.console import Console
        from rich.markup import escape
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self._progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[counts]}"), TimeElapsedColumn(),
            console=Console(stderr=True), transient=False,
        )
        self.label = escape(terminal_safe(label)) or "evaluating"
        self._task: Any = None  # rich's TaskID
        self._counts = {"passed": 0, "failed": 0, "errors": 0}

    def start(self, total: int, already_done: int) -> None:
        self._progress.start()
        self._task = self._progress.add_task(self.label, total=total, completed=already_done,
                                             counts=self._count_text())

    def case_finished(self, result: CaseResult) -> None:
        if result.status == CaseStatus.PASSED:
            self._counts["passed"] += 1
        elif result.status == CaseStatus.FAILED:
            self._counts["failed"] += 1
        elif result.status.is_error:
            self._counts["errors"] += 1
        if self._task is not None:
            self._progress.update(self._task, advance=1, counts=self._count_text())

    def stop(self) -> None:
        self._progress.stop()

    def _count_text(self) -> str:
        c = self._counts
        return f"[green]{c['passed']} passed[/] [red]{c['failed']} failed[/] [yellow]{c['errors']} errors[/]"


def make_progress(verbose: bool, label: str = "") -> ProgressReporter:
    if not verbose:
        return SilentProgress()
    if sys.stderr.isatty():
        return RichProgress(label)
    return LineProgress(label=label)
