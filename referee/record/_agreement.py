"""Agreement between the judges of a panel across a run: Fleiss' kappa per criterion.

Each subject is one thing every member judged: a QAG question of a case (yes/no, from the
per-judge verdicts in ``details["questions"][i]["judges"]``) or, for a numeric scorer, a case
(pass/fail: each member's score against the criterion's threshold). A subject counts only when
every member of the panel gave a readable answer, so every subject has the same number of
raters, as Fleiss' kappa requires; the others are counted as left out. Kept as running sums so a
streamed run needs no more memory per case.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from referee.result import CriterionResult
from referee.usage import TokenUsage

CATEGORIES = ("yes", "no")


def fleiss_kappa(counts: Sequence[Sequence[int]]) -> float | None:
    """Fleiss' kappa of a subjects x categories table of rater counts (same raters per row);
    None where it is undefined (no subjects, one rater, or every rating in one category)."""
    tally = KappaTally()
    for row in counts:
        tally.add(row)
    return tally.kappa


class KappaTally:
    """Running sums of Fleiss' kappa: subjects, raters per subject, per-subject agreement."""

    __slots__ = ("agreement_sum", "category_totals", "left_out", "raters", "subjects")

    def __init__(self) -> None:
        self.raters = 0
        self.subjects = 0
        self.agreement_sum = 0.0
        self.category_totals: list[int] = [0] * len(CATEGORIES)
        self.left_out = 0

    def add(self, row: Sequence[int]) -> None:
        raters = sum(row)
        if raters < 2 or (self.raters and raters != self.raters):
            self.left_out += 1
            return
        self.raters = raters
        self.subjects += 1
        self.agreement_sum += (sum(c * c for c in row) - raters) / (raters * (raters - 1))
        if len(row) > len(self.category_totals):
            self.category_totals += [0] * (len(row) - len(self.category_totals))
        for index, count in enumerate(row):
            self.category_totals[index] += count

    @property
    def kappa(self) -> float | None:
        if not self.subjects:
            return None
        ratings = self.subjects * self.raters
        chance = sum((total / ratings) ** 2 for total in self.category_totals)
        if chance >= 1.0:
            return None
        observed = self.agreement_sum / self.subjects
        return (observed - chance) / (1.0 - chance)

    def add_result(self, result: CriterionResult) -> None:
        """The subjects a scored criterion result holds, if it was judged by a panel."""
        details = result.details if isinstance(result.details, dict) else {}
        panel = details.get("panel")
        if not isinstance(panel, dict):
            return
        questions = details.get("questions")
        if isinstance(questions, list):
            for question in questions:
                judges = question.get("judges") if isinstance(question, dict) else None
                if isinstance(judges, dict):
                    self._add_votes(list(judges.values()))
            return
        members = panel.get("members")
        if isinstance(members, list) and result.threshold is not None:
            scores = [m.get("score") if isinstance(m, dict) else None for m in members]
            self._add_votes([None if not isinstance(s, (int, float))
                             else "yes" if s >= result.threshold else "no" for s in scores])

    def _add_votes(self, votes: list[Any]) -> None:
        if any(v not in CATEGORIES for v in votes):
            self.left_out += 1  # a member did not answer: the subject has fewer raters
            return
        self.add([votes.count(category) for category in CATEGORIES])

    def stats(self) -> JudgeAgreement | None:
        if not self.subjects and not self.left_out:
            return None
        return JudgeAgreement(fleiss_kappa=self.kappa, subjects=self.subjects,
                              judges=self.raters, left_out=self.left_out)

    def to_dict(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in self.__slots__}

    @classmethod
    def from_dict(cls, data: Any) -> KappaTally:
        tally = cls()
        if isinstance(data, dict):
            tally.raters = int(data.get("raters") or 0)
            tally.subjects = int(data.get("subjects") or 0)
            tally.agreement_sum = float(data.get("agreement_sum") or 0.0)
            tally.category_totals = [int(c) for c in data.get("category_totals") or [0, 0]]
            tally.left_out = int(data.get("left_out") or 0)
        return tally


class JudgeAgreement(BaseModel):
    """How far a panel's judges agreed on one criterion over a run."""

    fleiss_kappa: float | None = None
    subjects: int = 0  # questions (QAG) or cases (numeric scores) every judge answered
    judges: int = 0
    left_out: int = 0  # subjects some judge did not answer

    def describe(self) -> str:
        kappa = "undefined" if self.fleiss_kappa is None else f"{self.fleiss_kappa:.2f}"
        text = f"Fleiss' kappa {kappa} over {self.subjects} item(s) by {self.judges} judges"
        if self.left_out:
            text += f" ({self.left_out} left out: a judge did not answer)"
        return text


def panel_member_usage(result: CriterionResult) -> list[tuple[str, TokenUsage]]:
    """What each member of the panel that judged ``result`` spent on it, by member name
    (``details["panel"]["members"]``; a result below the quorum keeps it too)."""
    details = result.details if isinstance(result.details, dict) else {}
    panel = details.get("panel")
    members = panel.get("members") if isinstance(panel, dict) else None
    spent = []
    for member in members if isinstance(members, list) else ():
        usage = member.get("token_usage") if isinstance(member, dict) else None
        if isinstance(usage, dict) and member.get("judge"):
            spent.append((str(member["judge"]), TokenUsage.model_validate(usage)))
    return spent


def describe_member_usage(usage: dict[str, TokenUsage]) -> str:
    """One line: each panel member's spend over the run."""
    return "; ".join(f"{name}: {spent.describe()}" for name, spent in usage.items())
