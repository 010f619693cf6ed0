"""Exceptions that are part of referee's public surface."""

from __future__ import annotations

import re
import sys
import traceback
from pathlib import Path
from types import TracebackType
from typing import Any


class RefereeError(Exception):
    """Base class for referee's own errors."""


class JudgeUnavailable(RefereeError):
    """A judge could not give a verdict: unreachable, out of retries, or every reply unparseable.

    Runners record the case as ``JUDGE_ERROR``: a judge outage is not a quality verdict.
    """

    def __init__(self, message: str, *, provider: str | None = None, model: str | None = None,
                 cause: BaseException | None = None, token_usage: Any = None,
                 details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.provider = provider
        self.model = model
        self.cause = cause
        # A reply that was paid for but yielded no verdict: its TokenUsage still counts, and
        # ``details`` keeps the evidence (a redacted excerpt of the raw reply).
        self.token_usage = token_usage
        self.details = dict(details or {})


class EvalGateFailure(RefereeError):
    """A CI gate (``fail_threshold`` or ``max_error_rate``) rejected the run.

    multivon's ``EvalGateFailure(message, pass_rate=None, threshold=None)`` is accepted too:
    ``threshold`` is the bound the gate checked, ``pass_rate`` the value it saw (by default the
    report's pass rate). A report given in second place is read as ``report``.
    """

    def __init__(self, message: str, pass_rate: float | object | None = None,
                 threshold: float | None = None, *, report: object | None = None) -> None:
        super().__init__(message)
        if pass_rate is not None and not isinstance(pass_rate, (int, float)):
            report, pass_rate = pass_rate, None  # referee's EvalGateFailure(message, report)
        self.report = report
        self.threshold = threshold
        self._pass_rate = pass_rate

    @property
    def pass_rate(self) -> float | None:
        if self._pass_rate is not None:
            return float(self._pass_rate)  # type: ignore[arg-type]
        return getattr(self.report, "pass_rate", None)

    @property
    def error_rate(self) -> float | None:
        return getattr(self.report, "error_rate", None)


class InputError(RefereeError, ValueError):
    """Bad user input: names the source (file, line or field) and what was expected."""

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None,
                 field: str | None = None, expected: str | None = None) -> None:
        parts = []
        where = source or ""
        if line is not None:
            where = f"{where}:{line}" if where else f"line {line}"
        if where:
            parts.append(where)
        if field:
            parts.append(f"field '{field}'")
        prefix = ": ".join(parts)
        text = f"{prefix}: {message}" if prefix else message
        if expected:
            text = f"{text} (expected {expected})"
        super().__init__(text)
        self.source = source
        self.line = line
        self.field = field
        self.expected = expected


def beyond_python_limits(exc: ValueError | RecursionError, *, source: str, text: str,
                         line: int | None = None) -> InputError:
    """The error for a JSON or YAML file that parses but whose values Python cannot build: an
    integer longer than ``sys.get_int_max_str_digits()``, nesting past the recursion limit
    (which a YAML alias that contains itself reaches too), a YAML date such as 2024-13-45.
    ``line``, when not given, is that of the first over-long number in ``text``."""
    if isinstance(exc, RecursionError):
        return InputError("nested too deeply to read (or a YAML alias contains itself)",
                          source=source, line=line, expected="at most a few hundred levels")
    limit = getattr(sys, "get_int_max_str_digits", lambda: 0)()  # Python 3.10.7+
    long_number = re.search(rf"\d{{{limit + 1},}}", text) if limit else None
    if long_number is None:
        return InputError(f"a value cannot be read: {exc}", source=source, line=line)
    if line is None:
        line = text.count("\n", 0, long_number.start()) + 1
    return InputError(f"a number longer than {limit} digits", source=source, line=line,
                      expected="a shorter number, or the digits as a string")


def describe_exception(exc: BaseException) -> str:
    """``"TypeName: message"`` for any exception, even one whose ``__str__`` itself raises.

    The text of a user's exception is shown to users and stored; formatting it must never
    become a second failure that hides the first.
    """
    name = type(exc).__name__
    for render in (str, repr):
        try:
            text = render(exc)
        except Exception:
            continue
        if isinstance(text, str):
            return f"{name}: {text}" if text else name
    return f"{name}: <message unavailable: its __str__ and __repr__ raised>"


# A stored traceback keeps the innermost frames (where the fault is) and at most this much text:
# a recursion error's thousand frames would otherwise be repeated on every failing case.
TRACEBACK_FRAMES = 30
TRACEBACK_CHARS = 8_000
_REFEREE_ROOT = str(Path(__file__).resolve().parent)


def format_traceback(exc: BaseException) -> str | None:
    """The traceback of a user's exception, as a case keeps it: redacted (``referee.redact``),
    then bounded; referee's own outer frames (the engine calling the model) left out. None when
    no frame is outside referee (referee's own check of what the model returned, say)."""
    from referee.redact import redact

    frames = _user_frames(exc.__traceback__)
    if frames is None:
        return None
    try:
        text = "".join(traceback.format_exception(type(exc), exc, frames,
                                                  limit=-TRACEBACK_FRAMES))
    except Exception:  # a traceback that cannot be formatted must not hide the error itself
        return describe_exception(exc)
    text = redact(text)
    if len(text) <= TRACEBACK_CHARS:
        return text
    # The start names the first frames, the end where and what was raised; a huge message or
    # a long chain in between is what goes (the case's error keeps the message).
    head = TRACEBACK_CHARS // 4
    cut = len(text) - TRACEBACK_CHARS
    return f"{text[:head]}\n… ({cut:,} characters cut) …\n{text[-(TRACEBACK_CHARS - head):]}"


def _user_frames(tb: TracebackType | None) -> TracebackType | None:
    """From the first frame outside referee inward (None when there is none)."""
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(_REFEREE_ROOT):
        tb = tb.tb_next
    return tb


# multivon's exception hierarchy, over referee's. ``except MultivonError`` catches every referee
# error; the classes below carry multivon's constructor arguments and attributes.
MultivonError = RefereeError


class CalibrationMissing(RefereeError):
    """A strict caller asked for a calibrated threshold that the table has no row for
    (``calibrated_threshold(..., strict=True)``)."""

    def __init__(self, evaluator: str, judge_model: str) -> None:
        super().__init__(f"no calibration row for evaluator={evaluator!r}, "
                         f"judge_model={judge_model!r}")
        self.evaluator = evaluator
        self.judge_model = judge_model


class EvaluatorPrereqMissing(RefereeError):
    """A case lacks a field an evaluator needs. referee's own evaluators report such a case as
    skipped, naming the field; custom evaluators may raise this to say the same."""

    def __init__(self, evaluator: str, missing: str) -> None:
        super().__init__(f"{evaluator!r} requires case.{missing}, but it was not provided.")
        self.evaluator = evaluator
        self.missing = missing


class CacheError(RefereeError):
    """The judge reply cache cannot be used. referee's own cache warns once and carries on
    with live calls; a custom cache may raise this."""


class SecretsError(RefereeError):
    """A required secret (an API key) could not be found."""

    def __init__(self, key: str, resolver: str = "") -> None:
        super().__init__(f"Secret {key!r} not found" + (f" via {resolver}" if resolver else ""))
        self.key = key
        self.resolver = resolver


class ComplianceError(RefereeError):
    """multivon's compliance-reporting error; referee has no compliance reporter and never
    raises it, and keeps the name so that ``except`` clauses written for multivon still import."""
