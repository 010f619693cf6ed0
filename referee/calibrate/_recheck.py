"""``referee calibrate --recheck``: judge a calibration entry's canary rows again and say whether
the judge still agrees with people as it did.

A calibration entry keeps a few labelled rows with the scores the judge gave them then (the
canary, ``CalibrationEntry.canary``). The recheck scores them again through the same path as a
calibration (a stored run, the judge layer) with the reply cache off, since a cached reply
would only replay the old verdict, and compares agreement with the labels then and now at the
entry's threshold, on the rows the judge answered now.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from referee.calibrate._labels import LabelledCase, row_media
from referee.calibrate._report import compared_score, criterion_result, exclusion
from referee.calibrate._run import _question_set, criterion_name, score_labelled
from referee.case import EvalCase
from referee.content._blobs import BLOBS_DIR
from referee.evaluators.calibration import CalibrationEntry, CanaryRow
from referee.judge import JudgeConfig
from referee.judge.served import collect_served
from referee.run.engine import DEFAULT_CONCURRENCY
from referee.run.judge_calibration import drift_between
from referee.run.sync import run_sync

# Agreement may fall this much (a share of the canary rows) before the recheck fails: on 20 rows
# one flipped verdict moves it 5 points, so the default lets one row's noise through.
DEFAULT_TOLERANCE = 0.10
# Float noise in comparing two shares of the same rows.
_EPSILON = 1e-9


class RecheckRow(BaseModel):
    source: str
    label: bool  # the people's verdict
    score_then: float
    score_now: float | None = None  # None: the judge gave no verdict now
    error: str | None = None

    def passes(self, threshold: float, now: bool) -> bool | None:
        score = self.score_now if now else self.score_then
        return None if score is None else score >= threshold


class Recheck(BaseModel):
    """One calibration entry's canary judged again."""

    evaluator: str
    judge: str  # provider/model
    threshold: float
    calibrated_on: str  # the entry's date
    tolerance: float
    rows: list[RecheckRow] = Field(default_factory=list)
    served_then: str | None = None
    served_now: list[str] = Field(default_factory=list)
    question_set_changed: bool = False
    run_dir: str | None = None

    @property
    def answered(self) -> list[RecheckRow]:
        return [row for row in self.rows if row.score_now is not None]

    def _agreement(self, now: bool) -> float | None:
        rows = self.answered
        if not rows:
            return None
        return sum(row.passes(self.threshold, now) is row.label for row in rows) / len(rows)

    @property
    def agreement_then(self) -> float | None:
        """Agreement with people at calibration time, on the rows answered now."""
        return self._agreement(now=False)

    @property
    def agreement_now(self) -> float | None:
        return self._agreement(now=True)

    @property
    def flips(self) -> list[RecheckRow]:
        """Rows whose verdict at the entry's threshold changed."""
        return [row for row in self.answered
                if row.passes(self.threshold, now=True) != row.passes(self.threshold, now=False)]

    @property
    def drift(self) -> str | None:
        return drift_between(self.served_then, self.served_now)

    @property
    def problems(self) -> list[str]:
        """Why the judge can no longer be trusted as calibrated; empty when it can."""
        found = []
        then, now = self.agreement_then, self.agreement_now
        if then is None or now is None:
            found.append(f"the judge gave no verdict on any of the {len(self.rows)} canary rows")
        elif now < then - self.tolerance - _EPSILON:
            found.append(f"agreement with people fell from {then:.1%} to {now:.1%}, more than "
                         f"the tolerance of {self.tolerance * 100:g} points")
        if self.drift:
            found.append(f"the provider serves another version: {self.drift}")
        if self.question_set_changed:
            found.append("the evaluator now asks other questions than the calibrated ones")
        return found

    def describe(self) -> str:
        served = (f" against {self.served_then}" if self.served_then
                  else " (no served version recorded)")
        lines = [f"recheck {self.evaluator} by {self.judge} (calibrated {self.calibrated_on}"
                 f"{served}, threshold {self.threshold:g}, {len(self.rows)} canary rows):"]
        lines.append(f"  served now: {', '.join(self.served_now) or 'unknown'}")
        then, now = self.agreement_then, self.agreement_now
        answered = len(self.answered)
        if then is not None and now is not None:
            moved = (now - then) * 100
            lines.append(f"  agreement with people on {answered} rows: then {then:.1%}, now "
                         f"{now:.1%} ({moved:+.1f} points; tolerance {self.tolerance * 100:g})")
        errors = [row for row in self.rows if row.score_now is None]
        if errors:
            lines.append(f"  no verdict now on {len(errors)} row(s): "
                         + "; ".join(f"{r.source}: {r.error}" for r in errors[:5]))
        flips = self.flips
        if flips:
            shown = ", ".join(
                f"{row.source or '?'} (labelled {'pass' if row.label else 'fail'}): "
                f"{_verdict(row.passes(self.threshold, False))} -> "
                f"{_verdict(row.passes(self.threshold, True))}" for row in flips[:10])
            more = f", and {len(flips) - 10} more" if len(flips) > 10 else ""
            lines.append(f"  {len(flips)} verdict(s) flipped: {shown}{more}")
        else:
            lines.append("  no verdict flipped")
        problems = self.problems
        lines.append("  DRIFT: " + "; ".join(problems) if problems
                     else "  unchanged: the calibration still holds on the canary")
        if self.run_dir:
            lines.append(f"  run stored in {self.run_dir}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {**self.model_dump(mode="json"), "agreement_then": self.agreement_then,
                "agreement_now": self.agreement_now, "flips": len(self.flips),
                "drift": self.drift, "problems": self.problems}


def _verdict(passed: bool | None) -> str:
    return "?" if passed is None else "pass" if passed else "fail"


def recheck_judge(evaluator: Any, entry: CalibrationEntry) -> JudgeConfig:
    """The entry's judge as the evaluator would reach it (its endpoint and settings when it is
    that judge), with the reply cache off."""
    current = None
    resolve = getattr(evaluator, "judge_config", None)
    if callable(resolve):
        try:
            current = resolve()
        except Exception:  # no judge resolvable from the evaluator: the entry names it
            current = None
    if current is None or current.provider != entry.judge_provider or \
            current.model.strip().lower() != entry.judge_model.strip().lower():
        current = JudgeConfig(provider=entry.judge_provider, model=entry.judge_model)
    return current.model_copy(update={"cache": False})


def _canary_case(row: CanaryRow, index: int, entry: CalibrationEntry) -> LabelledCase:
    """A canary row as it was judged: with its images and PDFs, read from the calibration
    run's blobs/ (a row whose blob is gone is left out, in one line)."""
    source = row.source or f"canary row {index + 1}"
    extra = row.model_extra or {}
    media: tuple[list[Any], list[Any], str | None] = ([], [], None)
    if extra.get("media") or extra.get("output_media"):
        run_dir = (entry.model_extra or {}).get("run_dir")
        media = row_media({**extra, "blobs": str(Path(run_dir) / BLOBS_DIR) if run_dir
                           else None}, source, None)
    return LabelledCase(case=EvalCase.model_validate(row.case), output=row.output,
                        passed=row.passed, source=source, media=media[0], outputs=media[1],
                        missing=media[2])


async def recheck_async(evaluator: Any, entry: CalibrationEntry, *,
                        tolerance: float = DEFAULT_TOLERANCE,
                        runs_dir: str | Path | None = None,
                        concurrency: int = DEFAULT_CONCURRENCY,
                        judge_timeout: float | None = None,
                        judge_max_tokens: int | None = None,
                        judge_max_retries: int | None = None) -> Recheck:
    """Judge ``entry``'s canary again with ``evaluator`` and the entry's judge."""
    if not entry.canary:
        raise ValueError(f"the entry for {entry.evaluator} by {entry.judge_provider}/"
                         f"{entry.judge_model} keeps no canary rows (calibrated before referee "
                         "kept them): calibrate again to recheck it later")
    if not 0.0 <= tolerance <= 1.0:
        raise ValueError(f"tolerance must be within [0, 1], got {tolerance}")
    rows = [_canary_case(row, i, entry) for i, row in enumerate(entry.canary)]
    run, evaluator, provider, model = await score_labelled(
        evaluator, rows, recheck_judge(evaluator, entry), runs_dir=runs_dir,
        concurrency=concurrency, judge_timeout=judge_timeout,
        judge_max_tokens=judge_max_tokens, judge_max_retries=judge_max_retries,
        labels=f"canary of the {entry.date} calibration",
        purpose={"recheck": True})
    name = criterion_name(evaluator)
    by_id = {case.eval_id: case for case in run.cases}
    checked: list[RecheckRow] = []
    judged = []
    for row, canary in zip(rows, entry.canary):
        case = by_id.get(row.case.eval_id)
        result = criterion_result(case, name) if case is not None else None
        if result is not None:
            judged.append(result)
        why = exclusion(case, result) if case is not None else ("MISSING", "not run")
        checked.append(RecheckRow(
            source=row.source, label=row.passed, score_then=canary.score,
            score_now=None if why is not None or result is None
            else compared_score(result.score),
            error=None if why is None else f"{why[0]}: {why[1]}"))
    return Recheck(
        evaluator=name, judge=f"{provider}/{model}", threshold=entry.threshold,
        calibrated_on=entry.date, tolerance=tolerance, rows=checked,
        served_then=entry.served_model,
        served_now=collect_served(judged).models(f"{provider}/{model}"),
        question_set_changed=_question_set(evaluator) != entry.question_set,
        run_dir=str(run.run_dir) if run.run_dir else None)


def recheck(evaluator: Any, entry: CalibrationEntry, **options: Any) -> Recheck:
    """Sync front door of :func:`recheck_async`."""
    return run_sync(recheck_async(evaluator, entry, **options))


def entries_to_recheck(entries: Sequence[CalibrationEntry], *, evaluator: str | None,
                       judge: str | Sequence[str] | None) -> list[CalibrationEntry]:
    """The entries named by ``--evaluator`` and ``--judge`` (all when neither is given; a
    repeated ``--judge`` picks each judge's entries)."""
    judges = ({judge.strip().lower()} if isinstance(judge, str)
              else {j.strip().lower() for j in judge or ()})
    chosen = []
    for entry in entries:
        if evaluator is not None and entry.evaluator != evaluator:
            continue
        if judges and f"{entry.judge_provider}/{entry.judge_model}".lower() not in judges:
            continue
        chosen.append(entry)
    return chosen
