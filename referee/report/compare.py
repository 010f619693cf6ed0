"""Compare two runs case by case (matched by ``eval_id``) and name what got worse.

A case regressed when it passed in A and does not pass in B (failed, errored, timed out or
was skipped), or when any criterion that passed in A scores below its threshold in B. It
improved when the reverse holds and nothing regressed. A case whose outcome moved between
"failed" and an error status is neither: its quality is unknown on one side, and the
transition is reported as a note.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

# The shared statistics live in the record; their names stay importable from here.
from referee.record import BOOTSTRAP_RESAMPLES as BOOTSTRAP_RESAMPLES
from referee.record import BOOTSTRAP_SEED as BOOTSTRAP_SEED
from referee.record import CaseResult, CaseStatus, EvalReport, format_rate
from referee.record import wilson_bounds as wilson_bounds
from referee.report.compare_stats import (
    ALPHA,
    VerdictShift,
    criterion_deltas,
    overall_delta,
    verdict_shifts,
)
from referee.report.compare_stats import CriterionDelta as CriterionDelta
from referee.result import CriterionResult

ChangeKind = Literal["regression", "improvement", "unchanged", "added", "removed"]


@dataclass(frozen=True)
class CriterionChange:
    criterion: str
    score_a: float | None
    score_b: float | None
    threshold: float
    passed_a: bool | None
    passed_b: bool | None

    def describe(self) -> str:
        def fmt(score: float | None, passed: bool | None) -> str:
            if score is None:
                return "not scored"
            return f"{score:.3f} ({'pass' if passed else 'fail'})"

        return (f"{self.criterion}: {fmt(self.score_a, self.passed_a)} -> "
                f"{fmt(self.score_b, self.passed_b)}, threshold {self.threshold:.3f}")


@dataclass(frozen=True)
class CaseChange:
    eval_id: str
    name: str
    kind: ChangeKind
    status_a: CaseStatus | None
    status_b: CaseStatus | None
    reasons: tuple[str, ...] = ()
    criteria: tuple[CriterionChange, ...] = ()
    output_a: str | None = None
    output_b: str | None = None
    index_a: int | None = None
    index_b: int | None = None

    @property
    def output_changed(self) -> bool:
        return (self.output_a is not None and self.output_b is not None
                and self.output_a != self.output_b)

    @property
    def transition(self) -> str:
        a = self.status_a.value if self.status_a else "absent"
        b = self.status_b.value if self.status_b else "absent"
        return f"{a} -> {b}"


@dataclass
class Comparison:
    a: EvalReport
    b: EvalReport
    changes: list[CaseChange] = field(default_factory=list)
    criterion_deltas: list[CriterionDelta] = field(default_factory=list)
    verdict_shifts: list[VerdictShift] = field(default_factory=list)
    # The mean case score over the cases both runs passed or failed (None without such cases).
    overall_scores: CriterionDelta | None = None

    def _of(self, kind: ChangeKind) -> list[CaseChange]:
        return [c for c in self.changes if c.kind == kind]

    @property
    def regressions(self) -> list[CaseChange]:
        return self._of("regression")

    @property
    def improvements(self) -> list[CaseChange]:
        return self._of("improvement")

    @property
    def unchanged(self) -> list[CaseChange]:
        return self._of("unchanged")

    @property
    def added(self) -> list[CaseChange]:
        return self._of("added")

    @property
    def removed(self) -> list[CaseChange]:
        return self._of("removed")

    @property
    def has_regressions(self) -> bool:
        return any(c.kind == "regression" for c in self.changes)

    @property
    def candidate_unfinished(self) -> bool:
        """B is an interrupted run: its missing cases were never scored, so no verdict on them."""
        return bool(self.b.metadata.get("interrupted"))

    @property
    def acceptable(self) -> bool:
        """What CI gates on: no regression, and a candidate that ran every case."""
        return not self.has_regressions and not self.candidate_unfinished

    def to_dict(self) -> dict[str, Any]:
        def run(r: EvalReport) -> dict[str, Any]:
            return {"run_id": r.run_id, "name": r.name, "model_id": r.model_id,
                    "total": r.total, "evaluated": r.evaluated, "passed": r.passed,
                    "failed": r.failed, "errors": r.errors, "pass_rate": r.pass_rate,
                    "error_rate": r.error_rate}

        return {
            "a": run(self.a), "b": run(self.b), "has_regressions": self.has_regressions,
            "candidate_unfinished": self.candidate_unfinished,
            "criteria": [d.to_dict() for d in self.criterion_deltas],
            "verdicts": [s.to_dict() for s in self.verdict_shifts],
            "overall_scores": None if self.overall_scores is None else self.overall_scores.to_dict(),
            "alpha": ALPHA,
            "changes": [
                {"eval_id": c.eval_id, "name": c.name, "kind": c.kind,
                 "status_a": c.status_a.value if c.status_a else None,
                 "status_b": c.status_b.value if c.status_b else None,
                 "reasons": list(c.reasons), "output_a": c.output_a, "output_b": c.output_b,
                 "output_changed": c.output_changed}
                for c in self.changes
            ],
        }

    def statements(self) -> list[str]:
        """In words, each verdict shift (per criterion, then whole cases) and score change."""
        overall = [] if self.overall_scores is None else [self.overall_scores.statement()]
        return ([s.describe() for s in self.verdict_shifts]
                + [d.statement() for d in self.criterion_deltas] + overall)

    def render_text(self) -> str:
        a, b = self.a, self.b

        def head(tag: str, r: EvalReport) -> str:
            model = f" [{r.model_id}]" if r.model_id else ""
            return (f"{tag}: {r.run_id} {r.name}".rstrip() + model + f"  pass rate "
                    f"{format_rate(r.pass_rate, r.evaluated)}, error rate "
                    f"{format_rate(r.error_rate, r.total)}, {r.total} case(s)")

        lines = [
            head("A", a),
            head("B", b),
            f"{len(self.regressions)} regression(s), {len(self.improvements)} improvement(s), "
            f"{len(self.unchanged)} unchanged, {len(self.added)} added, {len(self.removed)} removed",
        ]
        if self.candidate_unfinished:
            lines.append(f"B is unfinished: {b.total} of {b.metadata.get('expected_cases', '?')} "
                         f"case(s) ran; resume it before trusting this comparison")
        stopped = _stopped_early(b)
        if stopped:
            lines.append(f"B {stopped}; the cases it did not run show as removed and are in no "
                         "paired test (--resume RUN_DIR runs them)")
        if self.criterion_deltas:
            lines.append("Criterion means, B - A over the cases both runs scored:")
            lines.extend(f"  {d.describe()}" for d in self.criterion_deltas)
        statements = self.statements()
        if statements:
            lines.append(f"Which differences are real (paired tests, two-sided {ALPHA:.0%}, "
                         "Holm-adjusted across criteria):")
            lines.extend(f"  {s}" for s in statements)
        notes = [c for c in self.unchanged if c.reasons]
        for title, items in (("Regressions", self.regressions), ("Improvements", self.improvements),
                             ("Changed without a verdict", notes)):
            if items:
                lines.append(f"{title}:")
                for c in items:
                    lines.append(f"  {c.name or c.eval_id}  {c.transition}")
                    lines.extend(f"    {r}" for r in c.reasons)
                    if c.output_changed:
                        lines.append(f"    output A: {_one_line(c.output_a)}")
                        lines.append(f"    output B: {_one_line(c.output_b)}")
        for title, items in (("Added in B", self.added), ("Removed in B", self.removed)):
            if items:
                lines.append(f"{title}: " + ", ".join(c.name or c.eval_id for c in items))
        return "\n".join(lines) + "\n"


OUTPUT_CHARS_IN_TEXT = 160


def _stopped_early(report: EvalReport) -> str:
    """What a sequential gate that stopped the run early says (run/sequential.py), else ""."""
    sequential = report.metadata.get("sequential")
    if not isinstance(sequential, dict) or not sequential.get("not_run"):
        return ""
    return f"stopped judging early (sequential gate): {sequential.get('summary', '')}"


def _one_line(text: str | None) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= OUTPUT_CHARS_IN_TEXT else flat[: OUTPUT_CHARS_IN_TEXT - 1] + "…"


def _output(case: CaseResult) -> str | None:
    return case.execution.actual_response if case.execution is not None else None


def _scored(r: CriterionResult | None) -> bool:
    return r is not None and r.is_scored


def _labelled(case: CaseResult) -> dict[str, CriterionResult]:
    """Results by their unique label (two namesake criteria are ``x`` and ``x#2``)."""
    return {r.criterion: r for r in case.criterion_results}


def _criterion_changes(a: CaseResult, b: CaseResult) -> list[CriterionChange]:
    by_b = _labelled(b)
    changes = []
    for label, ra in _labelled(a).items():
        rb = by_b.get(label)
        if not _scored(ra) and not _scored(rb):
            continue
        changes.append(CriterionChange(
            criterion=label,
            score_a=ra.score if _scored(ra) else None,
            score_b=rb.score if rb is not None and _scored(rb) else None,
            threshold=rb.threshold if rb is not None else ra.threshold,
            passed_a=ra.passed if _scored(ra) else None,
            passed_b=rb.passed if rb is not None and _scored(rb) else None,
        ))
    return changes


def _classify(a: CaseResult, b: CaseResult) -> CaseChange:
    worse: list[str] = []
    better: list[str] = []
    notes: list[str] = []
    if a.status == CaseStatus.PASSED and b.status != CaseStatus.PASSED:
        detail = f": {b.error}" if b.error else ""
        worse.append(f"case {a.status.value} -> {b.status.value}{detail}")
    elif b.status == CaseStatus.PASSED and a.status != CaseStatus.PASSED:
        better.append(f"case {a.status.value} -> {b.status.value}")
    elif a.status != b.status:
        notes.append(f"case {a.status.value} -> {b.status.value}")
    changes = _criterion_changes(a, b)
    for ch in changes:
        # Only a crossing of the threshold is a verdict; noise above or below it is not.
        if ch.passed_a is True and ch.passed_b is False:
            worse.append(ch.describe())
        elif ch.passed_a is False and ch.passed_b is True:
            better.append(ch.describe())
    kind: ChangeKind = "regression" if worse else "improvement" if better else "unchanged"
    return CaseChange(
        eval_id=a.eval_id, name=b.name or a.label, kind=kind, status_a=a.status, status_b=b.status,
        reasons=tuple(worse + better + notes), criteria=tuple(changes),
        output_a=_output(a), output_b=_output(b), index_a=a.index, index_b=b.index,
    )


def _keyed(report: EvalReport) -> dict[tuple[str, int], CaseResult]:
    """Cases keyed by (eval_id, occurrence), so a duplicated id is matched in order, not lost."""
    seen: dict[str, int] = {}
    out: dict[tuple[str, int], CaseResult] = {}
    for case in report.cases:
        n = seen.get(case.eval_id, 0)
        seen[case.eval_id] = n + 1
        out[(case.eval_id, n)] = case
    return out


def compare_reports(a: EvalReport, b: EvalReport) -> Comparison:
    """Per-case differences from run ``a`` (baseline) to run ``b`` (candidate), in A's order."""
    cases_a, cases_b = _keyed(a), _keyed(b)
    changes: list[CaseChange] = []
    for key, ca in cases_a.items():
        cb = cases_b.get(key)
        if cb is None:
            changes.append(CaseChange(eval_id=ca.eval_id, name=ca.label, kind="removed",
                                      status_a=ca.status, status_b=None, output_a=_output(ca),
                                      index_a=ca.index))
        else:
            changes.append(_classify(ca, cb))
    for key, cb in cases_b.items():
        if key not in cases_a:
            changes.append(CaseChange(eval_id=cb.eval_id, name=cb.label, kind="added",
                                      status_a=None, status_b=cb.status, output_b=_output(cb),
                                      index_b=cb.index))
    scores, verdicts, cases = _paired(cases_a, cases_b)
    return Comparison(a=a, b=b, changes=changes, criterion_deltas=criterion_deltas(scores),
                      verdict_shifts=verdict_shifts(verdicts, [v for v, _ in cases]),
                      overall_scores=overall_delta([s for _, s in cases]))


_DECIDED = (CaseStatus.PASSED, CaseStatus.FAILED)


def _paired(cases_a: dict[tuple[str, int], CaseResult],
            cases_b: dict[tuple[str, int], CaseResult]) -> tuple[
        dict[str, list[tuple[float, float]]], dict[str, list[tuple[bool, bool]]],
        list[tuple[tuple[bool, bool], tuple[float, float]]]]:
    """The pairs the tests compare: per criterion, the scores and verdicts of the cases both
    runs scored on it; and the verdicts and mean scores of the cases both runs passed or failed
    (an error on either side says nothing about quality, so that case is left out)."""
    scores: dict[str, list[tuple[float, float]]] = {}
    verdicts: dict[str, list[tuple[bool, bool]]] = {}
    cases: list[tuple[tuple[bool, bool], tuple[float, float]]] = []
    for key, ca in cases_a.items():
        cb = cases_b.get(key)
        if cb is None:
            continue
        if ca.status in _DECIDED and cb.status in _DECIDED:
            cases.append(((ca.passed, cb.passed), (ca.score, cb.score)))
        by_b = _labelled(cb)
        for ra in ca.criterion_results:
            rb = by_b.get(ra.criterion)
            if _scored(ra) and rb is not None and _scored(rb):
                scores.setdefault(ra.criterion, []).append((ra.score, rb.score))
                verdicts.setdefault(ra.criterion, []).append((ra.passed, rb.passed))
    return scores, verdicts, cases
