"""Pairwise judging: which of two outputs for the same case better meets a criterion.

Each pair is asked in both orders by default; a preference that flips with the order is a tie,
counted as position-inconsistent. Every request goes through the judge layer (cache per ordered
pair, retries, concurrency, cost). See docs/judge.md.
"""

from referee.pairwise._compare import (
    PairOutcome,
    PairwiseComparison,
    compare_models,
    compare_runs,
    compare_runs_async,
)
from referee.pairwise._evaluator import PairwiseJudge, PairwisePreferenceCriterion
from referee.pairwise._judging import (
    OrderedVerdict,
    PairCriterion,
    PairVerdict,
    judge_pair,
)
from referee.pairwise._ranking import (
    RankedVariant,
    Ranking,
    bradley_terry,
    rank,
    rank_models,
)
from referee.pairwise._stats import WinRate, sign_test_p

__all__ = [
    "OrderedVerdict",
    "PairCriterion",
    "PairOutcome",
    "PairVerdict",
    "PairwiseComparison",
    "PairwiseJudge",
    "PairwisePreferenceCriterion",
    "RankedVariant",
    "Ranking",
    "WinRate",
    "bradley_terry",
    "compare_models",
    "compare_runs",
    "compare_runs_async",
    "judge_pair",
    "rank",
    "rank_models",
    "sign_test_p",
]
