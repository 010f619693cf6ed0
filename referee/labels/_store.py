"""labels.jsonl: an append-only log of people's verdicts, one JSON object a line, beside the
run's own files (never inside cases.jsonl, which a resume or re-score rewrites).

A label names the case id, the criterion and the scoring (``versions/<n>``) it was made on,
with who made it and when. Reading keeps the latest line per (case, criterion): a correction is
a new line, never an edit. A torn last line (a write cut off by a kill) is left out and cut off
before the next append, as the run store does with cases.jsonl; damage anywhere else is a
one-line error naming the file and the line.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from referee.errors import InputError
from referee.store import LABELS_FILE

MAX_COMMENT_CHARS = 4000


class Label(BaseModel):
    """One person's verdict on one criterion result of one case."""

    model_config = ConfigDict(extra="forbid")

    case_id: str = Field(min_length=1)
    criterion: str = Field(min_length=1)
    scoring: int = Field(ge=1)
    # "right"/"wrong": the judge's verdict as a person sees it; "pass"/"fail": the person's own.
    verdict: Literal["right", "wrong"] | None = None
    human: Literal["pass", "fail"] | None = None
    # The person's own score on the criterion's 0..1 scale, for corrected means of scores
    # (referee labels estimate); optional beside the verdict.
    human_score: float | None = Field(default=None, ge=0.0, le=1.0)
    comment: str = Field(default="", max_length=MAX_COMMENT_CHARS)
    judge_passed: bool | None = None  # what the judge said when the label was made
    judge_score: float | None = None
    labeller: str = Field(min_length=1)
    at: float  # seconds since the epoch

    @property
    def human_passed(self) -> bool | None:
        """The person's pass/fail: given outright, or read from right/wrong and the judge's
        verdict at the time; None for a comment alone."""
        if self.human is not None:
            return self.human == "pass"
        if self.verdict is None or self.judge_passed is None:
            return None
        return self.judge_passed if self.verdict == "right" else not self.judge_passed


class LabelStore:
    """The labels of the run in ``run_dir``."""

    _locks: dict[Path, threading.Lock] = {}
    _locks_guard = threading.Lock()

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LABELS_FILE
        with self._locks_guard:
            self._lock = self._locks.setdefault(self.path.resolve(), threading.Lock())

    def append(self, label: Label) -> Label:
        """Add ``label`` as one whole line (a torn tail left by a kill is cut off first)."""
        line = (label.model_dump_json() + "\n").encode("utf-8")
        with self._lock:
            self._cut_torn_tail()
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)
        return label

    def _cut_torn_tail(self) -> None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        if data and not data.endswith(b"\n"):
            with open(self.path, "r+b") as handle:
                handle.truncate(data.rfind(b"\n") + 1)

    def all(self) -> list[Label]:
        """Every label in the order made."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise InputError(f"cannot read file: {exc.strerror}", source=str(self.path)) from None
        lines = data.split(b"\n")
        labels = []
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            torn = number == len(lines)  # no newline after it: the write never finished
            try:
                labels.append(Label.model_validate_json(raw))
            except ValidationError as exc:
                if torn:
                    continue
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or None
                problem = "invalid JSON" if first["type"] == "json_invalid" else first["msg"]
                raise InputError(problem, source=str(self.path), line=number, field=where,
                                 expected="one label object per line (referee labels)") from None
        return labels

    def latest(self) -> dict[tuple[str, str], Label]:
        """The label in force per (case id, criterion): the one made last."""
        found: dict[tuple[str, str], Label] = {}
        for label in self.all():
            found[(label.case_id, label.criterion)] = label
        return found


def now() -> float:
    return time.time()


def default_labeller() -> str:
    """The OS user's name, for labels made without ``--labeller``."""
    import getpass

    try:
        return getpass.getuser() or "unknown"
    except Exception:  # no user name in the environment nor in the password database
        return "unknown"
