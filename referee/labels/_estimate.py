"""``referee labels estimate``: a run's judge numbers corrected by the labels people gave it.

For each judged criterion, the judge's pass rate and mean score over every case it scored,
corrected by the cases people labelled (prediction-powered inference, ``referee.stats``):

- the pass rate from the labels' pass/fail verdicts;
- the mean score from the labels' ``human_score`` (the criterion's 0..1 scale), so a GEval or a
  ratio score gets the same honesty a pass rate has.

Only labels made on the run's current scoring count, and the labelled cases must be a random
sample of the scored ones (a review queue that picks borderline cases is not one; say so when
reading the numbers). A criterion with fewer than two labelled cases, or none unlabelled, has no
estimate, and the reason says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from referee.labels._export import run_root
from referee.labels._store import Label, LabelStore
from referee.record import EvalReport
from referee.stats import CorrectedMean, prediction_powered_mean
from referee.store import load_run, version_number

MIN_LABELLED = 2


@dataclass(frozen=True)
class Estimate:
    """One quantity (the pass rate or the mean score) of one criterion."""

    quantity: str  # "pass rate" or "mean score"
    scored: int
    labelled: int
    corrected: CorrectedMean | None
    reason: str = ""

    def describe(self) -> str:
        if self.corrected is None:
            return f"{self.quantity}: no estimate ({self.reason})"
        return f"{self.quantity}: {self.corrected.describe()}"

    def to_dict(self) -> dict[str, Any]:
        c = self.corrected
        return {"quantity": self.quantity, "scored": self.scored, "labelled": self.labelled,
                "judge": c.judge_mean if c else None, "corrected": c.value if c else None,
                "low": c.low if c else None, "high": c.high if c else None,
                "correction": c.correction if c else None, "weight": c.weight if c else None,
                "confidence": c.confidence if c else None, "reason": self.reason}


@dataclass(frozen=True)
class CriterionEstimates:
    criterion: str
    pass_rate: Estimate
    mean_score: Estimate

    def describe(self) -> str:
        return (f"{self.criterion}\n  {self.pass_rate.describe()}\n"
                f"  {self.mean_score.describe()}")

    def to_dict(self) -> dict[str, Any]:
        return {"criterion": self.criterion, "pass_rate": self.pass_rate.to_dict(),
                "mean_score": self.mean_score.to_dict()}


def _estimate(quantity: str, judged: dict[str, float], truth: dict[str, float],
              confidence: float) -> Estimate:
    labelled = [key for key in judged if key in truth]
    unlabelled = [judged[key] for key in judged if key not in truth]
    if len(labelled) < MIN_LABELLED:
        reason = (f"{len(labelled)} labelled case(s); at least {MIN_LABELLED} are needed"
                  + ("" if quantity == "pass rate" else " with a human_score"))
        return Estimate(quantity, len(judged), len(labelled), None, reason)
    if not unlabelled:
        return Estimate(quantity, len(judged), len(labelled), None,
                        "every scored case is labelled: the labels' own mean is the answer")
    corrected = prediction_powered_mean(unlabelled, [judged[k] for k in labelled],
                                        [truth[k] for k in labelled], confidence=confidence)
    return Estimate(quantity, len(judged), len(labelled), corrected)


def estimate_report(report: EvalReport, labels: list[Label], *,
                    confidence: float = 0.95) -> list[CriterionEstimates]:
    """The corrected estimates of each judged criterion of ``report`` from ``labels``."""
    scoring = version_number(report.metadata)
    current = [label for label in labels if label.scoring == scoring]
    criteria: dict[str, tuple[dict[str, float], dict[str, float]]] = {}
    for case in report.cases:
        for result in case.criterion_results:
            if result.is_scored:
                scores, passes = criteria.setdefault(result.criterion, ({}, {}))
                scores[case.eval_id] = result.score
                passes[case.eval_id] = float(result.passed)
    estimates = []
    for criterion, (scores, passes) in criteria.items():
        mine = [label for label in current if label.criterion == criterion]
        verdicts = {label.case_id: float(label.human_passed) for label in mine
                    if label.human_passed is not None}
        human_scores = {label.case_id: label.human_score for label in mine
                        if label.human_score is not None}
        if not verdicts and not human_scores:
            continue
        estimates.append(CriterionEstimates(
            criterion, _estimate("pass rate", passes, verdicts, confidence),
            _estimate("mean score", scores, human_scores, confidence)))
    return estimates


def estimate_run(run_dir: str | Path, *, confidence: float = 0.95) -> list[CriterionEstimates]:
    """``estimate_report`` of the stored run in ``run_dir`` and its labels.jsonl."""
    root = run_root(run_dir)
    return estimate_report(load_run(root), list(LabelStore(root).latest().values()),
                           confidence=confidence)
