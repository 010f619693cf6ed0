"""Pairwise judging: which of two outputs for the same case better meets a criterion.

Each pair is asked in both orders by default; a preference that flips with the order is a tie,
counted as position-inconsistent. Every request goes through the judge layer (cache per ordered
pair, retries, concurrency, cost). A comparison of two stored runs is kept beside the later
run, pair by pair, and resumes where it stopped. See docs/judge.md.

Names load on first use, so the CLI and the viewer can name the defaults without the judge layer.
"""

from __future__ import annotations

from referee._lazy import lazy_getattr

_EXPORTS = {
    "PairOutcome": "referee.pairwise._compare",
    "PairwiseComparison": "referee.pairwise._compare",
    "compare_models": "referee.pairwise._compare",
    "compare_runs": "referee.pairwise._compare",
    "compare_runs_async": "referee.pairwise._compare",
    "PairwiseJudge": "referee.pairwise._evaluator",
    "PairwisePreferenceCriterion": "referee.pairwise._evaluator",
    "OrderedVerdict": "referee.pairwise._judging",
    "PairCriterion": "referee.pairwise._judging",
    "PairVerdict": "referee.pairwise._judging",
    "judge_pair": "referee.pairwise._judging",
    "RankedVariant": "referee.pairwise._ranking",
    "Ranking": "referee.pairwise._ranking",
    "bradley_terry": "referee.pairwise._ranking",
    "rank": "referee.pairwise._ranking",
    "rank_models": "referee.pairwise._ranking",
    "WinRate": "referee.pairwise._stats",
    "sign_test_p": "referee.pairwise._stats",
    "COMPARISONS_DIR": "referee.pairwise._store",
    "stored_comparisons": "referee.pairwise._store",
    "DEFAULT_PAIRWISE_CRITERION": "referee.pairwise._defaults",
}

__all__ = list(_EXPORTS)

__getattr__ = lazy_getattr(__name__, globals(), _EXPORTS)
