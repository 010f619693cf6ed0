"""Win rate, its interval and the sign test over the decisive pairs of a comparison.

Ties (position-inconsistent verdicts included) carry no direction, so the win rate and the sign
test are over the pairs one side won (the sign test's usual treatment of ties); the counts of
ties and of inconsistent verdicts are reported beside them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from referee.stats import exact_binomial_two_sided, wilson_bounds


def sign_test_p(wins: int, losses: int) -> float:
    """Two-sided exact sign test: how likely a split at least this uneven is when each decisive
    pair is a fair coin. 1.0 when there are no decisive pairs."""
    return exact_binomial_two_sided(wins, wins + losses)


@dataclass(frozen=True)
class WinRate:
    """B's wins over A among decisive pairs, with a Wilson interval and a sign test."""

    wins: int
    losses: int
    ties: int
    position_inconsistent: int
    judge_errors: int
    not_compared: int
    confidence: float = 0.95
    # Of the ties, the pairs whose two outputs are the same: tied without asking the judge.
    identical: int = 0

    @property
    def decisive(self) -> int:
        return self.wins + self.losses

    @property
    def judged(self) -> int:
        return self.wins + self.losses + self.ties

    @property
    def rate(self) -> float | None:
        return self.wins / self.decisive if self.decisive else None

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_bounds(self.wins, self.decisive, self.confidence)

    @property
    def p_value(self) -> float:
        return sign_test_p(self.wins, self.losses)

    def describe(self) -> str:
        counts = (f"B won {self.wins}, tied {self.ties}, lost {self.losses} of {self.judged} "
                  f"judged pair(s)")
        if self.identical:
            counts += (f" ({self.identical} of the ties: identical outputs, tied without asking "
                       "the judge)")
        if self.position_inconsistent:
            counts += (f"; {self.position_inconsistent} position-inconsistent (a preference "
                       "flipped with the order and was counted as a tie)")
        if self.judge_errors:
            counts += f"; {self.judge_errors} JUDGE_ERROR"
        if self.not_compared:
            counts += f"; {self.not_compared} not compared"
        if self.rate is None:
            return counts + ". No decisive pair: no win rate."
        low, high = self.interval
        return (f"{counts}. B's win rate over decisive pairs {self.rate:.1%} "
                f"({self.confidence:.0%} Wilson CI {low:.1%} to {high:.1%}), "
                f"two-sided sign test p = {self.p_value:.3g}.")

    def to_dict(self) -> dict[str, Any]:
        low, high = self.interval
        return {"wins": self.wins, "losses": self.losses, "ties": self.ties,
                "position_inconsistent": self.position_inconsistent,
                "judge_errors": self.judge_errors, "not_compared": self.not_compared,
                "identical": self.identical,
                "win_rate": self.rate, "ci_low": low, "ci_high": high,
                "confidence": self.confidence, "sign_test_p": self.p_value}
