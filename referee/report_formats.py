"""Which reports a run writes when it names none: one rule for the CLI and for Python.

A leaf module, so that the CLI can show the default in its help without importing the
renderers."""

from __future__ import annotations

# The console summary, then the files written beside a stored run (results.json, junit.xml and
# the self-contained report.html).
DEFAULT_FORMATS = ("console", "json", "junit", "html")


def default_formats(*, verbose: bool, stored: bool) -> tuple[str, ...]:
    """DEFAULT_FORMATS, less the console when the run is not verbose and the files when it is
    not stored."""
    return tuple(name for name in DEFAULT_FORMATS if (verbose if name == "console" else stored))
