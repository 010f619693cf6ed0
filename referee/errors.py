"""Exceptions that are part of referee's public surface."""

from __future__ import annotations


class RefereeError(Exception):
    """Base class for referee's own errors."""


class JudgeUnavailable(RefereeError):
    """A judge could not give a verdict: unreachable, out of retries, or every reply unparseable.

    Runners record the case as ``JUDGE_ERROR``: a judge outage is not a quality verdict.
    """

    def __init__(self, message: str, *, provider: str | None = None, model: str | None = None,
                 cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.provider = provider
        self.model = model
        self.cause = cause


class EvalGateFailure(RefereeError):
    """A CI gate (``fail_threshold`` or ``max_error_rate``) rejected the run."""

    def __init__(self, message: str, report: object | None = None) -> None:
        super().__init__(message)
        self.report = report

    @property
    def pass_rate(self) -> float | None:
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
