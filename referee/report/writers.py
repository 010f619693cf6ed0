"""Write one run's report in the requested formats next to its stored data."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from rich.console import Console

from referee.record import EvalReport
from referee.report.console import render_console
from referee.report.html import render_html
from referee.report.json_report import iter_json, render_json
from referee.report.junit import render_junit
from referee.store import RENDERED_FILES

# report.json belongs to the run store (the full record load_run reads); the lean JSON
# report gets its own name so neither overwrites the other. The store names the files.
FILE_RENDERERS: dict[str, tuple[str, Callable[[EvalReport], str]]] = {
    "json": (RENDERED_FILES["json"], render_json),
    "junit": (RENDERED_FILES["junit"], render_junit),
    "html": (RENDERED_FILES["html"], render_html),
}
FORMATS = ("console", *FILE_RENDERERS)
# Formats written piece by piece, so a run larger than memory still gets its file.
STREAMED_RENDERERS: dict[str, Callable[[EvalReport], Iterator[str]]] = {"json": iter_json}


def parse_formats(formats: Iterable[str] | str) -> list[str]:
    """Normalise ``"json,html"`` or ``["json", "html"]``; unknown names are a clear error."""
    items = formats.split(",") if isinstance(formats, str) else list(formats)
    out: list[str] = []
    for item in items:
        name = item.strip().lower()
        if not name:
            continue
        if name not in FORMATS:
            raise ValueError(f"unknown report format {item.strip()!r}; expected one of: {', '.join(FORMATS)}")
        if name not in out:
            out.append(name)
    return out


def write_atomic(path: Path, pieces: Iterable[str]) -> None:
    """Write ``pieces`` to ``path`` through a temporary file: a reader never sees half a file."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for piece in pieces:
            fh.write(piece)
    os.replace(tmp, path)


def save_text(path: str | Path, text: str) -> None:
    """Write one report file atomically, creating its folder first."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, [text])


def write_reports(report: EvalReport, run_dir: Path, formats: Iterable[str] | str,
                  *, console: Console | None = None) -> dict[str, Path]:
    """Render ``formats`` (console/json/junit/html); returns the file written for each file format.

    ``console`` prints the summary (to ``console`` or stdout) and writes no file.
    """
    wanted = parse_formats(formats)
    run_dir = Path(run_dir)
    written: dict[str, Path] = {}
    for name in wanted:
        if name == "console":
            continue
        if not written:
            run_dir.mkdir(parents=True, exist_ok=True)
        filename, render = FILE_RENDERERS[name]
        path = run_dir / filename
        streamed = STREAMED_RENDERERS.get(name)
        write_atomic(path, streamed(report) if streamed is not None else [render(report)])
        written[name] = path
    if "console" in wanted:
        # Printed last, so the summary can point at the files just written.
        render_console(report, console, run_dir=run_dir)
    return written
