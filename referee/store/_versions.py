"""The scorings of one run: each ``--rescore`` or ``--retry-errors`` of a finished run keeps the
scoring it replaces, so earlier verdicts can still be viewed and compared.

A run directory holds its current scoring at the top, as it always has; an earlier one is a
whole run directory of its own under ``versions/<n>/`` (meta.json, cases.jsonl, report.json and
whatever reports were rendered), so every reader of runs reads it unchanged. Scorings are
numbered from 1, the run as first scored; meta.json's ``version`` is the number of the top-level
one (absent in runs stored before versions, which are scoring 1).

``RUN_DIR@N`` names scoring N of a run wherever a run is read (``referee view``, ``compare``,
``load_run``); ``RUN_DIR`` alone is the current one. Like Inspect AI's eval logs, which
``inspect score`` adds to rather than overwrites, and promptfoo's eval history.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from referee.errors import InputError

VERSIONS_DIR = "versions"
VERSION_KEY = "version"
_REF = re.compile(r"^(?P<run>.+)@(?P<version>\d+)$")


def version_number(meta: dict[str, Any]) -> int:
    """The number of the scoring a meta.json describes (1 before a first re-score)."""
    value = meta.get(VERSION_KEY)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else 1


def earlier_versions(run_dir: Path) -> list[int]:
    """The numbers of the earlier scorings kept under ``versions/``, oldest first."""
    base = Path(run_dir) / VERSIONS_DIR
    if not base.is_dir():
        return []
    return sorted(int(child.name) for child in base.iterdir()
                  if child.name.isdigit() and child.is_dir())


def split_ref(target: str | Path) -> tuple[Path, int | None]:
    """``RUN_DIR@N`` as (RUN_DIR, N); anything else (an existing path included) as (path, None)."""
    path = Path(target)
    if path.exists():
        return path, None
    match = _REF.match(str(target))
    if match is None:
        return path, None
    return Path(match["run"]), int(match["version"])


def version_dir(run_dir: Path, version: int, current: int) -> Path:
    """Where scoring ``version`` of the run in ``run_dir`` lies; a one-line error naming the
    scorings there are when it has no such scoring."""
    if version == current:
        return run_dir
    found = run_dir / VERSIONS_DIR / str(version)
    if version in earlier_versions(run_dir):
        return found
    kept = [*earlier_versions(run_dir), current]
    raise InputError(f"the run has no scoring {version}", source=f"{run_dir}@{version}",
                     expected="one of " + ", ".join(f"@{n}" for n in kept))


def describe(run_dir: Path, current: int) -> dict[str, Any]:
    """What a report's metadata says about its scorings; empty for a run scored once."""
    versions = [*earlier_versions(run_dir), current]
    if len(versions) < 2:
        return {}
    return {"version": current, "versions": versions}
