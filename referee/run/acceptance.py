"""``AcceptancePolicy``: a release decision over a finished report (multivon-eval's gate).

A policy names the checks that must hold (``CheckRequirement``: a criterion, its minimum pass
rate, measured-case count and coverage, or ``critical``), the tag slices where they must hold
too (``SliceRequirement``), and how much evidence is enough (cases, source groups, error rate).
``policy.evaluate(report)`` answers ``accept``, ``reject`` (a quality failure was observed) or
``indeterminate`` (the evidence is short of the contract), with every finding and measurement.

Over referee's report a case's attempts are its trials: the final result (of each run, for a
case run several times with ``runs=N``), and, under a ``JudgeRetry`` policy, each earlier
attempt that ended in an error (it measured nothing). With
``trial_scope="all_attempts"`` (the default) such a case is not fully measured, so a retry that
recovered cannot hide an outage; ``"final_attempt"`` counts only the final result.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from referee.case import canonical_json
from referee.errors import EvalGateFailure
from referee.record import CaseResult, EvalReport

__all__ = ["AcceptanceFinding", "AcceptancePolicy", "AcceptanceResult", "CheckRequirement",
           "SliceRequirement"]

POLICY_SCHEMA = "multivon.policy/v1"
RESULT_SCHEMA = "multivon.acceptance/v1"
Decision = Literal["accept", "reject", "indeterminate"]


def _fraction(owner: str, name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or not 0 <= value <= 1:
        raise ValueError(f"{owner}.{name} must be a number between 0 and 1, got {value!r}")


def _count(owner: str, name: str, value: Any, minimum: int = 1) -> None:
    if type(value) is not int or value < minimum:
        raise ValueError(f"{owner}.{name} must be an integer >= {minimum}, got {value!r}")


@dataclass(frozen=True)
class CheckRequirement:
    """One criterion (by name) that must pass on ``min_pass_rate`` of the measured cases.

    A case counts as measured when the criterion scored it on every selected attempt; it passes
    when every such verdict passed. ``critical`` rejects on any observed failure."""

    evaluator: str
    min_pass_rate: float = 1.0
    min_cases: int = 1
    min_coverage: float = 1.0
    critical: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.evaluator, str) or not self.evaluator.strip():
            raise ValueError("CheckRequirement.evaluator must name a criterion")
        _fraction("CheckRequirement", "min_pass_rate", self.min_pass_rate)
        _fraction("CheckRequirement", "min_coverage", self.min_coverage)
        _count("CheckRequirement", "min_cases", self.min_cases)
        if type(self.critical) is not bool:
            raise ValueError(f"CheckRequirement.critical must be True or False, got {self.critical!r}")


@dataclass(frozen=True)
class SliceRequirement:
    """The cases tagged ``tag``: at least ``min_cases`` of them, and every check holds there too
    (with the stricter of the two rates and coverages)."""

    tag: str
    min_cases: int = 1
    min_pass_rate: float = 1.0
    min_coverage: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.tag, str) or not self.tag.strip():
            raise ValueError("SliceRequirement.tag must be a non-empty tag")
        _count("SliceRequirement", "min_cases", self.min_cases)
        _fraction("SliceRequirement", "min_pass_rate", self.min_pass_rate)
        _fraction("SliceRequirement", "min_coverage", self.min_coverage)


@dataclass(frozen=True)
class AcceptanceFinding:
    kind: Literal["quality", "evidence"]
    code: str
    scope: str
    message: str


@dataclass(frozen=True)
class AcceptanceResult:
    decision: Decision
    policy_digest: str
    findings: tuple[AcceptanceFinding, ...]
    measurements: tuple[dict[str, Any], ...]

    @property
    def exit_code(self) -> int:
        """0 accept, 1 reject, 2 indeterminate: a CI step can exit with it."""
        return {"accept": 0, "reject": 1, "indeterminate": 2}[self.decision]

    def to_dict(self) -> dict[str, Any]:
        return {"schema": RESULT_SCHEMA, "decision": self.decision, "exit_code": self.exit_code,
                "policy_digest": self.policy_digest,
                "findings": [asdict(f) for f in self.findings],
                "measurements": [dict(m) for m in self.measurements]}

    def assert_accepted(self) -> None:
        """Raise ``EvalGateFailure`` (with ``code`` and ``acceptance``) unless accepted."""
        if self.decision == "accept":
            return
        failure = EvalGateFailure(f"Acceptance {self.decision}: "
                                  + "; ".join(f.message for f in self.findings))
        failure.code = self.exit_code  # type: ignore[attr-defined]
        failure.acceptance = self  # type: ignore[attr-defined]
        raise failure


@dataclass(frozen=True)
class AcceptancePolicy:
    """A release contract decided from a report; not a statistical test.

    ``min_source_groups`` counts distinct ``source_id``s (``EvalCase(source_id=...)``), so
    variants of one source are not independent evidence; ``max_error_rate`` bounds the
    fraction of cases with an errored attempt. ``require_identity`` asks for unique case ids;
    ``require_trials`` for a recorded result on every case.
    """

    checks: tuple[CheckRequirement, ...]
    slices: tuple[SliceRequirement, ...] = ()
    min_cases: int = 1
    min_source_groups: int = 0
    max_error_rate: float = 0.0
    trial_scope: Literal["all_attempts", "final_attempt"] = "all_attempts"
    require_trials: bool = True
    require_identity: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "checks", tuple(self.checks))
        object.__setattr__(self, "slices", tuple(self.slices))
        if not self.checks or not all(isinstance(c, CheckRequirement) for c in self.checks):
            raise ValueError("AcceptancePolicy.checks needs at least one CheckRequirement")
        if not all(isinstance(s, SliceRequirement) for s in self.slices):
            raise ValueError("AcceptancePolicy.slices must hold SliceRequirement values")
        if len({c.evaluator for c in self.checks}) != len(self.checks):
            raise ValueError("AcceptancePolicy.checks: duplicate check requirement")
        if len({s.tag for s in self.slices}) != len(self.slices):
            raise ValueError("AcceptancePolicy.slices: duplicate slice requirement")
        _count("AcceptancePolicy", "min_cases", self.min_cases)
        _count("AcceptancePolicy", "min_source_groups", self.min_source_groups, 0)
        _fraction("AcceptancePolicy", "max_error_rate", self.max_error_rate)
        if self.trial_scope not in ("all_attempts", "final_attempt"):
            raise ValueError("AcceptancePolicy.trial_scope must be 'all_attempts' or "
                             f"'final_attempt', got {self.trial_scope!r}")
        for name in ("require_trials", "require_identity"):
            if type(getattr(self, name)) is not bool:
                raise ValueError(f"AcceptancePolicy.{name} must be True or False")

    # The contract as data -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"schema": POLICY_SCHEMA, **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AcceptancePolicy:
        values = dict(data)
        schema = values.pop("schema", None)
        if schema != POLICY_SCHEMA:
            raise ValueError(f"acceptance policy: field 'schema' is {schema!r}; "
                             f"expected {POLICY_SCHEMA!r}")
        values["checks"] = tuple(CheckRequirement(**c) for c in values.get("checks") or ())
        values["slices"] = tuple(SliceRequirement(**s) for s in values.get("slices") or ())
        return cls(**values)

    @property
    def digest(self) -> str:
        """SHA-256 of the contract's canonical JSON: it changes whenever a rule does."""
        return hashlib.sha256(canonical_json(self.to_dict()).encode()).hexdigest()

    # The decision --------------------------------------------------------------------------
    def evaluate(self, report: EvalReport) -> AcceptanceResult:
        rows = list(report.case_results)
        findings: list[AcceptanceFinding] = []
        measurements: list[dict[str, Any]] = []

        def evidence(code: str, message: str, scope: str = "all") -> None:
            findings.append(AcceptanceFinding("evidence", code, scope, message))

        if len(rows) < self.min_cases:
            evidence("insufficient_cases", f"need {self.min_cases} cases; observed {len(rows)}")
        if self.require_identity:
            if any(not row.eval_id for row in rows):
                evidence("missing_identity", "some cases have no case id")
            if any(n > 1 for n in Counter(row.eval_id for row in rows if row.eval_id).values()):
                evidence("duplicate_identity",
                         "duplicate case ids cannot supply independent case counts")
        if self.require_trials and any(row.case is None and row.execution is None for row in rows):
            evidence("missing_trials", "some cases have no recorded result")

        trials = {id(row): self._trials(row) for row in rows}
        errored = sum(any(t.errored for t in trials[id(row)]) for row in rows)
        error_rate = errored / len(rows) if rows else None
        measurements.append({"scope": "all", "metric": "case_error_rate", "cases": len(rows),
                             "errored_cases": errored, "value": error_rate})
        if error_rate is not None and error_rate > self.max_error_rate:
            evidence("error_budget", f"case error rate {error_rate:.3f} exceeds "
                                     f"{self.max_error_rate:.3f}")
        if self.min_source_groups:
            self._source_groups(rows, evidence, measurements)

        scopes: list[tuple[str, list[CaseResult], SliceRequirement | None]] = [("all", rows, None)]
        scopes += [(f"tag:{s.tag}", [r for r in rows if r.case is not None and s.tag in r.case.tags],
                    s) for s in self.slices]
        for scope, members, rule in scopes:
            if rule is not None and len(members) < rule.min_cases:
                evidence("insufficient_slice",
                         f"{scope}: need {rule.min_cases} cases; observed {len(members)}", scope)
            for check in self.checks:
                findings.extend(self._check(scope, members, rule, check, trials, measurements))
        decision: Decision = ("reject" if any(f.kind == "quality" for f in findings)
                              else "indeterminate" if findings else "accept")
        return AcceptanceResult(decision, self.digest, tuple(findings), tuple(measurements))

    def _trials(self, row: CaseResult) -> list[_Attempt]:
        # A case run several times (runs=N) has a final attempt per run.
        runs = row.run_results or [row]
        if self.trial_scope == "final_attempt":
            return [_Attempt.of(run) for run in runs]
        return [attempt for run in runs
                for attempt in [*(_Attempt(verdicts={}, errored=True) for _ in run.retry_errors),
                                _Attempt.of(run)]]

    def _source_groups(self, rows: Sequence[CaseResult], evidence: Any,
                       measurements: list[dict[str, Any]]) -> None:
        sources = {row.case.source_id for row in rows if row.case is not None}
        if None in sources or any(row.case is None for row in rows):
            evidence("missing_source_groups", "some cases have no source_id")
        count = len(sources - {None})
        if count < self.min_source_groups:
            evidence("insufficient_source_groups",
                     f"need {self.min_source_groups} source groups; observed {count}")
        measurements.append({"scope": "all", "metric": "source_groups", "value": count})

    @staticmethod
    def _check(scope: str, members: Sequence[CaseResult], rule: SliceRequirement | None,
               check: CheckRequirement, trials: dict[int, list[_Attempt]],
               measurements: list[dict[str, Any]]) -> list[AcceptanceFinding]:
        complete = passed = 0
        critical_failure = False
        for row in members:
            verdicts = [attempt.verdicts.get(check.evaluator) for attempt in trials[id(row)]]
            critical_failure |= check.critical and any(v is False for v in verdicts)
            if verdicts and all(v is not None for v in verdicts):
                complete += 1
                passed += all(verdicts)
        coverage = complete / len(members) if members else 0.0
        pass_rate = passed / complete if complete else None
        min_cases = max(check.min_cases, rule.min_cases if rule else 1)
        min_coverage = max(check.min_coverage, rule.min_coverage if rule else 0.0)
        min_rate = max(check.min_pass_rate, rule.min_pass_rate if rule else 0.0)
        measurements.append({"scope": scope, "metric": check.evaluator, "cases": len(members),
                             "measured_cases": complete, "passed_cases": passed,
                             "coverage": coverage, "pass_rate": pass_rate})
        where = f"{scope}/{check.evaluator}"
        out: list[AcceptanceFinding] = []
        if complete < min_cases:
            out.append(AcceptanceFinding("evidence", "insufficient_measurements", scope,
                                         f"{where}: need {min_cases} measured cases; "
                                         f"observed {complete}"))
        if coverage < min_coverage:
            out.append(AcceptanceFinding("evidence", "check_coverage", scope,
                                         f"{where}: coverage {coverage:.3f} below "
                                         f"{min_coverage:.3f}"))
        if critical_failure:
            out.append(AcceptanceFinding("quality", "critical_failure", scope,
                                         f"{where}: critical check failed"))
        elif pass_rate is not None and pass_rate < min_rate:
            out.append(AcceptanceFinding("quality", "quality_threshold", scope,
                                         f"{where}: pass rate {pass_rate:.3f} below "
                                         f"{min_rate:.3f}"))
        return out


@dataclass(frozen=True)
class _Attempt:
    """One attempt of a case: each criterion's verdict (None when it did not measure), and
    whether the attempt errored."""

    verdicts: dict[str, bool | None]
    errored: bool

    @classmethod
    def of(cls, row: CaseResult) -> _Attempt:
        # Namesakes are labelled apart (``contains``, ``contains#2``), so each name is one result.
        ran = row.model_error is None
        verdicts: dict[str, bool | None] = {
            r.criterion: r.passed if ran and r.is_scored else None
            for r in row.criterion_results}
        errored = row.model_error is not None or any(r.is_error for r in row.criterion_results)
        return cls(verdicts=verdicts, errored=errored)
