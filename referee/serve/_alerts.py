"""Alerts: a criterion's pass rate over the current window below its gate.

``--alert CRITERION=RATE`` (the criterion's label, as reports show it) fires once per window
and criterion when, with at least ``min_cases`` of its verdicts in the window, passed / (passed +
failed) falls below RATE. A firing is printed, counted in /metrics, posted as JSON to the
``--webhook`` URL if given, and with ``--exit-on-alert`` stops the receiver (exit code 1).
Skips and errors are no verdict, as in every pass rate.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from referee.errors import InputError
from referee.record import CaseResult


@dataclass(frozen=True)
class AlertRule:
    criterion: str
    min_pass_rate: float

    @classmethod
    def parse(cls, text: str) -> AlertRule:
        criterion, eq, rate_text = text.rpartition("=")
        try:
            rate = float(rate_text)
        except ValueError:
            rate = -1.0
        if not eq or not criterion or not 0.0 <= rate <= 1.0:
            raise InputError(f"alert {text!r}", source="--alert",
                             expected="CRITERION=RATE with RATE from 0 to 1, e.g. "
                                      "faithfulness=0.9")
        return cls(criterion, rate)


@dataclass(frozen=True)
class Alert:
    criterion: str
    pass_rate: float
    min_pass_rate: float
    verdicts: int
    window: str

    def describe(self) -> str:
        return (f"{self.criterion} pass rate {self.pass_rate:.1%} over {self.verdicts} verdicts "
                f"in {self.window} is below its gate {self.min_pass_rate:.1%}")

    def payload(self) -> dict[str, Any]:
        return {"alert": "pass_rate_below_gate", "criterion": self.criterion,
                "pass_rate": self.pass_rate, "gate": self.min_pass_rate,
                "verdicts": self.verdicts, "window_run": self.window,
                "message": self.describe()}


class WindowGates:
    """Verdict counts per criterion over one window, checked against the rules."""

    def __init__(self, rules: Sequence[AlertRule], min_cases: int) -> None:
        self.rules = list(rules)
        self.min_cases = min_cases
        self.window = ""
        self.counts: Counter[tuple[str, bool]] = Counter()
        self.fired: set[str] = set()

    def start(self, window: str) -> None:
        """A new window (a reopened one then counts the cases it holds already)."""
        self.window, self.counts, self.fired = window, Counter(), set()

    def count(self, case: CaseResult) -> None:
        for result in case.criterion_results:
            if not result.skipped and result.error is None and result.error_kind is None:
                self.counts[(result.criterion, result.passed)] += 1

    def observe(self, case: CaseResult) -> list[Alert]:
        """Count a stored case; the alerts it sets off (each at most once per window)."""
        self.count(case)
        alerts = []
        for rule in self.rules:
            passed = self.counts[(rule.criterion, True)]
            verdicts = passed + self.counts[(rule.criterion, False)]
            if rule.criterion in self.fired or verdicts < self.min_cases:
                continue
            if passed / verdicts < rule.min_pass_rate:
                self.fired.add(rule.criterion)
                alerts.append(Alert(rule.criterion, passed / verdicts, rule.min_pass_rate,
                                    verdicts, self.window))
        return alerts
