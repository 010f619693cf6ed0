"""Judge cascades: a cheap judge answers first, a strong one only where the cheap one is unsure.

``JudgeCascade([cheap, strong])`` is accepted wherever a judge or a panel is (``judge=`` of the
multivon-style evaluators and of the 10xgraph-style LLM criteria). Each stage is a judge or a
panel. The cheap stage scores the case as it would alone; the strong stage is asked only when
the cheap result is an error, holds an UNKNOWN answer, lies within ``margin`` of the threshold,
comes from a split panel, or when the cheap judge's calibration (a calibration file's TPR/TNR
for this criterion) says its verdict of that kind is weak. Where the strong judge is asked, its
result is the verdict, exactly what the strong judge alone would have said (design decision
17); the cheap stage only decides where it need not be asked.

``audit_rate`` asks the strong judge too on a seeded sample of the cases the cheap judge was
confident about, so a run reports how often the two agree there.

Every cascaded result records in ``details["cascade"]`` which stage answered, why it
escalated, what each stage spent, and what the strong judge alone would have spent
(``strong_alone``: escalated cases at their strong stage's spend, the others at the cheap
stage's tokens priced as the strong judge's).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from pydantic import Field, field_validator

from referee._strict import StrictModel
from referee.errors import JudgeUnavailable
from referee.judge.config import JudgeConfig
from referee.judge.panel import JudgePanel, check_judge, judge_members, member_labels
from referee.judge.pricing import estimate_cost, price_of
from referee.result import CriterionResult
from referee.usage import TokenUsage

# Why the next stage is asked. "error": the cheap stage did not answer (an unanswered request
# is an error, never a verdict). "unknown": an answer the judge could not give (a QAG
# question answered neither yes nor no). "margin": the score lies within ``margin`` of the
# threshold. "split": a panel's members fell on both sides of the threshold. "calibration":
# the cheap judge has no calibration entry for this criterion, or its TPR (for a fail) or TNR
# (for a pass) is below ``min_tpr`` / ``min_tnr``.
EscalationReason = Literal["error", "unknown", "margin", "split", "calibration"]

Stage = JudgeConfig | JudgePanel


def _every_reason() -> list[EscalationReason]:
    return list(get_args(EscalationReason))


class JudgeCascade(StrictModel):
    """Judges asked in turn, cheapest first; a later one only where the earlier one is unsure.

    ``JudgeCascade([cheap, strong], escalate_on=["unknown", "margin"], margin=0.15)``.
    ``calibration_file``: the file whose entries (``referee calibrate``) give the cheap judge's
    TPR/TNR per criterion; without it, "calibration" escalates nothing.
    """

    stages: list[Stage] = Field(min_length=2)
    escalate_on: list[EscalationReason] = Field(default_factory=_every_reason)
    margin: float = Field(default=0.1, ge=0.0, le=1.0)
    min_tpr: float = Field(default=0.8, ge=0.0, le=1.0)
    min_tnr: float = Field(default=0.8, ge=0.0, le=1.0)
    calibration_file: str | None = None
    audit_rate: float = Field(default=0.0, ge=0.0, le=1.0)
    audit_seed: int = 0

    def __init__(self, stages: Sequence[Stage] | None = None, /, **data: Any) -> None:
        if stages is not None:
            data["stages"] = list(stages)
        super().__init__(**data)

    @field_validator("escalate_on")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(value))


def stage_labels(stages: Sequence[Stage]) -> list[str]:
    """A name per stage: ``provider/model``, or ``panel(a, b)``."""
    labels = []
    for stage in stages:
        if isinstance(stage, JudgePanel):
            labels.append(f"panel({', '.join(member_labels(stage.members))})")
        else:
            labels.append(f"{stage.provider}/{stage.model}")
    return labels


def stage_model(stage: Stage) -> str | None:
    """The model whose price the stage bills at; None for a panel (several prices)."""
    return stage.model if isinstance(stage, JudgeConfig) else None


# (TPR, TNR) of the cheap judge for this criterion; None when it has no usable entry.
Calibration = tuple[float, float] | None


def escalation_reasons(result: CriterionResult, cascade: JudgeCascade, *,
                       calibration: Calibration = None,
                       calibrated: bool = False) -> list[str]:
    """Why ``result`` (a stage's) is not confident enough to be the verdict; [] when it is.

    ``calibrated``: whether the calibration was looked up at all (a cascade with a calibration
    file); ``calibration`` then holds the stage's (TPR, TNR), None when it has no entry.
    """
    wanted = set(cascade.escalate_on)
    details = result.details or {}
    reasons: list[str] = []
    if result.error is not None or details.get("judge_unavailable"):
        return ["error"] if "error" in wanted else []
    if "unknown" in wanted and (_count(details.get("unknown")) > 0
                                or str(details.get("verdict", "")).upper() == "UNKNOWN"):
        reasons.append("unknown")
    if "margin" in wanted and abs(result.score - result.threshold) < cascade.margin:
        reasons.append("margin")
    if "split" in wanted and _panel_split(details, result.threshold):
        reasons.append("split")
    if "calibration" in wanted and calibrated:
        if calibration is None:
            reasons.append("calibration")
        else:
            tpr, tnr = calibration
            # A pass is wrong when the judge lets a fail through (low TNR); a fail is wrong
            # when it misses a pass (low TPR).
            if (result.passed and tnr < cascade.min_tnr) or (
                    not result.passed and tpr < cascade.min_tpr):
                reasons.append("calibration")
    return reasons


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _panel_split(details: dict[str, Any], threshold: float) -> bool:
    """Whether the scores of a panel's members that answered fall on both sides of the
    threshold."""
    panel = details.get("panel")
    if not isinstance(panel, dict):
        return False
    scores = [m["score"] for m in panel.get("members") or []
              if isinstance(m, dict) and isinstance(m.get("score"), (int, float))]
    return bool(scores) and min(scores) < threshold <= max(scores)


def audited(cascade: JudgeCascade, criterion: str, case_key: str) -> bool:
    """Whether this (criterion, case) is in the seeded audit sample: the same cases for the
    same seed, in any order and on any worker."""
    if cascade.audit_rate <= 0.0:
        return False
    digest = hashlib.sha256(f"{cascade.audit_seed}\x1f{criterion}\x1f{case_key}".encode())
    return int.from_bytes(digest.digest()[:8], "big") / 2**64 < cascade.audit_rate


def priced_as(model: str | None, usage: TokenUsage) -> float | None:
    """What ``usage``'s tokens would cost at ``model``'s price; None when it has none."""
    if model is None or price_of(model) is None:
        return None
    return estimate_cost(model, usage.input_tokens, usage.output_tokens,
                         cached_input_tokens=usage.cached_input_tokens,
                         cache_write_tokens=usage.cache_write_tokens)


@dataclass(frozen=True)
class StageRun:
    """One stage's result for a case."""

    index: int
    label: str
    result: CriterionResult

    @property
    def usage(self) -> TokenUsage:
        return self.result.token_usage or TokenUsage()

    def record(self) -> dict[str, Any]:
        return {"stage": self.index, "judge": self.label, "score": self.result.score,
                "passed": self.result.passed, "threshold": self.result.threshold,
                "error": self.result.error,
                "token_usage": self.usage.model_dump(mode="json")}


async def run_cascade(cascade: JudgeCascade, labels: Sequence[str],
                      score_with: Callable[[int], Awaitable[CriterionResult]], *,
                      calibration: Calibration = None, calibrated: bool = False,
                      audit: bool = False) -> CriterionResult:
    """Score with stage 0, then each later stage while the one before is unsure; the last stage
    asked gives the verdict. ``score_with(i)``: the criterion's result with stage ``i``'s judge.
    ``calibration`` applies to the first stage (the one a calibration file can speak for).
    ``audit``: ask the last stage even where the first was confident (the seeded audit)."""
    runs = [StageRun(0, labels[0], await _stage_result(cascade, score_with, 0, len(labels)))]
    if runs[0].result.skipped:  # nothing to judge: no judge was asked, none is escalated to
        return runs[0].result
    first_reasons = escalation_reasons(runs[0].result, cascade, calibration=calibration,
                                       calibrated=calibrated)
    reasons = first_reasons
    while reasons and len(runs) < len(labels):
        index = len(runs)
        try:
            answer = await _stage_result(cascade, score_with, index, len(labels))
        except JudgeUnavailable as exc:  # the last stage did not answer: an error, with the
            # spend of the stages before it
            spent = exc.token_usage if isinstance(exc.token_usage, TokenUsage) else None
            exc.token_usage = TokenUsage.total([*(run.result.token_usage for run in runs), spent])
            raise
        runs.append(StageRun(index, labels[index], answer))
        reasons = escalation_reasons(runs[-1].result, cascade) if len(runs) < len(labels) else []
    audit_failure = None
    audited_now = audit and not first_reasons
    if audited_now:
        last = len(labels) - 1
        try:
            runs.append(StageRun(last, labels[last], await score_with(last)))
        except JudgeUnavailable as exc:  # an audit that got no answer leaves the verdict be
            audited_now, audit_failure = False, f"{labels[last]}: {exc}"
    result = _cascaded_result(cascade, runs, first_reasons, audited_now)
    if audit_failure is not None:
        result.details["cascade"]["audit_error"] = audit_failure
    return result


async def _stage_result(cascade: JudgeCascade,
                        score_with: Callable[[int], Awaitable[CriterionResult]], index: int,
                        stages: int) -> CriterionResult:
    """Stage ``index``'s result; a stage before the last that raises JudgeUnavailable (the
    multivon-style evaluators raise, the engine records it) is an error result to escalate."""
    try:
        return await score_with(index)
    except JudgeUnavailable as exc:
        if index == stages - 1 or "error" not in cascade.escalate_on:
            raise
        spent = exc.token_usage if isinstance(exc.token_usage, TokenUsage) else None
        return CriterionResult(criterion="", score=0.0, passed=False, error=str(exc),
                               error_kind="judge", token_usage=spent)


def _cascaded_result(cascade: JudgeCascade, runs: list[StageRun], reasons: list[str],
                     audited_now: bool) -> CriterionResult:
    answer = runs[-1]
    strong = cascade.stages[-1]
    # The strong judge alone: its own spend where it was asked, else the first stage's tokens
    # at its price (the same prompts; the reply lengths are the first stage's).
    if answer.index == len(cascade.stages) - 1:
        alone = answer.usage.model_copy()
    else:
        first = runs[0].usage
        alone = first.model_copy(update={"cost_usd": priced_as(stage_model(strong), first),
                                         "cached_requests": 0})
    record: dict[str, Any] = {
        "strong": stage_labels([strong])[0],
        "answered_by": answer.label,
        "stage": answer.index,
        "escalated": bool(reasons),
        "reasons": reasons,
        "stages": [run.record() for run in runs],
        "strong_alone": alone.model_dump(mode="json"),
    }
    if audited_now:
        record["audit"] = {"judge": answer.label,
                           "agreed": runs[0].result.passed == answer.result.passed}
    details = dict(answer.result.details or {})
    details["cascade"] = record
    usage = TokenUsage.total(run.result.token_usage for run in runs)
    return answer.result.model_copy(update={"details": details, "token_usage": usage})


def check_judge_or_cascade(owner: str, judge: Any) -> Stage | JudgeCascade | None:
    """``judge=`` of a criterion that a cascade may judge: a JudgeCascade, or what
    ``check_judge`` accepts (None, a JudgeConfig, a panel)."""
    if isinstance(judge, JudgeCascade):
        return judge
    return check_judge(owner, judge)


# `referee run --judge-cascade CHEAP,STRONG --cascade-margin M` sets these for the run, as
# --judge-max-retries sets REFEREE_JUDGE_MAX_RETRIES: the judge layer reads them wherever a
# criterion without a judge of its own resolves one (here and on Ray workers).
CASCADE_ENV = "JUDGE_CASCADE"
CASCADE_MARGIN_ENV = "JUDGE_CASCADE_MARGIN"


def cascade_from_text(stages_text: str, margin_text: str | None, *, source: str,
                      margin_source: str) -> JudgeCascade:
    """``"openai/gpt-4o-mini,openai/gpt-4o"`` (cheapest first) as a cascade of those judges;
    ``margin_text`` its margin. A ValueError names ``source``/``margin_source`` and what was
    expected."""
    entries = [entry for entry in stages_text.split(",") if entry.strip()]
    if len(entries) < 2:
        raise ValueError(f"{source}: expected two or more comma-separated PROVIDER/MODEL "
                         f"judges, cheapest first (e.g. openai/gpt-4o-mini,openai/gpt-4o), got "
                         f"{stages_text.strip()!r}")
    stages = judge_members(entries, source)
    settings: dict[str, Any] = {}
    if margin_text is not None and margin_text.strip():
        try:
            margin = float(margin_text)
        except ValueError:
            margin = -1.0
        if not 0.0 <= margin <= 1.0:
            raise ValueError(f"{margin_source}: expected a number between 0 and 1, got "
                             f"{margin_text.strip()!r}")
        settings["margin"] = margin
    return JudgeCascade(stages, **settings)


def cascade_from_env() -> JudgeCascade | None:
    """The cascade JUDGE_CASCADE (and JUDGE_CASCADE_MARGIN) name, else None."""
    stages_text = os.environ.get(CASCADE_ENV, "").strip()
    if not stages_text:
        return None
    return cascade_from_text(stages_text, os.environ.get(CASCADE_MARGIN_ENV),
                             source=CASCADE_ENV, margin_source=CASCADE_MARGIN_ENV)
