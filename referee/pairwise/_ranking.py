"""N model variants over one suite: a round robin of pairwise comparisons and a Bradley-Terry
ranking with bootstrap intervals.

Every pair of variants is compared on every case (both orders by default: 2 judge requests per
case per pair, so N(N-1) per case). The Bradley-Terry fit counts a tie as half a win for each
side and leaves JUDGE_ERROR and uncompared pairs out. Ratings are on the Elo scale (a 400-point
gap is 10:1 odds), centred on 1000; the interval comes from refitting on cases drawn with
replacement, seeded so that the ranking reproduces.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

from referee.judge import JudgeConfig
from referee.pairwise._compare import PairwiseComparison, compare_runs_async, suite_of
from referee.pairwise._judging import PairCriterion
from referee.record import EvalReport

ELO_BASE, ELO_SCALE = 1000.0, 400.0 / math.log(10)
BOOTSTRAP_RESAMPLES = 200
BOOTSTRAP_SEED = 20261204
SCORE_OF_I = {"a": 1.0, "tie": 0.5, "b": 0.0}  # comparison (i, j) runs i as A and j as B

# One game: (i, j, i's score: 1 win, 0.5 tie, 0 loss).
Game = tuple[int, int, float]


def bradley_terry(games: Sequence[Game], players: int, *, prior_ties: float = 1.0,
                  iterations: int = 500) -> list[float]:
    """Log-strengths (summing to 0) by Hunter's MM algorithm.

    ``prior_ties`` adds that many virtual ties to every pair that played, so that a variant
    that won every game gets a finite rating.
    """
    wins = [0.0] * players
    played: dict[tuple[int, int], float] = {}
    for i, j, score in games:
        wins[i] += score
        wins[j] += 1.0 - score
        key = (min(i, j), max(i, j))
        played[key] = played.get(key, 0.0) + 1.0
    for i, j in played:
        wins[i] += prior_ties / 2
        wins[j] += prior_ties / 2
        played[(i, j)] += prior_ties
    strength = [1.0] * players
    for _ in range(iterations):
        denominators = [0.0] * players
        for (i, j), n in played.items():
            share = n / (strength[i] + strength[j])
            denominators[i] += share
            denominators[j] += share
        # A variant that never played keeps its strength; one that never scored (possible
        # only without the prior) tends to zero, held just above it so its log stays finite.
        updated = [strength[k] if denominators[k] == 0 else max(wins[k], 1e-9) / denominators[k]
                   for k in range(players)]
        centre = math.exp(sum(math.log(s) for s in updated) / players)
        updated = [s / centre for s in updated]
        converged = max(abs(a - b) for a, b in zip(updated, strength)) < 1e-10
        strength = updated
        if converged:
            break
    return [math.log(s) for s in strength]


@dataclass(frozen=True)
class RankedVariant:
    name: str
    rating: float
    ci_low: float
    ci_high: float
    wins: int
    ties: int
    losses: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "rating": self.rating, "ci_low": self.ci_low,
                "ci_high": self.ci_high, "wins": self.wins, "ties": self.ties,
                "losses": self.losses}


@dataclass
class Ranking:
    """Variants best first, with the round robin's comparisons and each variant's run."""

    variants: list[RankedVariant]
    comparisons: list[PairwiseComparison] = field(default_factory=list)
    reports: dict[str, EvalReport] = field(default_factory=dict)
    confidence: float = 0.95

    def render_text(self) -> str:
        lines = [(f"Bradley-Terry ranking (Elo scale, {self.confidence:.0%} bootstrap "
                  "interval over cases):")]
        for place, v in enumerate(self.variants, start=1):
            lines.append(f"  {place}. {v.name}: {v.rating:.0f} ({v.ci_low:.0f} to "
                         f"{v.ci_high:.0f}); won {v.wins}, tied {v.ties}, lost {v.losses}")
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict[str, Any]:
        return {"confidence": self.confidence, "variants": [v.to_dict() for v in self.variants],
                "comparisons": [c.to_dict() for c in self.comparisons]}


def _games(comparisons: Sequence[tuple[int, int, PairwiseComparison]]
           ) -> dict[str, list[Game]]:
    """The decided games of the round robin, by case id."""
    by_case: dict[str, list[Game]] = {}
    for i, j, comparison in comparisons:
        for pair in comparison.pairs:
            if pair.status in SCORE_OF_I:
                by_case.setdefault(pair.eval_id, []).append((i, j, SCORE_OF_I[pair.status]))
    return by_case


def rank(names: Sequence[str], comparisons: Sequence[tuple[int, int, PairwiseComparison]], *,
         confidence: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES,
         seed: int = BOOTSTRAP_SEED) -> Ranking:
    """The ranking of ``names`` from round-robin comparisons ``(i, j, i-vs-j)``."""
    by_case = _games(comparisons)
    games = [g for case_games in by_case.values() for g in case_games]
    players = len(names)
    point = bradley_terry(games, players)
    rng = random.Random(seed)
    cases = list(by_case)
    draws: list[list[float]] = [[] for _ in range(players)]
    for _ in range(resamples if cases else 0):
        sample = [g for case in rng.choices(cases, k=len(cases)) for g in by_case[case]]
        for k, value in enumerate(bradley_terry(sample, players)):
            draws[k].append(value)
    tail = (1.0 - confidence) / 2
    variants = []
    for k, name in enumerate(names):
        values = sorted(draws[k]) or [point[k]]
        low = values[int(tail * (len(values) - 1))]
        high = values[int((1.0 - tail) * (len(values) - 1))]
        record = [s if i == k else 1.0 - s for i, j, s in games if k in (i, j)]
        variants.append(RankedVariant(
            name=name, rating=ELO_BASE + ELO_SCALE * point[k],
            ci_low=ELO_BASE + ELO_SCALE * low, ci_high=ELO_BASE + ELO_SCALE * high,
            wins=record.count(1.0), ties=record.count(0.5), losses=record.count(0.0)))
    variants.sort(key=lambda v: v.rating, reverse=True)
    return Ranking(variants=variants, comparisons=[c for _, _, c in comparisons],
                   confidence=confidence)


def rank_models(cases: Any, models: Mapping[str, Callable[[str], Any]],
                criterion: str | None = None, *, rubric: Sequence[str] | None = None,
                questions: Sequence[str] | None = None, judge: JudgeConfig | None = None, both_orders: bool = True,
                save: bool = False, runs_dir: str | Path | None = None,
                verbose: bool = False) -> Ranking:
    """Run each model over the same cases (an ``EvalSuite`` or an iterable of ``EvalCase``),
    compare every pair of them on every case, and rank them (Bradley-Terry)."""
    from referee.run.sync import run_sync

    if not isinstance(models, Mapping) or len(models) < 2:
        raise ValueError("rank_models: models must map at least two names to model functions")
    for name, model in models.items():
        if not callable(model):
            raise TypeError(f"rank_models: models[{name!r}] must be callable, "
                            f"got {type(model).__name__}")
    suite = suite_of(cases, "rank_models")
    spec = PairCriterion.of(criterion, rubric, questions,
                            owner="rank_models")  # fail before running
    names = list(models)

    async def round_robin() -> Ranking:
        reports = [await suite.run_async(models[name], verbose=verbose, save=save,
                                         runs_dir=runs_dir) for name in names]
        played = []
        for i, j in combinations(range(len(names)), 2):
            played.append((i, j, await compare_runs_async(
                reports[i], reports[j], spec.text or None, rubric=spec.rubric,
                questions=spec.questions, judge=judge,
                both_orders=both_orders, label_a=names[i], label_b=names[j])))
        ranking = rank(names, played)
        ranking.reports = dict(zip(names, reports))
        return ranking

    return run_sync(round_robin())
