"""How often the judge repeated its own verdicts when a sample of a run's cases was asked again
(``JudgeConfig(reliability_check=True)``, the multivon-style ``EvalReport.judge_reliability``).

The record only holds the counts; referee/run/reliability.py asks the judge again.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, computed_field

from referee.usage import TokenUsage


class CriterionReliability(BaseModel):
    """One judged criterion's re-asks: how many (case, criterion) pairs could be compared,
    how many repeated the first pass/fail, how many were left out (an error or a skip on
    either side), and what the re-asks spent."""

    compared: int = 0
    agreed: int = 0
    left_out: int = 0
    token_usage: TokenUsage | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def agreement(self) -> float | None:
        return round(self.agreed / self.compared, 4) if self.compared else None


class JudgeReliabilityCheck(BaseModel):
    """The re-judging pass of one run: which cases were sampled (by case key, with the seed
    that drew them, so a rerun draws the same) and the counts by criterion label."""

    seed: str
    sample_size: int  # the configured reliability_sample
    sampled_cases: list[str] = Field(default_factory=list)
    criteria: dict[str, CriterionReliability] = Field(default_factory=dict)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def compared(self) -> int:
        return sum(c.compared for c in self.criteria.values())

    @computed_field  # type: ignore[prop-decorator]
    @property
    def agreed(self) -> int:
        return sum(c.agreed for c in self.criteria.values())

    @computed_field  # type: ignore[prop-decorator]
    @property
    def left_out(self) -> int:
        return sum(c.left_out for c in self.criteria.values())

    @computed_field  # type: ignore[prop-decorator]
    @property
    def agreement(self) -> float | None:
        """Agreeing pairs over compared pairs, rounded to 4 places as multivon reports it;
        None when no pair could be compared."""
        return round(self.agreed / self.compared, 4) if self.compared else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def token_usage(self) -> TokenUsage | None:
        """What the re-asks spent, all criteria together."""
        return TokenUsage.total(c.token_usage for c in self.criteria.values())
