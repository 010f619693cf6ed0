"""Judge panels: several judge models asked the same thing, their answers combined.

One home for the panel's rules, whatever the evaluator asks: each member is called through
``get_judge`` like a single judge (its own endpoint budget, cache, retries and cost); members
run concurrently; a member that fails is counted, never silently dropped; below the quorum the
panel has not judged and ``JudgeUnavailable`` makes the case a JUDGE_ERROR. Verdicts are voted
(majority or weighted, ties are UNKNOWN), numeric scores combined (mean, median, weighted mean).
"""

from __future__ import annotations

import asyncio
import os
import statistics
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from pydantic import Field, field_validator, model_validator

from referee._strict import StrictModel
from referee.errors import JudgeUnavailable
from referee.judge.config import (
    JudgeConfig,
    get_configured,
    resolve_judge_config,
    split_judge_model,
    unknown_provider_message,
)
from referee.judge.verdict import Verdict
from referee.usage import TokenUsage

Aggregate = Literal["majority", "mean", "median", "weighted"]
# What text settings (the environment, the CLI) may choose: a weighted vote needs weights, which
# only Python and criteria files give.
TEXT_AGGREGATES = ("majority", "mean", "median")

T = TypeVar("T")


class JudgePanel(StrictModel):
    """Several judges and how their answers combine.

    ``aggregate``: ``"majority"`` (one vote per member; numeric scores take the median),
    ``"mean"`` / ``"median"`` (numeric scores; verdicts still vote one per member),
    ``"weighted"`` (``weights``, one per member: a weighted vote, a weighted mean of scores).
    ``quorum``: how many members must answer for the panel to judge; by default a majority of
    the members.
    """

    members: list[JudgeConfig] = Field(min_length=2)
    aggregate: Aggregate = "majority"
    weights: list[float] | None = None
    quorum: int | None = None

    @field_validator("weights")
    @classmethod
    def _positive_weights(cls, value: list[float] | None) -> list[float] | None:
        if value is not None and any(not w > 0 for w in value):
            raise ValueError(f"every weight must be a positive number, got {value}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> JudgePanel:
        size = len(self.members)
        if self.weights is not None and len(self.weights) != size:
            raise ValueError(f"weights: one per member expected ({size}), got "
                             f"{len(self.weights)}")
        if self.aggregate == "weighted" and self.weights is None:
            raise ValueError("aggregate='weighted' needs weights=[...], one per member")
        if self.quorum is not None and not 1 <= self.quorum <= size:
            raise ValueError(f"quorum must be between 1 and the number of members ({size}), "
                             f"got {self.quorum}")
        return self

    @property
    def effective_quorum(self) -> int:
        return self.quorum if self.quorum is not None else len(self.members) // 2 + 1

    @property
    def effective_weights(self) -> list[float]:
        if self.aggregate == "weighted" and self.weights is not None:
            return list(self.weights)
        return [1.0] * len(self.members)

    def resolved_members(self) -> list[JudgeConfig]:
        """Each member resolved as a single ``judge=`` would be (environment below it)."""
        return [resolve_judge_config(member) for member in self.members]


def judges_answered(answered: int, members: int) -> str:
    """Whose answers a panel's verdict rests on: "all 3 judges", "2 of 3 judges"."""
    if answered == members:
        return "both judges" if members == 2 else f"all {members} judges"
    return f"{answered} of {members} judges"


def member_labels(members: Sequence[JudgeConfig]) -> list[str]:
    """A name per member for reports: ``provider/model``, as ``--judge`` and JUDGE_PANEL spell
    it, numbered when two share one."""
    plain = [f"{m.provider}/{m.model}" for m in members]
    return [name if plain.count(name) == 1 else f"{name}#{index + 1}"
            for index, name in enumerate(plain)]


# The judge_provider a result or a stored comparison names when a panel judged it; its
# judge_model is then the members' labels (``panel_model_name``).
PANEL = "panel"


def panel_model_name(members: Sequence[JudgeConfig]) -> str:
    """The judge_model a panel's result names: its members' labels, comma-separated."""
    return ", ".join(member_labels(members))


def as_panel(judge: Any) -> JudgePanel | None:
    """The panel ``judge=`` names (a JudgePanel or a list of JudgeConfigs), else None."""
    if isinstance(judge, JudgePanel):
        return judge
    if isinstance(judge, (list, tuple)):
        if not all(isinstance(member, JudgeConfig) for member in judge):
            kinds = sorted({type(m).__name__ for m in judge if not isinstance(m, JudgeConfig)})
            raise TypeError(f"judge=: a panel is a list of JudgeConfig, got {', '.join(kinds)}")
        return JudgePanel(members=list(judge))
    return None


def check_judge(owner: str, judge: Any) -> JudgeConfig | JudgePanel | None:
    """``judge=`` as given: None, a JudgeConfig, or a panel (a JudgePanel or a list)."""
    if judge is None or isinstance(judge, JudgeConfig):
        return judge
    try:
        panel = as_panel(judge)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{owner}: {exc}") from None
    if panel is None:
        raise TypeError(f"{owner}: judge= expects a JudgeConfig, a list of JudgeConfig or a "
                        f"JudgePanel, got {type(judge).__name__}")
    return panel


# configure(panel) stores the panel here; configure(JudgeConfig) or configure(None) clears it.
_configured_panel: JudgePanel | None = None


def set_configured_panel(panel: JudgePanel | None) -> None:
    global _configured_panel
    _configured_panel = panel.model_copy() if panel is not None else None


def get_configured_panel() -> JudgePanel | None:
    return _configured_panel


def judge_members(entries: Sequence[str], source: str) -> list[JudgeConfig]:
    """``PROVIDER/MODEL`` entries (``openai/gpt-4o-mini``) as JudgeConfigs; ``source`` names
    where they came from in the error (``JUDGE_PANEL``, ``--judge``)."""
    members = []
    for entry in entries:
        provider, model = split_judge_model(entry)
        prefix, _, rest = entry.strip().partition("/")
        if provider is None and prefix.strip() and rest.strip():
            raise ValueError(f"{source}: {entry.strip()!r}: {unknown_provider_message(prefix)}")
        if provider is None or "/" not in entry or not model:
            raise ValueError(f"{source}: {entry.strip()!r} is not PROVIDER/MODEL (e.g. "
                             "openai/gpt-4o-mini)")
        members.append(JudgeConfig(provider=provider, model=model))
    return members


def build_panel(members: list[JudgeConfig], aggregate: str | None, quorum: int | None, *,
                source: str) -> JudgePanel:
    """A panel from text settings (environment, CLI); a weighted vote needs weights, which
    only Python and criteria files give."""
    aggregate = aggregate or "majority"
    if aggregate not in TEXT_AGGREGATES:
        raise ValueError(f"{source}: aggregate expected majority, mean or median, got "
                         f"{aggregate!r}")
    try:
        return JudgePanel(members=members, aggregate=aggregate,  # type: ignore[arg-type]
                          quorum=quorum)
    except ValueError as exc:
        first = exc.errors()[0]["msg"] if hasattr(exc, "errors") else str(exc)
        raise ValueError(f"{source}: {str(first).removeprefix('Value error, ')}") from None


def panel_from_env() -> JudgePanel | None:
    """JUDGE_PANEL="openai/gpt-4o-mini,anthropic/claude-haiku-4-5" names a panel from the
    environment (`referee run` included); JUDGE_PANEL_AGGREGATE and JUDGE_PANEL_QUORUM the rest."""
    members_text = os.environ.get("JUDGE_PANEL", "").strip()
    if not members_text:
        return None
    try:
        members = judge_members(members_text.split(","), "JUDGE_PANEL")
    except ValueError as exc:
        raise ValueError(f"{exc}; expected a comma-separated list of them") from None
    aggregate = os.environ.get("JUDGE_PANEL_AGGREGATE", "").strip() or None
    if aggregate is not None and aggregate not in TEXT_AGGREGATES:
        raise ValueError(f"JUDGE_PANEL_AGGREGATE: expected majority, mean or median, got "
                         f"{aggregate!r}")
    quorum_text = os.environ.get("JUDGE_PANEL_QUORUM", "").strip()
    if quorum_text and not quorum_text.isdigit():
        raise ValueError(f"JUDGE_PANEL_QUORUM: expected a whole number, got {quorum_text!r}")
    return build_panel(members, aggregate, int(quorum_text) if quorum_text else None,
                       source="JUDGE_PANEL")


def judge_from_cli(entries: Sequence[str] | None, aggregate: str | None = None,
                   quorum: int | None = None) -> JudgeConfig | JudgePanel | None:
    """What the CLI's ``--judge`` options name: one PROVIDER/MODEL is one judge, the option
    repeated is a panel (``--judge-aggregate`` and ``--judge-quorum`` set its rules)."""
    if not entries:
        if aggregate is not None or quorum is not None:
            raise ValueError("--judge-aggregate and --judge-quorum go with two or more --judge")
        return None
    members = judge_members(entries, "--judge")
    if len(members) == 1:
        if aggregate is not None or quorum is not None:
            raise ValueError("--judge-aggregate and --judge-quorum need a panel: give --judge "
                             "two or more times")
        return members[0]
    return build_panel(members, aggregate, quorum, source="--judge")


def effective_panel(judge: JudgeConfig | JudgePanel | None) -> JudgePanel | None:
    """The panel that judges, in the single judge's order: ``judge=`` > ``configure()`` >
    the environment (JUDGE_PANEL); None when a single judge does."""
    if isinstance(judge, JudgePanel):
        return judge
    if judge is not None:
        return None
    configured = get_configured_panel()
    if configured is not None or get_configured() is not None:
        return configured
    return panel_from_env()


@dataclass
class MemberAnswer(Generic[T]):
    """One member's part: its answer, or the failure that kept it from answering."""

    label: str
    config: JudgeConfig
    weight: float
    answer: T | None = None
    error: JudgeUnavailable | None = None
    usage: TokenUsage = field(default_factory=TokenUsage)

    @property
    def answered(self) -> bool:
        return self.error is None


@dataclass
class PanelAnswers(Generic[T]):
    panel: JudgePanel
    members: list[MemberAnswer[T]]

    @property
    def answered(self) -> list[MemberAnswer[T]]:
        return [m for m in self.members if m.answered]

    @property
    def usage(self) -> TokenUsage:
        return TokenUsage.total([m.usage for m in self.members]) or TokenUsage()

    def summary(self) -> dict[str, Any]:
        """For a result's details: size, quorum, who answered and what each one spent."""
        return {
            "aggregate": self.panel.aggregate,
            "size": len(self.members),
            "answered": len(self.answered),
            "quorum": self.panel.effective_quorum,
            "members": [{"judge": m.label, "provider": m.config.provider,
                         "model": m.config.model, "weight": m.weight, "answered": m.answered,
                         "error": str(m.error) if m.error is not None else None,
                         "token_usage": m.usage.model_dump(mode="json")}
                        for m in self.members],
        }


async def ask_panel(owner: str, panel: JudgePanel,
                    ask: Callable[[JudgeConfig], Awaitable[tuple[T, TokenUsage]]], *,
                    members: Sequence[JudgeConfig] | None = None) -> PanelAnswers[T]:
    """Ask every member concurrently; JudgeUnavailable when fewer than the quorum answer.

    ``ask`` returns a member's answer and what it spent; a member that raises JudgeUnavailable
    has not answered (its spend still counts). The error below the quorum carries the spend of
    the whole panel and the panel summary in its details. ``members``: the configs to ask, by
    default the panel's own (a bound panel's members are resolved already).
    """
    members = list(members) if members is not None else list(panel.members)
    labels = member_labels(members)
    weights = panel.effective_weights
    outcomes = await asyncio.gather(*(ask(member) for member in members),
                                    return_exceptions=True)
    answers: list[MemberAnswer[T]] = []
    for label, member, weight, outcome in zip(labels, members, weights, outcomes):
        if isinstance(outcome, JudgeUnavailable):
            spent = outcome.token_usage if isinstance(outcome.token_usage, TokenUsage) else None
            answers.append(MemberAnswer(label, member, weight, error=outcome,
                                        usage=spent or TokenUsage()))
        elif isinstance(outcome, BaseException):
            raise outcome
        else:
            answer, usage = outcome
            answers.append(MemberAnswer(label, member, weight, answer=answer, usage=usage))
    result = PanelAnswers(panel, answers)
    require_quorum(owner, result, len(result.answered), "judge(s) answered")
    return result


def require_quorum(owner: str, answers: PanelAnswers[Any], count: int, what: str) -> None:
    quorum = answers.panel.effective_quorum
    if count >= quorum:
        return
    failures = "; ".join(f"{m.label}: {m.error}" for m in answers.members if m.error is not None)
    message = (f"{owner}: judge panel below its quorum — {count} of {len(answers.members)} "
               f"{what}, {quorum} needed" + (f" ({failures})" if failures else ""))
    error = JudgeUnavailable(message, details={"panel": answers.summary()})
    error.token_usage = answers.usage
    raise error


def vote(verdicts: Sequence[Verdict], weights: Sequence[float]) -> Verdict:
    """The (weighted) majority of the YES/NO verdicts; UNKNOWN votes abstain, a tie is UNKNOWN."""
    yes = sum(w for v, w in zip(verdicts, weights) if v is Verdict.YES)
    no = sum(w for v, w in zip(verdicts, weights) if v is Verdict.NO)
    if yes == no:
        return Verdict.UNKNOWN
    return Verdict.YES if yes > no else Verdict.NO


def combine_scores(panel: JudgePanel, scores: Sequence[float],
                   weights: Sequence[float]) -> float:
    """Numeric scores of the members that answered, combined by the panel's aggregate."""
    if not scores:
        raise ValueError("no scores to combine")
    if panel.aggregate == "mean":
        return statistics.fmean(scores)
    if panel.aggregate == "weighted":
        return sum(s * w for s, w in zip(scores, weights)) / sum(weights)
    return float(statistics.median(scores))


def combine_member_scores(answers: PanelAnswers[T], score_of: Callable[[T], float],
                          member_details: Callable[[T], dict[str, Any]]
                          ) -> tuple[float, str, dict[str, Any]]:
    """A numeric scorer's panel result: the combined score, a reason naming each member's
    score, and the panel summary with each member's score and ``member_details``."""
    answered = [(m, m.answer) for m in answers.answered if m.answer is not None]
    scores = [score_of(answer) for _, answer in answered]
    score = combine_scores(answers.panel, scores, [m.weight for m, _ in answered])
    summary = answers.summary()
    for member, entry in zip(answers.members, summary["members"]):
        if member.answer is not None:
            entry.update(score=score_of(member.answer), **member_details(member.answer))
    how = "median" if answers.panel.aggregate == "majority" else answers.panel.aggregate
    reason = (f"panel {how} {score:.2f} (of {judges_answered(len(answered), len(answers.members))}): "
              + ", ".join(f"{m.label} {s:.2f}" for (m, _), s in zip(answered, scores)))
    return score, reason, summary
