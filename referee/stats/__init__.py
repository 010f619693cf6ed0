"""referee's statistics: pure functions over counts and scores, no referee types.

Intervals (``bootstrap_mean_ci``, ``wilson_bounds``), paired tests (``mcnemar``,
``wilcoxon_signed_rank``), ``holm_adjust`` across criteria, effect sizes and minimum detectable
effects; ``decide`` and ``confidence_sequence``, the anytime-valid test of a pass rate behind
sequential gates; ``prediction_powered_mean``, a judge's mean corrected by labelled rows. The
record, the comparison of two runs and the gates call them; they import nothing
from the rest of referee.
"""

from referee.stats._effects import cohens_dz
from referee.stats._flips import flip_rate
from referee.stats._intervals import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    bootstrap_mean_ci,
    wilson_bounds,
)
from referee.stats._mcnemar import McNemarResult, exact_binomial_two_sided, mcnemar
from referee.stats._multiple import holm_adjust
from referee.stats._power import (
    fewest_one_sided_pairs,
    mcnemar_power,
    paired_mean_mde,
    paired_proportion_mde,
)
from referee.stats._ppi import CorrectedMean, prediction_powered_mean
from referee.stats._sequential import (
    ConfidenceSequence,
    Decision,
    confidence_sequence,
    decide,
    decide_corrected,
    judge_error_bounds,
    log_evidence,
    log_incomplete_beta,
    observed_threshold,
)
from referee.stats._wilcoxon import WilcoxonResult, average_ranks, wilcoxon_signed_rank

__all__ = [
    "BOOTSTRAP_RESAMPLES",
    "BOOTSTRAP_SEED",
    "ConfidenceSequence",
    "CorrectedMean",
    "Decision",
    "McNemarResult",
    "WilcoxonResult",
    "average_ranks",
    "bootstrap_mean_ci",
    "cohens_dz",
    "confidence_sequence",
    "decide",
    "decide_corrected",
    "exact_binomial_two_sided",
    "fewest_one_sided_pairs",
    "flip_rate",
    "holm_adjust",
    "judge_error_bounds",
    "log_evidence",
    "log_incomplete_beta",
    "mcnemar",
    "mcnemar_power",
    "observed_threshold",
    "paired_mean_mde",
    "paired_proportion_mde",
    "prediction_powered_mean",
    "wilcoxon_signed_rank",
    "wilson_bounds",
]
