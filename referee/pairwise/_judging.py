"""One pairwise judgement: which of two outputs for the same case better meets a criterion.

Both orders are asked by default (A shown first, then B shown first), each as its own judge
request, so each ordered pair has its own reply-cache entry. A verdict stands only when it
survives the swap; one that changes with the order is a tie and is marked position-inconsistent
(MT-Bench's rule). A reply that names no winner is never read as a preference: the pair is a
judge error (``JudgeUnavailable``), as an unreachable judge is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from referee.config import Rubric
from referee.evaluators.prompts import JUDGE_SYSTEM, DataBlock, material_prefix
from referee.evaluators.qag import gather_all
from referee.judge import (
    JudgeConfig,
    JudgeReply,
    get_judge,
    parse_json_object,
    reply_reason,
    unreadable_replies,
)
from referee.judge.panel import PANEL, JudgePanel, ask_panel, judges_answered, panel_model_name
from referee.pairwise._media import PairMedia
from referee.usage import TokenUsage

Preference = Literal["a", "b", "tie"]

_FIRST, _SECOND = "RESPONSE 1", "RESPONSE 2"

_WINNER_WORDS = {"1": "1", "2": "2", "tie": "tie", "response 1": "1", "response 2": "2",
                 "equal": "tie", "both": "tie", "neither": "tie"}


@dataclass(frozen=True)
class PairCriterion:
    """What the judge compares the two outputs on: a free-text criterion and/or a rubric (one
    question per order), or a QAG question set (each question asked in each order)."""

    text: str = ""
    rubric: tuple[str, ...] = ()
    questions: tuple[str, ...] = ()

    @classmethod
    def of(cls, criterion: str | None, rubric: Sequence[str | Rubric] | None = None,
           questions: Sequence[str] | None = None, *, owner: str = "pairwise") -> PairCriterion:
        if criterion is not None and not isinstance(criterion, str):
            raise TypeError(f"{owner}: criterion must be a string, got {type(criterion).__name__}")
        text = (criterion or "").strip()
        items = _texts(owner, "rubric", [r.content if isinstance(r, Rubric) else r
                                          for r in rubric or ()])
        asked = _texts(owner, "questions", list(questions or ()))
        if asked and (text or items):
            raise ValueError(f"{owner}: give questions, or a criterion and/or rubric, not both")
        if not (text or items or asked):
            raise ValueError(f"{owner}: give a criterion (free text), a rubric or questions to "
                             "compare on")
        return cls(text=text, rubric=tuple(items), questions=tuple(asked))

    def render(self) -> str:
        if self.questions:
            return "Questions:\n" + "\n".join(f"- {q}" for q in self.questions)
        parts = [f"Criterion:\n{self.text}"] if self.text else []
        if self.rubric:
            listed = "\n".join(f"- {item}" for item in self.rubric)
            parts.append(f"Rubric (every item counts):\n{listed}")
        return "\n\n".join(parts)

    def tasks(self) -> list[tuple[str | None, str]]:
        """(question or None, the task text) of each request per order."""
        if self.questions:
            return [(q, question_pair_task(q)) for q in self.questions]
        return [(None, pair_task(self))]

    def to_dict(self) -> dict[str, Any]:
        return {"criterion": self.text, "rubric": list(self.rubric),
                "questions": list(self.questions)}


def _texts(owner: str, name: str, values: list[Any]) -> list[str]:
    for i, value in enumerate(values):
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{owner}: {name}[{i}] must be a non-empty string, got {value!r}")
    return [v.strip() for v in values]


_REPLY_FORMAT = ('Reply with a JSON object only: {"reason": "<one or two sentences>", '
                 '"winner": "1", "2" or "tie"}.')


def pair_task(criterion: PairCriterion) -> str:
    return (
        f"{criterion.render()}\n\n"
        f"Two responses to the same user input are shown above, {_FIRST} and {_SECOND}. Which "
        "one better meets the criterion? Judge what they say, not the order in which they are "
        "shown, and not their length unless the criterion asks for it. Answer \"tie\" only "
        f"when neither is better.\n{_REPLY_FORMAT}"
    )


def question_pair_task(question: str) -> str:
    return (
        f"Question: {question}\n\n"
        f"Two responses to the same user input are shown above, {_FIRST} and {_SECOND}. For "
        "which one is the answer to this question yes? Answer \"tie\" when it is yes for both "
        f"or for neither. Judge what they say, not the order in which they are shown.\n"
        f"{_REPLY_FORMAT}"
    )


def read_winner(text: str) -> tuple[str | None, str]:
    """The winner a reply names ("1", "2" or "tie", None when it names none) and its reason."""
    try:
        data = parse_json_object(text, ("winner",))
    except ValueError:
        return None, ""
    reason = reply_reason(data)
    value = data.get("winner")
    if isinstance(value, bool) or value is None:
        return None, reason
    return _WINNER_WORDS.get(str(value).strip().lower()), reason


def _names_winner(text: str) -> bool:
    return read_winner(text)[0] is not None


@dataclass(frozen=True)
class OrderedVerdict:
    """The judge's answer for one order of the pair."""

    first: Literal["a", "b"]  # which output was shown as RESPONSE 1
    preferred: Preference
    reason: str
    raw_reply: str
    cached: bool
    question: str | None = None  # with a question set: the question asked
    judge: str | None = None  # with a judge panel: the member that answered

    def to_dict(self) -> dict[str, Any]:
        return {"shown_first": self.first, "preferred": self.preferred, "reason": self.reason,
                "raw_reply": self.raw_reply, "cached": self.cached, "question": self.question,
                **({"judge": self.judge} if self.judge is not None else {})}


@dataclass(frozen=True)
class MemberPairVerdict:
    """One panel member's verdict on a pair (after its own swap), or why it gave none."""

    judge: str  # provider:model, as the panel names it
    provider: str
    model: str
    weight: float
    preferred: Preference | None  # None: this member did not answer
    position_consistent: bool | None
    reason: str
    token_usage: TokenUsage
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"judge": self.judge, "provider": self.provider, "model": self.model,
                "weight": self.weight, "preferred": self.preferred,
                "position_consistent": self.position_consistent, "reason": self.reason,
                "error": self.error, "token_usage": self.token_usage.model_dump()}


@dataclass(frozen=True)
class PairVerdict:
    """The pair's outcome after the swap, with the judge's answer for each order (and each
    question of a question set).

    ``position_consistent`` is False when a verdict (on any question) flipped with the order,
    None when only one order was asked (nothing to check it with).
    """

    preferred: Preference
    position_consistent: bool | None
    reason: str
    orders: tuple[OrderedVerdict, ...]
    token_usage: TokenUsage
    judge_provider: str
    judge_model: str
    # With a judge panel: each member's verdict (the pair's is their majority).
    members: tuple[MemberPairVerdict, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"preferred": self.preferred, "position_consistent": self.position_consistent,
                "reason": self.reason, "orders": [o.to_dict() for o in self.orders],
                "judge_provider": self.judge_provider, "judge_model": self.judge_model,
                "token_usage": self.token_usage.model_dump(),
                **({"judges": [m.to_dict() for m in self.members]} if self.members else {})}


def _blocks(first: str, second: str, user_input: str | None,
            reference: str | None) -> list[DataBlock]:
    blocks = []
    if user_input:
        blocks.append(DataBlock("USER INPUT", user_input))
    if reference:
        blocks.append(DataBlock("REFERENCE ANSWER", reference))
    return [*blocks, DataBlock(_FIRST, first), DataBlock(_SECOND, second)]


def _ordered(first: Literal["a", "b"], reply: JudgeReply, question: str | None) -> OrderedVerdict:
    winner, reason = read_winner(reply.text)
    if winner == "tie":
        preferred: Preference = "tie"
    else:
        shown_first = winner == "1"
        preferred = first if shown_first else ("b" if first == "a" else "a")
    return OrderedVerdict(first=first, preferred=preferred, reason=reason,
                          raw_reply=reply.excerpt, cached=reply.cached, question=question)


def _combined(orders: Sequence[OrderedVerdict]) -> tuple[Preference, bool | None, str]:
    if len(orders) == 1:
        return orders[0].preferred, None, orders[0].reason
    if len({o.preferred for o in orders}) == 1:
        return orders[0].preferred, True, orders[0].reason
    said = ", ".join(f"{o.preferred.upper() if o.preferred != 'tie' else 'tie'} with "
                     f"{o.first.upper()} shown first" for o in orders)
    return "tie", False, f"position-inconsistent ({said}), counted as a tie"


def identical(output_a: str, output_b: str, media: PairMedia | None) -> bool:
    """Two outputs that say the same and hold the same images and PDFs (by content)."""
    return output_a == output_b and (media is None or media.keys("a") == media.keys("b"))


async def judge_pair(cfg: JudgeConfig, criterion: PairCriterion, *, output_a: str,
                     output_b: str, user_input: str | None = None,
                     reference: str | None = None, both_orders: bool = True,
                     cache_group: str | None = None, owner: str = "pairwise",
                     media: PairMedia | None = None) -> PairVerdict:
    """Ask the judge which output better meets ``criterion``; raises JudgeUnavailable when the
    judge cannot be reached or a reply names no winner (never a preference then).

    ``media`` (the case's and each output's images and PDFs) is shown with each request, each
    output's under the name it is shown as, so a swapped order swaps them too."""
    if identical(output_a, output_b, media):
        # Identical outputs are a tie by construction; asking would only measure position bias.
        return PairVerdict("tie", True, "identical outputs", (), TokenUsage(),
                           cfg.provider, cfg.model)
    media = media or PairMedia()
    judge = get_judge(cfg)
    shown: list[tuple[Literal["a", "b"], str, str]] = [("a", output_a, output_b)]
    if both_orders:
        shown.append(("b", output_b, output_a))
    asked = [(question, task, index, order) for index, (question, task)
             in enumerate(criterion.tasks()) for order in shown]
    # Each ordered pair (and question) is its own request, so its own reply-cache entry.
    # The parts are always named (none is an empty list), so a pair judged while a case is
    # scored never gets the case's parts unlabelled from its judging scope.
    replies = await gather_all([
        judge.complete(task, system=JUDGE_SYSTEM, json_mode=True, sample_index=index,
                       prompt_prefix=material_prefix(_blocks(first, second, user_input,
                                                             reference)),
                       cache_group=cache_group, accept=_names_winner,
                       parts=media.parts(shown_first, (_FIRST, _SECOND)))
        for _, task, index, (shown_first, first, second) in asked])
    usage = TokenUsage.total([r.usage for r in replies]) or TokenUsage()
    unreadable = [r for r in replies if not _names_winner(r.text)]
    if unreadable:
        error = unreadable_replies(
            unreadable, f"{len(unreadable)} of {len(replies)} judge repl(ies) named no winner "
            '("1", "2" or "tie"), so the pair has no verdict', owner=owner)
        error.token_usage = usage
        raise error
    orders = tuple(_ordered(order[0], reply, question)
                   for (question, _, _, order), reply in zip(asked, replies))
    if not criterion.questions:
        preferred, consistent, reason = _combined(orders)
    else:
        preferred, consistent, reason = _tallied(orders, len(shown))
    return PairVerdict(preferred, consistent, reason, orders, usage, cfg.provider, cfg.model)


def _tallied(orders: Sequence[OrderedVerdict],
             per_question: int) -> tuple[Preference, bool | None, str]:
    """A question set's verdict: the side that wins more questions (each after its swap)."""
    verdicts = [_combined(orders[i:i + per_question])
                for i in range(0, len(orders), per_question)]
    won = {side: sum(1 for v in verdicts if v[0] == side) for side in ("a", "b", "tie")}
    flipped = sum(1 for v in verdicts if v[1] is False)
    preferred: Preference = ("b" if won["b"] > won["a"] else "a" if won["a"] > won["b"]
                             else "tie")
    reason = (f"B better on {won['b']}, A on {won['a']}, tie on {won['tie']} of "
              f"{len(verdicts)} question(s)")
    if flipped:
        reason += f"; {flipped} flipped with the order (counted as ties)"
    consistent = None if per_question == 1 else not flipped
    return preferred, consistent, reason


async def judge_pair_by_panel(panel: JudgePanel, criterion: PairCriterion, *, output_a: str,
                              output_b: str, user_input: str | None = None,
                              reference: str | None = None, both_orders: bool = True,
                              cache_group: str | None = None, owner: str = "pairwise",
                              members: Sequence[JudgeConfig] | None = None,
                              media: PairMedia | None = None) -> PairVerdict:
    """Every member judges the pair as one judge would (both orders, its own swap rule); the
    pair's verdict is the members' (weighted) majority among A, B and tie, a tie when no
    verdict has the most votes. Position-inconsistent when any member's verdict flipped with
    the order. JudgeUnavailable when fewer members than the quorum gave a verdict."""
    members = list(members) if members is not None else list(panel.members)
    names = panel_model_name(members)
    if identical(output_a, output_b, media):
        return PairVerdict("tie", True, "identical outputs", (), TokenUsage(), PANEL, names)

    async def ask(member: JudgeConfig) -> tuple[PairVerdict, TokenUsage]:
        verdict = await judge_pair(member, criterion, output_a=output_a, output_b=output_b,
                                   user_input=user_input, reference=reference,
                                   both_orders=both_orders, cache_group=cache_group,
                                   owner=owner, media=media)
        return verdict, verdict.token_usage

    answers = await ask_panel(owner, panel, ask, members=members)
    votes: dict[Preference, float] = {"a": 0.0, "b": 0.0, "tie": 0.0}
    for member in answers.answered:
        assert member.answer is not None
        votes[member.answer.preferred] += member.weight
    most = max(votes.values())
    leaders = [side for side, count in votes.items() if count == most]
    preferred: Preference = leaders[0] if len(leaders) == 1 else "tie"
    said = [m.answer for m in answers.answered if m.answer is not None]
    consistent = (None if all(v.position_consistent is None for v in said)
                  else all(v.position_consistent is not False for v in said))
    shown = {"a": "A", "b": "B", "tie": "tie"}
    who = judges_answered(len(answers.answered), len(answers.members))
    reason = (f"panel: {shown[preferred] if preferred != 'tie' else 'a tie'} "
              f"(votes of {who}: B {votes['b']:g}, A {votes['a']:g}, tie {votes['tie']:g}); "
              + "; ".join(f"{m.label}: {shown[m.answer.preferred]} — {m.answer.reason}"
                          for m in answers.answered if m.answer is not None))
    orders = tuple(replace(order, judge=m.label) for m in answers.answered
                   if m.answer is not None for order in m.answer.orders)
    verdicts = tuple(MemberPairVerdict(
        judge=m.label, provider=m.config.provider, model=m.config.model, weight=m.weight,
        preferred=m.answer.preferred if m.answer is not None else None,
        position_consistent=m.answer.position_consistent if m.answer is not None else None,
        reason=m.answer.reason if m.answer is not None else "", token_usage=m.usage,
        error=str(m.error) if m.error is not None else None) for m in answers.members)
    return PairVerdict(preferred, consistent, reason, orders, answers.usage, PANEL, names,
                       members=verdicts)
