"""CompositeCriterion (AND / OR gate) and WeightedCriterion (weighted average).

Sub-criteria run concurrently. A sub-criterion that raises, or whose judge was unavailable,
taints the combined result the same way it would taint the case on its own: the runner must
still see a judge outage as JUDGE_ERROR, never as a quality score.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from referee.case import EvalCase
from referee.config import CriterionConfig
from referee.criteria.base import BaseCriterion
from referee.errors import JudgeUnavailable
from referee.execution import ExecutionResult
from referee.result import CriterionResult


def _disabled_names(criteria: Sequence[BaseCriterion]) -> list[str]:
    return [c.name for c in criteria if not c.config.enabled]


def _note_disabled(result: CriterionResult, disabled: list[str]) -> CriterionResult:
    """Disabled sub-criteria take no part in the combination; the result says which."""
    if disabled:
        result.details["disabled_sub_criteria"] = disabled
        result.details["reason"] = (str(result.details.get("reason", "")) +
                                    f" Disabled, not combined: {', '.join(disabled)}.").strip()
    return result


def _all_disabled(owner: BaseCriterion, disabled: list[str]) -> CriterionResult:
    result = owner._skipped(f"Every sub-criterion is disabled: {', '.join(disabled)}.")
    result.details["disabled_sub_criteria"] = disabled
    return result


async def _run_all(criteria: Sequence[BaseCriterion], actual: ExecutionResult,
                   expected: EvalCase) -> list[CriterionResult]:
    """Run every sub-criterion at once; an exception becomes that sub-criterion's failure.

    Callers pass the enabled sub-criteria only (``CriterionConfig(enabled=False)`` is honoured
    inside a combination too)."""
    outcomes = await asyncio.gather(*(c.evaluate(actual, expected) for c in criteria),
                                    return_exceptions=True)
    results: list[CriterionResult] = []
    for criterion, outcome in zip(criteria, outcomes):
        if isinstance(outcome, BaseException) and not isinstance(outcome, Exception):
            raise outcome  # cancellation and interrupts are not evaluation errors
        if isinstance(outcome, Exception):
            failure = criterion._failure(f"{type(outcome).__name__}: {outcome}")
            failure.error_kind = "judge" if isinstance(outcome, JudgeUnavailable) else "evaluator"
            results.append(failure)
        else:
            results.append(outcome)
    return results


def _taint(results: list[CriterionResult]) -> dict[str, Any]:
    """Result fields that carry a sub-criterion's judge outage or error up to the combination."""
    if any(r.error_kind == "judge" or r.details.get("judge_unavailable") for r in results):
        return {"error_kind": "judge"}
    if any(r.error_kind == "evaluator" for r in results):
        return {"error_kind": "evaluator"}
    return {}


def _combine(owner: BaseCriterion, score: float, details: dict[str, Any],
             results: list[CriterionResult],
             possible: tuple[float, float] | None = None) -> CriterionResult:
    """The combined result; an errored sub-criterion taints it unless it cannot matter.

    ``possible`` is the range the combined score could take whatever the errored
    sub-criteria would have scored: when even its top is below the threshold, the failure is
    known (a known failure beats an unknown, as for a case) and the errors are only noted. A
    pass is never declared over an error: the outage stays visible.
    """
    result = owner._result(score, details)
    errored = [r.criterion for r in results if r.is_error]
    if errored and possible is not None and possible[1] < owner.threshold:
        result.details["decided_despite_errors"] = errored
        result.details["reason"] = (f"{result.details.get('reason', '')} Decided whatever "
                                    f"{', '.join(errored)} would have scored (not scored: "
                                    "error).").strip()
        return result
    taint = _taint(results)
    if taint:
        errors = [f"{r.criterion}: {r.error}" for r in results if r.error]
        result.error_kind = taint["error_kind"]
        if taint["error_kind"] == "judge":
            result.details["judge_unavailable"] = True
        result.error = "; ".join(errors) or None
    return result


def _mark_if_all_skipped(result: CriterionResult, results: list[CriterionResult]) -> None:
    """Every sub-criterion skipped: the combined score stands as documented, flagged skipped."""
    if results and all(r.skipped for r in results):
        result.skipped = True
        result.details["skipped"] = True


def _skipped_note(results: list[CriterionResult]) -> str:
    skipped = [r.criterion for r in results if r.skipped]
    if not skipped:
        return ""
    return f" Skipped (their documented skip score counts): {', '.join(skipped)}."


class CompositeCriterion(BaseCriterion):
    """Runs every sub-criterion and gates on them together.

    ``require_all=True`` (AND) takes the minimum sub-score, ``False`` (OR) the maximum; the
    threshold in ``config`` applies to that combined score. ``details``: ``sub_results`` (each
    sub-result serialised) and ``require_all``. A skipped sub-criterion takes part with the score
    it reported (1.0 for a skipped LLM criterion, as 10xgraph says); if all are skipped the
    composite is flagged skipped too. No sub-criteria scores 0.0. A disabled sub-criterion
    (``enabled=False``) is left out and named in ``details["disabled_sub_criteria"]``; with
    every one disabled the composite is skipped.
    """

    name = "composite_criterion"
    description = "Combines multiple criteria"

    def __init__(self, criteria: list[BaseCriterion], require_all: bool = True,
                 config: CriterionConfig | None = None) -> None:
        super().__init__(config)
        self.criteria = list(criteria)
        self.require_all = require_all

    def validate_config(self) -> list[str]:
        errors = super().validate_config()
        for criterion in self.criteria:
            errors.extend(f"{criterion.name}: {e}" for e in criterion.validate_config())
        return errors

    async def evaluate(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        disabled = _disabled_names(self.criteria)
        active = [c for c in self.criteria if c.config.enabled]
        if disabled and not active:
            return _all_disabled(self, disabled)
        results = await _run_all(active, actual, expected)
        details: dict[str, Any] = {
            # Plain dumps: a value JSON cannot hold gets its stand-in when the case is stored.
            "sub_results": [r.model_dump() for r in results],
            "require_all": self.require_all,
        }
        gate = "AND (minimum)" if self.require_all else "OR (maximum)"
        if not results:
            return self._result(0.0, {**details, "reason": "No sub-criteria to combine."})
        pick = min if self.require_all else max
        known = [r for r in results if not r.is_error]
        possible = None
        if known and len(known) < len(results):
            bound = pick(r.score for r in known)
            # AND can only go lower than the known minimum, OR only higher than the known maximum.
            possible = (0.0, bound) if self.require_all else (bound, 1.0)
        deciding = pick(known if possible is not None else results, key=lambda r: r.score)
        details["reason"] = (f"{gate} of {len(results)} sub-criteria: {deciding.score:.3f} "
                             f"from {deciding.criterion}." + _skipped_note(results))
        result = _combine(self, deciding.score, details, results, possible)
        _mark_if_all_skipped(result, results)
        return _note_disabled(result, disabled)


class WeightedCriterion(BaseCriterion):
    """Weighted average of sub-scores: ``sum(score * weight) / sum(weight)``.

    Weights need not sum to 1 but must not be negative. An empty ``criteria_weights`` or a total
    weight of 0 scores 0.0. A skipped sub-criterion counts with the score it reported; if all
    are skipped the weighted criterion is flagged skipped too. A disabled sub-criterion is left
    out of the average (weight included) and named in ``details["disabled_sub_criteria"]``.
    """

    name = "weighted_criterion"
    description = "Weighted combination of criteria"

    def __init__(self, criteria_weights: list[tuple[BaseCriterion, float]],
                 config: CriterionConfig | None = None) -> None:
        super().__init__(config)
        pairs = [(criterion, float(weight)) for criterion, weight in criteria_weights]
        for criterion, weight in pairs:
            if weight < 0:
                raise ValueError(f"weight of {criterion.name!r} must not be negative, got {weight}")
        self.criteria_weights = pairs

    def validate_config(self) -> list[str]:
        errors = super().validate_config()
        for criterion, _ in self.criteria_weights:
            errors.extend(f"{criterion.name}: {e}" for e in criterion.validate_config())
        return errors

    async def evaluate(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        disabled = _disabled_names([criterion for criterion, _ in self.criteria_weights])
        active = [(c, w) for c, w in self.criteria_weights if c.config.enabled]
        if disabled and not active:
            return _all_disabled(self, disabled)
        criteria = [criterion for criterion, _ in active]
        weights = [weight for _, weight in active]
        results = await _run_all(criteria, actual, expected)
        sub_results = [{**r.model_dump(), "weight": w} for r, w in zip(results, weights)]
        details: dict[str, Any] = {"sub_results": sub_results}
        total = sum(weights)
        details["total_weight"] = total
        if total <= 0:
            reason = ("No criteria to weigh." if not results
                      else "Total weight is 0; nothing to average.")
            return _note_disabled(_combine(self, 0.0, {**details, "reason": reason}, results),
                                  disabled)
        score = sum(r.score * w for r, w in zip(results, weights)) / total
        details["reason"] = (f"Weighted average {score:.3f} of {len(results)} criteria: "
                             + ", ".join(f"{r.criterion}={r.score:.2f}x{w:g}"
                                         for r, w in zip(results, weights))
                             + "." + _skipped_note(results))
        known_part = sum(r.score * w for r, w in zip(results, weights) if not r.is_error) / total
        unknown_weight = sum(w for r, w in zip(results, weights) if r.is_error) / total
        result = _combine(self, score, details, results,
                          (known_part, known_part + unknown_weight))
        _mark_if_all_skipped(result, results)
        return _note_disabled(result, disabled)
