"""CalibrationReport: how far an evaluator with a judge agrees with people, from a stored run."""

from __future__ import annotations

import datetime as _dt
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from referee.calibrate import _stats
from referee.calibrate._labels import LABEL_KEY
from referee.evaluators.calibration import (
    CalibrationEntry,
    CanaryRow,
    calibration_file_path,
    read_calibration_file,
)
from referee.judge.served import collect_served
from referee.record import CaseResult, EvalReport

# Rows listed one by one when excluded (judge errors, skips); the rest are counted.
EXCLUDED_SHOWN = 50
# How many labelled rows a calibration entry keeps for `referee calibrate --recheck`.
CANARY_ROWS = 20
NOT_SEPARATED = "this judge does not separate the labels"
PANEL_NOT_RECORDED = ("a judge panel's threshold is not recorded: a calibrated threshold holds "
                      "for one judge model (calibrate a member alone to record its own)")


# A value with its 95% interval, and the agreement at one threshold: computed in _stats, stored
# in the report as they are.
Estimate = _stats.Interval
Agreement = _stats.Agreement
CrossValidation = _stats.CrossValidated


class QuestionAgreement(BaseModel):
    """How often one QAG question's answer sided with the human label.

    A question "votes pass" when the judge answered it the way that counts in the output's
    favour. ``judge_pass_human_fail`` counts the outputs people rejected that the question let
    through; ``judge_fail_human_pass`` the ones it rejected that people accepted.
    """

    question: str
    expected: str
    answered: int
    unknown: int
    agreement: Estimate
    kappa: float | None
    judge_pass_human_fail: int
    judge_fail_human_pass: int


class MemberAgreement(BaseModel):
    """One member of a judge panel, set beside the panel: its own scores on the rows the panel
    scored (from the answers it gave the panel; it was not asked again), its own fitted
    threshold and its agreement with the same labels."""

    judge: str  # provider:model, as the panel names it
    provider: str
    model: str
    scored: int
    # Rows the panel scored that this member gave no score on (down, or too few verdicts).
    no_score: int
    threshold: Estimate
    fit_problem: str | None = None
    agreement: Agreement


class ExcludedRow(BaseModel):
    eval_id: str
    source: str
    status: str
    error: str


class CalibrationReport(BaseModel):
    evaluator: str
    judge_provider: str
    judge_model: str
    question_set: str
    metric: str
    labels: str = ""
    data_fingerprint: str
    date: str
    run_dir: str | None = None
    rows: int
    scored: int
    excluded: dict[str, int] = Field(default_factory=dict)
    judge_errors: int = 0
    excluded_rows: list[ExcludedRow] = Field(default_factory=list)
    threshold: Estimate
    # Why the fitted threshold does not separate the labels (it passes or fails every row, or
    # agrees no better than chance); None when it does. Such a threshold is not recorded unless
    # forced.
    fit_problem: str | None = None
    agreement: Agreement
    curve: dict[str, list[float | None]]
    cross_validation: CrossValidation | None = None
    questions: list[QuestionAgreement] = Field(default_factory=list)
    resamples: int
    seed: int
    # The judge as the provider reported it (judge/served.py): the model version its replies
    # named (most frequent first) and OpenAI's system fingerprints; empty when every reply
    # came from the reply cache.
    served_models: list[str] = Field(default_factory=list)
    system_fingerprints: list[str] = Field(default_factory=list)
    # The labelled rows `referee calibrate --recheck` judges again (see canary_rows).
    canary: list[CanaryRow] = Field(default_factory=list)
    # With a judge panel: each member's agreement with the same labels, and the member that
    # agrees best by the fitted metric's figure (the panel is worth its cost when it beats it).
    members: list[MemberAgreement] = Field(default_factory=list)
    best_member: str | None = None

    @property
    def is_panel(self) -> bool:
        return bool(self.members)

    def panel_versus_best(self) -> str | None:
        """One line: the panel's figure against its best member's, None without a panel."""
        best = next((m for m in self.members if m.judge == self.best_member), None)
        if best is None:
            return None
        key = metric_figure(self.metric)
        mine, theirs = metric_value(self.agreement, key), metric_value(best.agreement, key)
        if mine is None or theirs is None:
            return f"the panel and its best member cannot be compared on {key} (undefined)"
        verdict = ("beats" if mine > theirs + 1e-9 else "ties with" if abs(mine - theirs) <= 1e-9
                   else "does not beat")
        return (f"the panel ({key} {mine:.2f}) {verdict} its best member {best.judge} "
                f"({key} {theirs:.2f})")

    @property
    def judge(self) -> str:
        return f"{self.judge_provider}/{self.judge_model}"

    @property
    def separates(self) -> bool:
        """Whether the fitted threshold tells the labels apart (see ``fit_problem``)."""
        return self.fit_problem is None

    def calibration_entry(self) -> CalibrationEntry:
        # Out-of-fold agreement when there is one: the in-sample figures are optimistic, and a
        # pass rate corrected with them would be too.
        measured = (self.cross_validation.agreement if self.cross_validation is not None
                    else self.agreement)
        source = (f"cross-validated, {self.cross_validation.folds} folds"
                  if self.cross_validation is not None else "in-sample")
        return CalibrationEntry(
            evaluator=self.evaluator, judge_provider=self.judge_provider,
            judge_model=self.judge_model, question_set=self.question_set,
            threshold=self.threshold.value if self.threshold.value is not None else 0.5,
            threshold_low=self.threshold.low, threshold_high=self.threshold.high,
            metric=self.metric, n=self.scored, date=self.date,
            data_fingerprint=self.data_fingerprint, labels=self.labels,
            kappa=measured.kappa.value, tpr=measured.tpr.value, tnr=measured.tnr.value,
            positives=measured.positives, negatives=measured.n - measured.positives,
            agreement_source=source, fit_problem=self.fit_problem,
            served_model=self.served_models[0] if self.served_models else None,
            system_fingerprints=self.system_fingerprints or None,
            canary=self.canary or None,
            run_dir=self.run_dir)  # type: ignore[call-arg]  # an extra key (extra="allow")

    def write_calibration_file(self, path: str | Path | None = None, *,
                               force: bool = False) -> Path:
        """Add this calibration to the calibration file (replacing one with the same key).

        A threshold that does not separate the labels is refused unless ``force``; forced, the
        entry keeps ``fit_problem``, and evaluators using it show it in their details. A judge
        panel's is refused: a calibrated threshold holds for one judge model.
        """
        if self.is_panel:
            raise ValueError(PANEL_NOT_RECORDED)
        if self.threshold.value is None:
            raise ValueError("no threshold was fitted (no scored rows); nothing to write")
        if self.fit_problem is not None and not force:
            raise ValueError(f"{NOT_SEPARATED}: {self.fit_problem}; no threshold recorded "
                             "(force it with --force, or write_calibration_file(force=True))")
        target = calibration_file_path(path)
        table = read_calibration_file(target).with_entry(self.calibration_entry())
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = target.with_name(f".{target.name}.tmp")
        temp.write_text(json.dumps(table.model_dump(mode="json"), indent=2, ensure_ascii=False)
                        + "\n", encoding="utf-8")
        temp.replace(target)
        return target

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=2, ensure_ascii=False)


def criterion_result(case: CaseResult, evaluator: str) -> Any:
    return next((r for r in case.criterion_results if r.criterion == evaluator), None)


def compared_score(score: float) -> float:
    """A score as calibration sets it beside a label: clamped into 0.0-1.0."""
    return min(1.0, max(0.0, float(score)))


def exclusion(case: CaseResult, result: Any) -> tuple[str, str] | None:
    """(status, why) when the row has no score to compare, else None."""
    if result is None:
        return case.status.value, case.error or "no result"
    if result.error_kind == "judge" or result.details.get("judge_unavailable"):
        return "JUDGE_ERROR", result.error or result.explanation or "judge error"
    if result.error_kind is not None or result.error:
        return "EVALUATOR_ERROR", result.error or "evaluator error"
    if result.skipped:
        return "SKIPPED", result.explanation or "skipped"
    return None


def question_agreement(votes: dict[tuple[str, str], list[tuple[bool | None, bool]]]
                       ) -> list[QuestionAgreement]:
    """Per question, agreement of its pass/fail vote with the label; worst first."""
    rows = []
    for (question, expected), pairs in votes.items():
        answered = [(vote, label) for vote, label in pairs if vote is not None]
        agree = sum(1 for vote, label in answered if vote == label)
        rows.append(QuestionAgreement(
            question=question, expected=expected, answered=len(answered),
            unknown=len(pairs) - len(answered),
            agreement=_stats.wilson_interval(agree, len(answered)),
            kappa=_stats.cohen_kappa([v for v, _ in answered], [lb for _, lb in answered]),
            judge_pass_human_fail=sum(1 for v, lb in answered if v and not lb),
            judge_fail_human_pass=sum(1 for v, lb in answered if not v and lb)))
    rows.sort(key=lambda q: (q.agreement.value if q.agreement.value is not None else 2.0,
                             q.question))
    return rows


def _fitted(scores: list[float], labels: list[bool], metric: str, *, resamples: int,
            seed: int) -> tuple[Estimate, Agreement]:
    """The threshold fitted to the labels, and agreement with them there (at 0.5 when no
    threshold could be fitted)."""
    threshold = _stats.fitted_threshold_interval(scores, labels, metric, resamples=resamples,
                                                 seed=seed)
    at = threshold.value if threshold.value is not None else 0.5
    return threshold, _stats.agreement_at(scores, labels, at, resamples=resamples, seed=seed)


def build_report(run: EvalReport, *, evaluator: str, judge_provider: str, judge_model: str,
                 question_set: str, metric: str, folds: int | None, resamples: int, seed: int,
                 labels: str, data_fingerprint: str) -> CalibrationReport:
    """Agreement of ``evaluator``'s scores in ``run`` with the labels its cases carry."""
    scores: list[float] = []
    passed: list[bool] = []
    excluded: Counter[str] = Counter()
    excluded_rows: list[ExcludedRow] = []
    votes: dict[tuple[str, str], list[tuple[bool | None, bool]]] = {}
    scored_rows: list[CanaryRow] = []
    judged: list[Any] = []
    panel_rows: list[tuple[list[dict[str, Any]], bool]] = []
    for case in run.cases:
        label = (case.case.metadata.get(LABEL_KEY) if case.case is not None else None) or {}
        if "passed" not in label:
            raise ValueError(f"case {case.eval_id} of the run carries no human label; "
                             "was this run made by referee calibrate?")
        result = criterion_result(case, evaluator)
        if result is not None:
            judged.append(result)
        why = exclusion(case, result)
        if why is not None:
            excluded[why[0]] += 1
            if len(excluded_rows) < EXCLUDED_SHOWN:
                excluded_rows.append(ExcludedRow(eval_id=case.eval_id,
                                                 source=str(label.get("source") or ""),
                                                 status=why[0], error=why[1]))
            continue
        human = bool(label["passed"])
        panel = result.details.get("panel")
        if isinstance(panel, dict):
            panel_rows.append((panel.get("members") or [], human))
        scores.append(compared_score(result.score))
        passed.append(human)
        scored_rows.append(_canary_row(case, label, scores[-1]))
        for record in result.details.get("questions") or []:
            if isinstance(record, dict) and isinstance(record.get("question"), str):
                key = (record["question"], str(record.get("expected", "yes")))
                votes.setdefault(key, []).append((record.get("matched"), human))
    threshold, agreement = _fitted(scores, passed, metric, resamples=resamples, seed=seed)
    cross = None
    if folds:
        cross = _stats.cross_validate(scores, passed, folds, metric, resamples=resamples,
                                      seed=seed)
    members = member_agreements(panel_rows, metric=metric, resamples=resamples, seed=seed)
    served = collect_served(judged)
    judge = f"{judge_provider}/{judge_model}"
    return CalibrationReport(
        served_models=served.models(judge), system_fingerprints=served.fingerprints(judge),
        canary=canary_rows(scored_rows, seed=seed),
        evaluator=evaluator, judge_provider=judge_provider, judge_model=judge_model,
        question_set=question_set, metric=metric, labels=labels,
        data_fingerprint=data_fingerprint, date=_dt.date.today().isoformat(),
        run_dir=str(run.run_dir) if run.run_dir else None, rows=len(run.cases), scored=len(scores),
        excluded=dict(excluded), judge_errors=excluded.get("JUDGE_ERROR", 0),
        excluded_rows=excluded_rows, threshold=threshold,
        fit_problem=_stats.fit_problem(agreement, threshold, metric),
        agreement=agreement,
        curve=_stats.agreement_curve(scores, passed), cross_validation=cross,
        questions=question_agreement(votes), resamples=resamples, seed=seed,
        members=members, best_member=_best(members, metric))


def metric_figure(metric: str) -> str:
    """The agreement figure a fit metric is judged by (Youden's J by TPR + TNR - 1: kappa)."""
    return "f1" if metric == "f1" else "kappa"


def metric_value(agreement: Agreement, key: str) -> float | None:
    return getattr(agreement, key).value


def member_agreements(rows: list[tuple[list[dict[str, Any]], bool]], *, metric: str,
                      resamples: int, seed: int) -> list[MemberAgreement]:
    """Each panel member's agreement with the labels, from its scores in the panel's details
    (``details["panel"]["members"][i]["score"]``) on the rows the panel scored."""
    scored: dict[str, tuple[list[float], list[bool]]] = {}
    names: dict[str, tuple[str, str]] = {}
    for entries, human in rows:
        for entry in entries:
            label = str(entry.get("judge"))
            names.setdefault(label, (str(entry.get("provider")), str(entry.get("model"))))
            scores, labels = scored.setdefault(label, ([], []))
            score = entry.get("score") if entry.get("answered") else None
            if isinstance(score, (int, float)):
                scores.append(compared_score(score))
                labels.append(human)
    members = []
    for label, (scores, labels) in scored.items():
        threshold, agreement = _fitted(scores, labels, metric, resamples=resamples, seed=seed)
        members.append(MemberAgreement(
            judge=label, provider=names[label][0], model=names[label][1], scored=len(scores),
            no_score=len(rows) - len(scores), threshold=threshold,
            fit_problem=_stats.fit_problem(agreement, threshold, metric),
            agreement=agreement))
    return members


def _best(members: list[MemberAgreement], metric: str) -> str | None:
    key = metric_figure(metric)
    ranked = [(value, m.judge) for m in members
              if (value := metric_value(m.agreement, key)) is not None]
    return max(ranked, key=lambda pair: pair[0])[1] if ranked else None


def _canary_row(case: CaseResult, label: dict[str, Any], score: float) -> CanaryRow:
    assert case.case is not None  # a labelled row always stores its case
    fields = case.case.model_dump(mode="json", exclude_defaults=True)
    metadata = {k: v for k, v in (fields.pop("metadata", None) or {}).items() if k != LABEL_KEY}
    if metadata:
        fields["metadata"] = metadata
    return CanaryRow(case=fields, output=str(label.get("output") or ""),
                     passed=bool(label["passed"]), score=score,
                     source=str(label.get("source") or ""), **_canary_media(label))


def _canary_media(label: dict[str, Any]) -> dict[str, Any]:
    """A row's images and PDFs as its canary keeps them: references by hash (the bytes stay in
    the calibration run's blobs/, where ``--recheck`` reads them); nothing for a text row."""
    from referee.content._load import find_parts
    from referee.labels._export import part_reference

    kept = {}
    for key, field in (("media", "media"), ("outputs", "output_media")):
        references = [part_reference(part) for part in find_parts(label.get(key) or [])]
        if references:
            kept[field] = references
    return kept


def canary_rows(rows: list[CanaryRow], *, seed: int, size: int = CANARY_ROWS) -> list[CanaryRow]:
    """Up to ``size`` scored rows, half labelled pass and half fail where there are enough of
    each (the rest from the other label), picked with ``seed``, in their original order.

    Both labels are needed to see a judge drift either way: one that now lets failures through
    changes nothing on rows people passed.
    """
    rng = random.Random(seed)
    by_label = {label: [i for i, row in enumerate(rows) if row.passed is label]
                for label in (True, False)}
    for indices in by_label.values():
        rng.shuffle(indices)
    half = size // 2
    take = {label: min(len(indices), half) for label, indices in by_label.items()}
    for label, indices in by_label.items():  # one label short: the other fills its place
        spare = size - sum(take.values())
        take[label] += min(spare, len(indices) - take[label])
    chosen = sorted(i for label, indices in by_label.items() for i in indices[:take[label]])
    return [rows[i] for i in chosen]
