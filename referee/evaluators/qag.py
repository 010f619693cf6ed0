"""QAG scoring: ask a judge binary questions, score the fraction answered as expected.

Shared by every judged evaluator of the EvalSuite-style API. Default mode asks one question per
judge call, all questions of a case concurrently (the semantics the calibrated thresholds were
fit under); ``batch=True`` asks all questions of one evaluator in one JSON call and yields
the same per-question records. An UNKNOWN verdict never counts for or against the model: it
leaves the denominator and is disclosed in the reason; when fewer than half of the questions
have a verdict (``answers_needed``), or a batched reply is rejected whole, the judge has not
judged, and ``JudgeUnavailable`` tells the runner to record ``JUDGE_ERROR``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
from abc import abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from referee.case import EvalCase
from referee.criteria.base import CURRENT_CASE, BaseCriterion
from referee.criteria.judged import JudgedCriterionBase
from referee.errors import JudgeUnavailable
from referee.evaluators._multivon import MultivonSurface
from referee.evaluators.calibration import (
    NO_QUESTION_SET,
    CalibrationEntry,
    calibrated_threshold,
    calibration_file_configured,
    calibration_file_path,
    calibration_row,
    file_threshold,
)
from referee.evaluators.prompts import (
    BATCH_REPLY_SHAPE,
    JUDGE_SYSTEM,
    QUESTION_INSTRUCTION,
    DataBlock,
    batch_schema,
    batch_task,
    material_prefix,
    question_task,
)
from referee.execution import ExecutionResult
from referee.judge import (
    JudgeConfig,
    JudgeReply,
    Verdict,
    get_judge,
    parse_json_object,
    parse_verdict,
    reply_evidence,
    unreadable_replies,
)
from referee.judge.binding import JudgeBinding, bind_in_layers
from referee.judge.cascade import JudgeCascade, check_judge_or_cascade
from referee.judge.config import verdict_max_tokens
from referee.judge.panel import (
    PANEL,
    JudgePanel,
    PanelAnswers,
    ask_panel,
    vote,
)
from referee.result import CriterionResult
from referee.usage import TokenUsage

# Missed questions quoted in a result's reason; every question is in details["questions"].
MISSED_SHOWN = 2

# A score needs verdicts on at least this share of the questions asked (and on one at least):
# below it the few verdicts left are not a measurement of the case ("1 of 4 answered" is not a
# Faithfulness score), and the case is a JUDGE_ERROR. Exactly half still scores, as in
# multivon-eval's "insufficient verdict coverage" rule.
MIN_ANSWERED_SHARE = 0.5


def answers_needed(asked: int) -> int:
    """How many of ``asked`` questions need a verdict for the case to be scored."""
    return max(1, math.ceil(asked * MIN_ANSWERED_SHARE))


@dataclass(frozen=True)
class Question:
    """One yes/no question, the answer that counts in the model's favour, and its material."""

    text: str
    expect_yes: bool = True
    blocks: tuple[DataBlock, ...] = field(default=())


# threshold= value that opts in to the calibration file written by ``referee calibrate``.
CALIBRATED = "calibrated"


def check_threshold(owner: str, threshold: float | None) -> float | None:
    if threshold is None:
        return None
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise TypeError(f"{owner}: threshold must be a number between 0.0 and 1.0 (or "
                        f"'{CALIBRATED}'), got {threshold!r}")
    value = float(threshold)
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{owner}: threshold must be between 0.0 and 1.0, got {threshold!r}")
    return value


async def gather_all(awaitables: Sequence[Awaitable[JudgeReply]]) -> list[JudgeReply]:
    """Run judge calls concurrently; wait for every call, then re-raise the first failure.

    Waiting for the siblings (instead of abandoning them as plain gather does) means no judge
    call outlives the evaluation that asked for it. A judge failure carries the usage of the
    siblings that did answer: they were paid for.
    """
    outcomes = await asyncio.gather(*awaitables, return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            if isinstance(outcome, JudgeUnavailable):
                spent = [o.usage for o in outcomes if isinstance(o, JudgeReply)]
                outcome.token_usage = TokenUsage.total([outcome.token_usage, *spent])
            raise outcome
    return list(outcomes)  # type: ignore[arg-type]


def _verdict_word(verdict: Verdict) -> str:
    return verdict.name.lower()


def _record(question: Question, verdict: Verdict, raw: str, cached: bool) -> dict[str, Any]:
    matched = None if verdict is Verdict.UNKNOWN else (verdict is Verdict.YES) == question.expect_yes
    return {
        "question": question.text,
        "expected": "yes" if question.expect_yes else "no",
        "verdict": _verdict_word(verdict),
        "matched": matched,
        "raw_reply": reply_evidence(raw),
        "cached": cached,
    }


def case_cache_group(expected: EvalCase) -> str:
    """One provider prompt-cache key per case (OpenAI's ``prompt_cache_key``)."""
    return "referee-" + hashlib.sha256(expected.eval_id.encode("utf-8")).hexdigest()[:24]


def question_verdict(text: str, question: str) -> Verdict:
    """The verdict of a reply to ``question_task(question)``. The judge's echo of the task
    (whose instruction names both verdict words), or of its question line alone, is not part
    of its answer."""
    return parse_verdict(text, echoes=(question_task(question), QUESTION_INSTRUCTION,
                                       f"Question: {question}"))


def _verdict_check(question: str) -> Callable[[str], bool]:
    return lambda text: question_verdict(text, question) is not Verdict.UNKNOWN


async def ask_each(cfg: JudgeConfig, questions: Sequence[Question], *,
                   cache_group: str | None = None
                   ) -> tuple[list[dict[str, Any]], list[JudgeReply]]:
    judge = get_judge(cfg)
    # sample_index = position: two identical questions in one evaluator stay two calls.
    replies = await gather_all([
        judge.complete(question_task(q.text), system=JUDGE_SYSTEM,
                       prompt_prefix=material_prefix(q.blocks), cache_group=cache_group,
                       json_mode=False, sample_index=i, accept=_verdict_check(q.text),
                       max_tokens=verdict_max_tokens(cfg))
        for i, q in enumerate(questions)])
    records = [_record(q, question_verdict(r.text, q.text), r.text, r.cached)
               for q, r in zip(questions, replies)]
    return records, replies


def _union_blocks(questions: Sequence[Question]) -> list[DataBlock]:
    seen: dict[tuple[str, str], DataBlock] = {}
    for question in questions:
        for block in question.blocks:
            seen.setdefault((block.label, block.content), block)
    return list(seen.values())


@dataclass(frozen=True)
class BatchReading:
    """What a batched reply answers: values by 1-based question id, or why the reply as a
    whole is not read as answers (``rejected``)."""

    answers: dict[int, Any]
    rejected: str | None = None
    missing: tuple[int, ...] = ()  # asked ids the reply left out


def omission(missing: Sequence[int], count: int) -> str | None:
    """Why a batched reply that left out ``missing`` of ``count`` asked ids is no answer (it
    did not answer each question, as copying an example of the reply does); None if none."""
    if not missing:
        return None
    return (f"the reply leaves out question id(s) {_shown_ids(list(missing))} of the {count} "
            f"asked ({_asked_ids(count)}): it answers {count - len(missing)} of {count}, not "
            "each question")


# A reply holding one of these repeats the prompt instead of answering it.
_PROMPT_ECHOES = ("<<<begin", "<<<end", "questions:\n1. ", "question(s), each one independently")


_SHAPE_PLACEHOLDERS = re.compile(r"<\s*(?:question\s+id|yes\s+or\s+no)\s*>", re.IGNORECASE)


def _asked_ids(count: int) -> str:
    return "1" if count == 1 else f"1-{count}"


def _shown_ids(keys: Sequence[Any]) -> str:
    shown = ", ".join(json.dumps(k, ensure_ascii=False) for k in keys[:3])
    return shown + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")


def _placeholder(value: Any) -> bool:
    return isinstance(value, str) and value.strip().startswith("<") and value.strip().endswith(">")


def _batch_entries(data: dict[str, Any]) -> list[tuple[Any, Any]]:
    """(id, value) pairs of a batched reply: ``{"answers": {"1": "yes"}}``, or the list form
    ``{"answers": [{"id": 1, "answer": "yes"}]}`` / ``["yes", ...]`` some judges give."""
    answers = data.get("answers", data)
    if isinstance(answers, dict):
        return list(answers.items())
    if not isinstance(answers, list):
        return []
    entries = []
    for position, entry in enumerate(answers, start=1):
        if isinstance(entry, dict):
            entries.append((entry.get("id", position), entry.get("answer", entry.get("verdict"))))
        else:
            entries.append((position, entry))
    return entries


def _asked_id(key: Any, count: int) -> int | None:
    if isinstance(key, bool) or isinstance(key, float) and not key.is_integer():
        return None
    try:
        ident = int(key)
    except (TypeError, ValueError):
        return None
    return ident if 1 <= ident <= count else None


def read_batch_reply(text: str, count: int) -> BatchReading:
    """The answers of a reply to ``batch_task`` of ``count`` questions.

    A reply that repeats the prompt, copies the placeholders of the reply shape, or answers an
    id that was not asked is rejected whole: it shows the judge did not answer these questions,
    so none of its values is a verdict. The asked ids a reply leaves out are ``missing``: the
    callers reject the answers of an evaluator whose ids are missing (``omission``), since a
    reply answering ids 1-2 of 4 is what copying an example looks like. A reply with no JSON
    object reads as no answers.
    """
    lowered = text.lower()
    if any(echo in lowered for echo in _PROMPT_ECHOES):
        return BatchReading({}, "the reply repeats the prompt (its questions or data blocks) "
                                "instead of answering it")
    try:
        entries = _batch_entries(parse_json_object(text, ("answers",)))
    except ValueError:
        entries = []
    if _SHAPE_PLACEHOLDERS.search(text) or any(_placeholder(key) or _placeholder(value)
                                               for key, value in entries):
        return BatchReading({}, "the reply copies the placeholders of the reply shape "
                                f"{BATCH_REPLY_SHAPE} instead of answering")
    found: dict[int, Any] = {}
    unasked: list[Any] = []
    for key, value in entries:
        ident = _asked_id(key, count)
        if ident is None:
            unasked.append(key)
        elif ident not in found:
            found[ident] = value
    if unasked:
        return BatchReading({}, f"the reply answers question id(s) {_shown_ids(unasked)} that "
                                f"were not asked (asked: {_asked_ids(count)})")
    missing = tuple(ident for ident in range(1, count + 1) if ident not in found)
    return BatchReading(found, missing=missing if found else ())


def _answer_verdict(value: Any) -> Verdict:
    if isinstance(value, bool):
        return Verdict.YES if value else Verdict.NO
    if isinstance(value, str):
        return parse_verdict(value)
    return Verdict.UNKNOWN


async def ask_batched(cfg: JudgeConfig, questions: Sequence[Question], *,
                      cache_group: str | None = None
                      ) -> tuple[list[dict[str, Any]], JudgeReply, str | None]:
    """Records of all ``questions`` asked in one request, the reply, and why the reply was
    rejected (None when it was read): a reply that left out some of them is rejected too."""
    records, reply, reading = await _ask_batched_reading(cfg, questions, cache_group=cache_group)
    return records, reply, reading.rejected or omission(reading.missing, len(questions))


async def _ask_batched_reading(cfg: JudgeConfig, questions: Sequence[Question], *,
                               cache_group: str | None = None
                               ) -> tuple[list[dict[str, Any]], JudgeReply, BatchReading]:
    judge = get_judge(cfg)
    count = len(questions)

    def yields_verdict(text: str) -> bool:
        reading = read_batch_reply(text, count)
        return reading.rejected is None and not reading.missing and any(
            _answer_verdict(v) is not Verdict.UNKNOWN for v in reading.answers.values())

    reply = await judge.complete(batch_task([q.text for q in questions]), system=JUDGE_SYSTEM,
                                 prompt_prefix=material_prefix(_union_blocks(questions)),
                                 cache_group=cache_group, json_mode=True,
                                 json_schema=batch_schema(count), sample_index=0,
                                 accept=yields_verdict)
    reading = read_batch_reply(reply.text, count)
    records = []
    for ident, question in enumerate(questions, start=1):
        value = reading.answers.get(ident)
        raw = json.dumps(value, ensure_ascii=False) if ident in reading.answers else ""
        records.append(_record(question, _answer_verdict(value), raw, reply.cached))
    return records, reply, reading


def unknown_note(unknown: int, total: int) -> str:
    return f"{unknown} of {total} question(s) UNKNOWN — excluded from score denominator"


@dataclass
class QAGOutcome:
    score: float
    details: dict[str, Any]
    token_usage: TokenUsage | None


async def run_qag(owner: str, cfg: JudgeConfig, questions: Sequence[Question], *,
                  batch: bool = False, cache_group: str | None = None) -> QAGOutcome:
    """Ask ``questions`` and score them; raises JudgeUnavailable when no verdict is readable."""
    if not questions:
        raise ValueError(f"{owner}: no questions to ask")
    batch_reply = None
    rejected = None
    if batch:
        records, batch_reply, rejected = await ask_batched(cfg, questions,
                                                           cache_group=cache_group)
        replies = [batch_reply]
    else:
        records, replies = await ask_each(cfg, questions, cache_group=cache_group)
    return score_records(owner, cfg, records, replies,
                         mode="batched" if batch else "per_question", batch_reply=batch_reply,
                         rejected=rejected)


# A member's part of a case-level batch: (records, the usage this evaluator is charged, the
# member's reply, why it was rejected or None).
MemberCaseAnswer = Callable[[JudgeConfig], Awaitable[tuple[list[dict[str, Any]], TokenUsage,
                                                           JudgeReply, str | None]]]


async def ask_panel_questions(owner: str, panel: JudgePanel, questions: Sequence[Question], *,
                              batch: bool = False, cache_group: str | None = None,
                              case_answer: MemberCaseAnswer | None = None
                              ) -> tuple[list[dict[str, Any]], PanelAnswers[Any]]:
    """Every member asks ``questions`` as one judge would; each question's record holds the
    panel's vote (ties UNKNOWN) and each member's verdict. A question fewer than the quorum
    answered is UNKNOWN; a member with no readable verdict has not answered, and fewer members
    than the quorum answering raise JudgeUnavailable (a JUDGE_ERROR). ``case_answer``: each
    member's answer comes from its case-level batch (``batch="case"``) instead."""
    async def ask(cfg: JudgeConfig) -> tuple[list[dict[str, Any]], TokenUsage]:
        rejected = None
        if case_answer is not None:
            records, usage, reply, rejected = await case_answer(cfg)
            replies = [reply]
        elif batch:
            records, reply, rejected = await ask_batched(cfg, questions, cache_group=cache_group)
            replies = [reply]
        else:
            records, replies = await ask_each(cfg, questions, cache_group=cache_group)
        if case_answer is None:
            usage = TokenUsage.total([r.usage for r in replies]) or TokenUsage()
        problem = None
        if rejected is not None:  # a copied example or an echo: this member did not answer
            problem = f"batched judge reply rejected: {rejected}"
        elif all(r["matched"] is None for r in records):  # a member that gave no verdict at all
            problem = f"every verdict of {len(records)} question(s) was unparseable"
        if problem is not None:
            error = unreadable_replies(replies, problem, owner=owner)
            error.token_usage = usage
            raise error
        return records, usage

    answers = await ask_panel(owner, panel, ask)
    quorum = panel.effective_quorum
    records = []
    for index, question in enumerate(questions):
        votes = {m.label: Verdict[m.answer[index]["verdict"].upper()]
                 for m in answers.answered if m.answer is not None}
        counted = [(v, m.weight) for m in answers.answered
                   if (v := votes[m.label]) is not Verdict.UNKNOWN]
        verdict = (vote([v for v, _ in counted], [w for _, w in counted])
                   if len(counted) >= quorum else Verdict.UNKNOWN)
        record = _record(question, verdict, "", all(m.answer[index]["cached"]
                                                    for m in answers.answered if m.answer))
        record["judges"] = {m.label: (_verdict_word(votes[m.label]) if m.label in votes
                                      else None) for m in answers.members}
        record["judge_replies"] = {m.label: m.answer[index]["raw_reply"]
                                   for m in answers.answered if m.answer is not None}
        record["judges_answered"] = len(counted)
        records.append(record)
    return records, answers


async def run_panel_qag(owner: str, panel: JudgePanel, questions: Sequence[Question], *,
                        batch: bool = False, cache_group: str | None = None,
                        case_answer: MemberCaseAnswer | None = None) -> QAGOutcome:
    """The QAG score of the panel's votes (see ask_panel_questions)."""
    if not questions:
        raise ValueError(f"{owner}: no questions to ask")
    records, answers = await ask_panel_questions(owner, panel, questions, batch=batch,
                                                 cache_group=cache_group,
                                                 case_answer=case_answer)
    summary = answers.summary()
    if all(r["matched"] is None for r in records):
        error = JudgeUnavailable(f"{owner}: the judge panel reached no verdict on any of "
                                 f"{len(records)} question(s) (ties, or fewer than "
                                 f"{panel.effective_quorum} readable votes)",
                                 details={"panel": summary})
        error.token_usage = answers.usage
        raise error
    for member, entry in zip(answers.members, summary["members"]):
        if member.answer is not None:
            entry["score"] = member_qag_score(member.answer)
    first = answers.members[0].config
    mode = ("panel_case_batched" if case_answer is not None else "panel_batched" if batch
            else "panel_per_question")
    outcome = score_records(owner, first, records, [], usage=answers.usage, mode=mode)
    outcome.details.update(judge_provider=PANEL,
                           judge_model=", ".join(m.label for m in answers.members),
                           panel=summary)
    return outcome


def member_qag_score(records: Sequence[dict[str, Any]]) -> float | None:
    """The score one panel member's own verdicts give, as that judge alone would score the
    case (None where it alone would have no score), so calibration can set each member beside
    the panel."""
    answered = [r for r in records if r["matched"] is not None]
    if len(answered) < answers_needed(len(records)):
        return None
    return sum(1 for r in answered if r["matched"]) / len(answered)


def score_records(owner: str, cfg: JudgeConfig, records: list[dict[str, Any]],
                  replies: Sequence[JudgeReply], *, mode: str,
                  batch_reply: JudgeReply | None = None,
                  usage: TokenUsage | None = None, rejected: str | None = None) -> QAGOutcome:
    """The QAG score of answered questions; JudgeUnavailable when fewer than
    ``answers_needed`` have a verdict, or when the batched reply was ``rejected`` whole.

    ``usage`` is what this evaluator is charged, by default what ``replies`` cost (a case-level
    batch charges its one request to one evaluator only).
    """
    if usage is None:
        usage = TokenUsage.total([r.usage for r in replies])
    total = len(records)
    unknown = sum(1 for r in records if r["matched"] is None)
    answered = total - unknown
    needed = answers_needed(total)
    problem = None
    if rejected is not None:
        problem = f"batched judge reply rejected, so the case has no score: {rejected}"
    elif unknown == total:
        # Worded as the multivon-style API words it ("no parseable Yes/No verdict").
        problem = (f"every judge verdict was unparseable: the judge returned no parseable "
                   f"Yes/No verdict for any of {total} question(s) ({total} of {total} "
                   "question(s) UNKNOWN), so the case has no score")
    elif answered < needed:
        problem = (f"insufficient verdict coverage: only {answered} of {total} question(s) "
                   f"answered ({unknown} UNKNOWN); a score needs verdicts on at least {needed}")
    if problem is not None:
        error = unreadable_replies(replies, problem, owner=owner)
        if "truncated at max_tokens" in str(error):
            # The cut-off reply is named first; how many questions were answered still counts.
            error.args = (f"{error}; {answered} of {total} question(s) answered",)
        error.token_usage = usage
        error.details.update(answered=answered, asked=total, questions=records)
        raise error
    matched = sum(1 for r in records if r["matched"])
    score = matched / answered
    reason = f"{matched} of {answered} question(s) answered as expected"
    missed = [r for r in records if r["matched"] is False]
    if missed:
        # The questions themselves say what went wrong; the first two keep the line readable.
        shown = "; ".join(f"{r['question']} (expected {r['expected']}, judge said {r['verdict']})"
                          for r in missed[:MISSED_SHOWN])
        more = f"; and {len(missed) - MISSED_SHOWN} more" if len(missed) > MISSED_SHOWN else ""
        reason += f". Missed: {shown}{more}"
    if unknown:
        reason += f"; {unknown_note(unknown, total)}"
    details: dict[str, Any] = {
        "reason": reason,
        "questions": records,
        "matched": matched,
        "answered": answered,
        "unknown": unknown,
        "mode": mode,
        "judge_provider": cfg.provider,
        "judge_model": cfg.model,
    }
    if batch_reply is not None:
        details["batch_reply"] = reply_evidence(batch_reply.text)
    return QAGOutcome(score=score, details=details, token_usage=usage)


class JudgeEvaluator(MultivonSurface, JudgedCriterionBase, BaseCriterion):
    """An EvalSuite-style evaluator: its judge resolved in layers (judge= > configure() >
    environment > default), effective threshold, result building."""

    name = "judge_evaluator"
    default_threshold = 0.7
    uses_llm_judge = True
    # Set on the evaluators the multivon-style API calibrates per judge model.
    calibration_key: str | None = None

    def __init__(self, threshold: float | str | None = None,
                 judge: JudgeConfig | JudgePanel | JudgeCascade | list[JudgeConfig] | None = None
                 ) -> None:
        # threshold="calibrated": the calibration file's entry for this evaluator, judge and
        # question set, and an error when there is none (a silent fallback would hide it).
        self._calibration_required = threshold == CALIBRATED
        self._explicit_threshold = check_threshold(
            type(self).__name__, None if self._calibration_required else threshold)  # type: ignore[arg-type]
        self.judge = check_judge_or_cascade(type(self).__name__, judge)
        super().__init__(threshold=self._explicit_threshold
                         if self._explicit_threshold is not None else self.default_threshold)

    def look_up_judge(self) -> JudgeBinding:
        """``judge=``'s judge or panel, else ``configure()``'s, else the environment's, else
        the default."""
        return bind_in_layers(self.judge)

    def judge_config(self) -> JudgeConfig:
        """The one judge; with a panel, its first member (for one-judge work such as writing a
        CheckEvaluator's questions; scoring asks every member)."""
        return self._first_judge(self.judge_binding())

    def _first_judge(self, binding: JudgeBinding) -> JudgeConfig:
        if binding.first is None:
            raise JudgeUnavailable(f"{self.name}: no provider can serve judge model "
                                   f"{binding.unreachable_model!r}")
        return binding.first

    def question_set(self) -> str:
        """Identifies the questions this evaluator asks; a calibration holds for that set only."""
        return NO_QUESTION_SET

    @property
    def calibration_required(self) -> bool:
        """Whether ``threshold="calibrated"`` was asked for (a calibration-file entry must exist)."""
        return self._calibration_required

    def calibration_entry(self, cfg: JudgeConfig) -> CalibrationEntry | None:
        """The calibration-file entry that sets this evaluator's threshold for judge ``cfg``.

        Consulted with ``threshold="calibrated"`` (the entry must exist) or when
        $REFEREE_CALIBRATION_FILE names a file (an entry, when there is one, wins over the
        built-in table); never when ``threshold=`` is a number.
        """
        if self._explicit_threshold is not None:
            return None
        if self.judge_now().panel is not None:
            if self._calibration_required:
                raise ValueError(f"{type(self).__name__}: threshold='calibrated' holds for one "
                                 "judge model; a judge panel needs a numeric threshold")
            return None
        if not self._calibration_required and not calibration_file_configured():
            return None  # no file to consult: the question-set digest need not be worked out
        return file_threshold(self.name, cfg.provider, cfg.model, self.question_set(),
                              required=self._calibration_required)

    def threshold_for(self, cfg: JudgeConfig) -> float:
        if self._explicit_threshold is not None:
            return self._explicit_threshold
        entry = self.calibration_entry(cfg)
        if entry is not None:
            return entry.threshold
        if self.judge_now().panel is not None:
            return self.default_threshold  # calibrated thresholds are per judge model
        if self.calibration_key is not None:
            return calibrated_threshold(self.calibration_key, cfg.model)
        return self.default_threshold

    @property
    def threshold(self) -> float:
        """The effective threshold: explicit, else a calibration file's, else the built-in
        calibrated one for the resolved judge, else the default."""
        if self._explicit_threshold is not None:
            return self._explicit_threshold
        if (self.calibration_key is None and not self._calibration_required
                and not calibration_file_configured()):
            return self.default_threshold  # nothing depends on the judge: no need to resolve it
        return self.threshold_for(self._first_judge(self.judge_now()))

    @threshold.setter
    def threshold(self, value: float) -> None:
        if value == CALIBRATED:
            self._calibration_required, self._explicit_threshold = True, None
            return
        checked = check_threshold(type(self).__name__, value)
        if checked is None:
            raise ValueError(f"{type(self).__name__}: threshold cannot be set to None")
        self._calibration_required = False
        self._explicit_threshold = checked
        self.config = self.config.model_copy(update={"threshold": checked})

    def _scored(self, cfg: JudgeConfig, score: float, details: dict[str, Any],
                token_usage: TokenUsage | None) -> CriterionResult:
        entry = self.calibration_entry(cfg)
        threshold = entry.threshold if entry is not None else self.threshold_for(cfg)
        if entry is not None:
            details.setdefault("threshold_source", "calibration_file")
            details.setdefault("calibration", {
                "file": str(calibration_file_path()), "n": entry.n, "date": entry.date,
                "data_fingerprint": entry.data_fingerprint, "metric": entry.metric,
                **({"fit_problem": entry.fit_problem} if entry.fit_problem else {})})
        elif self.calibration_key is not None:
            details.setdefault("threshold_source", self._threshold_source(cfg))
        return CriterionResult(criterion=self.name, score=score, passed=score >= threshold,
                               threshold=threshold, details=details, token_usage=token_usage)

    def _threshold_source(self, cfg: JudgeConfig) -> str:
        """"explicit", "default" (a panel has no calibrated row), "calibrated" (the built-in
        table's row measured for this judge model) or "uncalibrated_default" (no row for it:
        the table's "Other models" fallback)."""
        if self._explicit_threshold is not None:
            return "explicit"
        if self.judge_now().panel is not None:
            return "default"
        return "calibrated" if calibration_row(cfg.model) is not None else "uncalibrated_default"


class QAGEvaluator(JudgeEvaluator):
    """An evaluator whose score is the QAG fraction over the questions it asks."""

    # Case fields (context, expected_output, input) without which a case is skipped, not judged.
    required_fields: tuple[str, ...] = ()

    def __init__(self, threshold: float | str | None = None,
                 judge: JudgeConfig | JudgePanel | JudgeCascade | list[JudgeConfig] | None = None,
                 *, batch: bool | str = False) -> None:
        super().__init__(threshold=threshold, judge=judge)
        self.batch = check_batch(type(self).__name__, batch)

    def question_set(self) -> str:
        """A digest of the question texts (and the answer each expects), in order.

        Built-in evaluators ask the same questions of every case, so a probe case with every
        field filled shows them; a CheckEvaluator's are known once prepare() has made them.
        """
        probe = EvalCase(input="-", expected_output="-", context="-")
        questions = self.questions(ExecutionResult(actual_response="-"), probe)
        text = json.dumps([[q.text, q.expect_yes] for q in questions], ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def missing_input(self, actual: ExecutionResult, expected: EvalCase) -> str | None:
        """Why this case cannot be scored (naming the missing field), or None."""
        if not self.required_fields:
            return None
        return requires(type(self).__name__, expected, *self.required_fields)

    @abstractmethod
    def questions(self, actual: ExecutionResult, expected: EvalCase) -> list[Question]:
        """The questions to ask about this case."""

    def extra_details(self, actual: ExecutionResult, expected: EvalCase) -> dict[str, Any]:
        return {}

    async def evaluate(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        missing = self.missing_input(actual, expected)
        if missing is not None:
            return self._skipped(missing)
        cfg = self.judge_config()
        scope = CURRENT_CASE.get()
        panel = self.judge_panel()
        if panel is not None:
            case_answer = None
            if self.batch == CASE_BATCH and scope is not None:
                # Each member asks once per case for every batch="case" evaluator of this panel.
                case_answer = _member_case_answer(self, panel, actual, expected, scope.shared,
                                                  scope.criteria)
            outcome = await run_panel_qag(self.name, panel, self.questions(actual, expected),
                                          batch=bool(self.batch),
                                          cache_group=case_cache_group(expected),
                                          case_answer=case_answer)
        elif self.batch == CASE_BATCH and scope is not None:
            outcome = await _case_batched(self, cfg, actual, expected, scope.shared, scope.criteria)
        else:
            outcome = await run_qag(self.name, cfg, self.questions(actual, expected),
                                    batch=bool(self.batch), cache_group=case_cache_group(expected))
        details = outcome.details
        extra = self.extra_details(actual, expected)
        details.update(extra)
        if extra.get("note"):
            details["reason"] = f"{details['reason']}; {extra['note']}"
        return self._scored(cfg, outcome.score, details, outcome.token_usage)


CASE_BATCH = "case"


def check_batch(owner: str, batch: Any) -> bool | str:
    """``False`` (a request per question), ``True`` (per evaluator) or ``"case"``."""
    if isinstance(batch, bool):
        return batch
    if batch == CASE_BATCH:
        return CASE_BATCH
    raise ValueError(f"{owner}: batch must be False, True or 'case', got {batch!r}")


def _judge_identity(cfg: JudgeConfig) -> tuple[Any, ...]:
    return (cfg.provider, cfg.model, cfg.base_url, cfg.api_style, cfg.effective_temperature,
            cfg.effective_max_tokens)


# One evaluator's share of a case-level batch: its records, the usage it is charged, the
# shared reply, and the evaluators that reply served.
_CaseAnswer = tuple[list[dict[str, Any]], TokenUsage, JudgeReply, list[str], str | None]


async def _case_batched(evaluator: QAGEvaluator, cfg: JudgeConfig, actual: ExecutionResult,
                        expected: EvalCase, shared: dict[Any, Any],
                        criteria: Sequence[Any]) -> QAGOutcome:
    """Case-level batch: one request per case for all ``batch="case"`` evaluators that use the
    same judge, over the union of their material; each evaluator then scores its own questions.

    The first of them to run asks for all; the others wait for its answer. The request's usage
    is counted once, on the first evaluator (``details["case_batch"]`` names the evaluators it
    served).
    """
    identity = _judge_identity(cfg)

    def joins(criterion: QAGEvaluator) -> bool:
        return (criterion.judge_panel() is None
                and _judge_identity(criterion.judge_config()) == identity)

    records, usage, reply, served, rejected = await _case_answer(
        ("qag-case-batch", identity), evaluator, cfg, actual, expected, shared, criteria, joins)
    outcome = score_records(evaluator.name, cfg, records, [reply], mode="case_batched",
                            batch_reply=reply, usage=usage, rejected=rejected)
    outcome.details["case_batch"] = served
    return outcome


def _member_case_answer(evaluator: QAGEvaluator, panel: JudgePanel, actual: ExecutionResult,
                        expected: EvalCase, shared: dict[Any, Any],
                        criteria: Sequence[Any]) -> MemberCaseAnswer:
    """Each member's part of its case-level request, shared by every ``batch="case"``
    evaluator judged by the same members (a request per member per case)."""
    panel_identity = tuple(_judge_identity(m) for m in panel.members)

    def joins(criterion: QAGEvaluator) -> bool:
        other = criterion.judge_panel()
        return other is not None and tuple(
            _judge_identity(m) for m in other.members) == panel_identity

    async def answer(cfg: JudgeConfig) -> tuple[list[dict[str, Any]], TokenUsage, JudgeReply,
                                                str | None]:
        key = ("qag-case-batch-panel", panel_identity, _judge_identity(cfg))
        records, usage, reply, _, rejected = await _case_answer(
            key, evaluator, cfg, actual, expected, shared, criteria, joins)
        return records, usage, reply, rejected

    return answer


async def _case_answer(key: tuple[Any, ...], evaluator: QAGEvaluator, cfg: JudgeConfig,
                       actual: ExecutionResult, expected: EvalCase, shared: dict[Any, Any],
                       criteria: Sequence[Any],
                       joins: Callable[[QAGEvaluator], bool]) -> _CaseAnswer:
    """``evaluator``'s share of the case-level request ``key`` names: the first evaluator to
    come asks judge ``cfg`` for every evaluator that ``joins``; the others wait for it."""
    work = shared.get(key)
    if work is None:
        work = shared[key] = asyncio.get_running_loop().create_future()
        try:
            work.set_result(await _ask_case(cfg, actual, expected, criteria, joins))
        except BaseException as exc:
            work.set_exception(exc)
            work.exception()  # retrieved here too, so an unshared failure is not "never retrieved"
            raise
    answers: dict[int, _CaseAnswer] = await asyncio.shield(work)
    if id(evaluator) not in answers:
        raise ValueError(f"{evaluator.name}: no questions to ask")
    return answers[id(evaluator)]


async def _ask_case(cfg: JudgeConfig, actual: ExecutionResult, expected: EvalCase,
                    criteria: Sequence[Any],
                    joins: Callable[[QAGEvaluator], bool]) -> dict[int, _CaseAnswer]:
    members: list[tuple[QAGEvaluator, list[Question]]] = []
    for criterion in criteria:
        if (not isinstance(criterion, QAGEvaluator) or criterion.batch != CASE_BATCH
                or criterion.missing_input(actual, expected) is not None
                or not joins(criterion)):
            continue
        questions = criterion.questions(actual, expected)
        if questions:
            members.append((criterion, questions))
    # One request shows the union of the material (ask_batched): Relevance's questions then
    # see the context too. That trade-off is an open question (docs/judge.md).
    asked = [q for _, questions in members for q in questions]
    records, reply, reading = await _ask_batched_reading(cfg, asked,
                                                         cache_group=case_cache_group(expected))
    served = [member.name for member, _ in members]
    answers: dict[int, _CaseAnswer] = {}
    start = 0
    for position, (member, questions) in enumerate(members):
        # An evaluator whose ids the reply left out has no answer; the others keep theirs.
        own_missing = [i - start for i in reading.missing if start < i <= start + len(questions)]
        rejected = reading.rejected or omission(own_missing, len(questions))
        answers[id(member)] = (records[start:start + len(questions)],
                               reply.usage if position == 0 else TokenUsage(), reply, served,
                               rejected)
        start += len(questions)
    return answers


# Data blocks every evaluator draws from: one label per kind of material, so questions can name it.

def output_block(actual: ExecutionResult, label: str = "MODEL OUTPUT") -> DataBlock:
    return DataBlock(label, actual.actual_response or "")


def input_block(expected: EvalCase) -> DataBlock:
    return DataBlock("USER INPUT", expected.input_text)


def context_block(expected: EvalCase, label: str = "CONTEXT") -> DataBlock:
    return DataBlock(label, expected.context_text)


def reference_block(expected: EvalCase) -> DataBlock:
    return DataBlock("REFERENCE ANSWER", expected.expected_output or "")


def requires(evaluator: str, expected: EvalCase, *fields: str) -> str | None:
    """Skip reason naming every required case field that is missing or empty."""
    present = {
        "context": bool(expected.context_chunks),
        "expected_output": bool((expected.expected_output or "").strip()),
        "input": bool(expected.input_text.strip()),
    }
    missing = [f for f in fields if not present[f]]
    if not missing:
        return None
    names = " and ".join(f"`{f}`" for f in missing)
    return f"{evaluator} requires {names} on the EvalCase; this case has none — skipped, not scored"


def case_blocks(actual: ExecutionResult, expected: EvalCase) -> tuple[DataBlock, ...]:
    """Input, context when the case has one, and output: the material of user-written checks."""
    blocks = [input_block(expected)]
    if expected.context_chunks:
        blocks.append(context_block(expected))
    blocks.append(output_block(actual))
    return tuple(blocks)
