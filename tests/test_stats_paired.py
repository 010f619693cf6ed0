"""referee.stats' paired tests, each checked against a hand computation and against scipy."""

from __future__ import annotations

import itertools
import math
import random
import statistics

import pytest

from referee.stats import (
    average_ranks,
    bootstrap_mean_ci,
    cohens_dz,
    exact_binomial_two_sided,
    fewest_one_sided_pairs,
    holm_adjust,
    mcnemar,
    mcnemar_power,
    paired_mean_mde,
    paired_proportion_mde,
    wilcoxon_signed_rank,
)

scipy_stats = pytest.importorskip("scipy.stats")


# McNemar --------------------------------------------------------------------------------------

def test_mcnemar_exact_by_hand() -> None:
    # 7 discordant pairs, all one way: 2 * (1/2)**7 = 0.015625.
    seven = mcnemar(7, 0)
    assert seven.method == "exact" and seven.p_value == 2 / 128
    # 8 against 1: 2 * (C(9,0) + C(9,1)) / 2**9 = 20 / 512.
    assert mcnemar(1, 8).p_value == pytest.approx(20 / 512)
    assert mcnemar(3, 3).p_value == 1.0
    assert mcnemar(0, 0).method == "none" and mcnemar(0, 0).p_value == 1.0


def test_mcnemar_chi_square_by_hand() -> None:
    # 10 against 25: (|10 - 25| - 1)**2 / 35 = 5.6; P(chi2_1 >= 5.6) = erfc(sqrt(2.8)).
    result = mcnemar(10, 25)
    assert result.method == "chi-square" and result.statistic == pytest.approx(5.6)
    assert result.p_value == pytest.approx(math.erfc(math.sqrt(2.8)))
    assert mcnemar(20, 20).p_value == 1.0  # no evidence either way, not "p slightly below 1"


@pytest.mark.parametrize("only_a, only_b", [(0, 1), (0, 7), (1, 8), (2, 9), (5, 5), (11, 13),
                                            (0, 24)])
def test_mcnemar_exact_matches_scipy_binomtest(only_a: int, only_b: int) -> None:
    expected = scipy_stats.binomtest(only_b, only_a + only_b, 0.5).pvalue
    assert mcnemar(only_a, only_b).p_value == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("only_a, only_b", [(10, 25), (30, 12), (100, 140), (400, 420)])
def test_mcnemar_chi_square_matches_scipy(only_a: int, only_b: int) -> None:
    statistic = (abs(only_a - only_b) - 1) ** 2 / (only_a + only_b)
    result = mcnemar(only_a, only_b)
    assert result.p_value == pytest.approx(scipy_stats.chi2.sf(statistic, 1), rel=1e-9)


def test_exact_binomial_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError, match="0 <= successes <= trials"):
        exact_binomial_two_sided(5, 3)


# Wilcoxon ------------------------------------------------------------------------------------

def test_wilcoxon_exact_by_hand() -> None:
    # Ranks 1..6, only rank 3 negative: T+ = 18, T- = 3. Sign patterns with T- <= 3: {}, {1},
    # {2}, {3}, {1,2}: 5 of 64, so the two-sided p is 10/64.
    result = wilcoxon_signed_rank([1.0, 2.0, -3.0, 4.0, 5.0, 6.0])
    assert result.method == "exact"
    assert (result.rank_sum_positive, result.rank_sum_negative) == (18, 3)
    assert result.p_value == pytest.approx(10 / 64)
    assert result.rank_biserial == pytest.approx((18 - 3) / 21)


def test_wilcoxon_normal_with_ties_by_hand() -> None:
    # Magnitudes 1,1,2,2,2,3 with one zero dropped: ranks 1.5,1.5,4,4,4,6; negatives are one of
    # the 1s and one of the 2s, so T+ = 1.5 + 4 + 4 + 6 = 15.5. Mean 10.5; variance
    # 6*7*13/24 - ((2**3 - 2) + (3**3 - 3)) / 48 = 22.75 - 0.625 = 22.125.
    result = wilcoxon_signed_rank([1, -1, 2, -2, 2, 3, 0])
    assert result.method == "normal" and result.zeros == 1 and result.n == 6
    assert result.rank_sum_positive == 15.5
    z = (15.5 - 10.5) / math.sqrt(22.125)
    assert result.z == pytest.approx(z)
    assert result.p_value == pytest.approx(math.erfc(z / math.sqrt(2)))


def test_wilcoxon_rounds_equal_differences_into_a_tie() -> None:
    # 0.3 - 0.1 and 0.4 - 0.2 differ by a rounding error; on paper they are the same change.
    result = wilcoxon_signed_rank([0.3 - 0.1, 0.4 - 0.2, 0.5])
    assert result.method == "normal"  # the tie is seen, so the exact table does not apply
    assert average_ranks([2.0, 1.0, 2.0, 3.0]) == [2.5, 1.0, 2.5, 4.0]


def test_wilcoxon_without_differences() -> None:
    result = wilcoxon_signed_rank([0.0, 0.0])
    assert (result.method, result.p_value, result.zeros, result.rank_biserial) == \
        ("none", 1.0, 2, None)


@pytest.mark.parametrize("seed", range(6))
def test_wilcoxon_exact_matches_scipy(seed: int) -> None:
    rng = random.Random(seed)
    differences = [rng.gauss(0.2, 1.0) for _ in range(rng.randint(5, 30))]
    ours = wilcoxon_signed_rank(differences)
    theirs = scipy_stats.wilcoxon(differences, method="exact")
    assert ours.method == "exact"
    assert ours.p_value == pytest.approx(theirs.pvalue, rel=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_wilcoxon_normal_matches_scipy_with_ties_and_zeros(seed: int) -> None:
    rng = random.Random(seed)
    # Scores on a 0..1 scale in steps of 0.25: many ties and some zeros, as judge scores have.
    differences = [rng.choice([-0.5, -0.25, 0.0, 0.25, 0.25, 0.5, 0.75]) for _ in range(40)]
    ours = wilcoxon_signed_rank(differences)
    theirs = scipy_stats.wilcoxon(differences, zero_method="wilcox", correction=False,
                                  method="approx")
    assert ours.method == "normal"
    assert ours.p_value == pytest.approx(theirs.pvalue, rel=1e-9)


def test_wilcoxon_large_samples_use_the_normal_approximation() -> None:
    rng = random.Random(3)
    differences = [rng.gauss(0.0, 1.0) for _ in range(80)]
    ours = wilcoxon_signed_rank(differences)
    theirs = scipy_stats.wilcoxon(differences, correction=False, method="approx")
    assert ours.method == "normal" and ours.p_value == pytest.approx(theirs.pvalue, rel=1e-9)


# Paired bootstrap ------------------------------------------------------------------------------

def _exact_bootstrap_quantiles(values: list[float], confidence: float) -> tuple[float, float]:
    """Every one of the n**n equally likely resamples, enumerated: the bootstrap's own
    distribution of the mean, without sampling error."""
    n = len(values)
    means = sorted(sum(pick) / n for pick in itertools.product(values, repeat=n))
    tail = (1 - confidence) / 2
    return means[int(tail * (len(means) - 1))], means[int((1 - tail) * (len(means) - 1))]


def test_paired_bootstrap_matches_the_enumerated_bootstrap() -> None:
    before = [0.2, 0.5, 0.4, 0.9, 0.6, 0.3]
    after = [0.5, 0.5, 0.8, 1.0, 0.6, 0.7]
    differences = [b - a for a, b in zip(before, after)]
    exact_low, exact_high = _exact_bootstrap_quantiles(differences, 0.95)  # 46,656 resamples
    low, high = bootstrap_mean_ci(differences, resamples=20000)
    assert low == pytest.approx(exact_low, abs=0.02) and high == pytest.approx(exact_high, abs=0.02)
    # Seeded: the same interval every time.
    assert bootstrap_mean_ci(differences, resamples=20000) == (low, high)


def test_paired_bootstrap_matches_scipy_paired_percentile() -> None:
    rng = random.Random(11)
    before = [rng.random() for _ in range(50)]
    after = [min(1.0, b + rng.gauss(0.05, 0.1)) for b in before]
    low, high = bootstrap_mean_ci([b - a for a, b in zip(before, after)], resamples=20000)

    def mean_change(a, b, axis=-1):  # noqa: ANN001, ANN202 - scipy's calling convention
        return (b - a).mean(axis=axis)

    theirs = scipy_stats.bootstrap((before, after), mean_change, paired=True, vectorized=True,
                                   n_resamples=20000, method="percentile", random_state=1)
    assert low == pytest.approx(theirs.confidence_interval.low, abs=0.004)
    assert high == pytest.approx(theirs.confidence_interval.high, abs=0.004)


# Holm, effect sizes, detectable effects --------------------------------------------------------

def test_holm_by_hand() -> None:
    # Sorted 0.01, 0.03, 0.04: times 3, 2, 1 = 0.03, 0.06, 0.04 -> monotone 0.03, 0.06, 0.06.
    assert holm_adjust([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm_adjust([0.5, 0.9]) == [1.0, 1.0]
    assert holm_adjust([]) == []
    assert holm_adjust([0.02]) == [0.02]


def test_holm_rejects_what_its_definition_rejects() -> None:
    """Holm at 5%: reject the smallest p while p_(i) <= 0.05 / (m - i + 1), stop at the first
    that is not; exactly those have an adjusted p <= 0.05."""
    rng = random.Random(5)
    for _ in range(200):
        ps = [rng.random() ** 3 for _ in range(rng.randint(1, 8))]
        m = len(ps)
        rejected = set()
        for position, index in enumerate(sorted(range(m), key=lambda i: ps[i])):
            if ps[index] > 0.05 / (m - position):
                break
            rejected.add(index)
        assert {i for i, p in enumerate(holm_adjust(ps)) if p <= 0.05} == rejected


def test_cohens_dz_by_hand() -> None:
    differences = [0.1, 0.3, 0.2, 0.4]
    assert cohens_dz(differences) == pytest.approx(0.25 / statistics.stdev(differences))
    assert cohens_dz([0.1, 0.1]) is None and cohens_dz([0.5]) is None


def test_paired_mean_mde_by_hand() -> None:
    # (z_0.975 + z_0.80) * sd / sqrt(n) = (1.95996 + 0.84162) * 0.2 / 10.
    assert paired_mean_mde(100, 0.2) == pytest.approx((1.959964 + 0.841621) * 0.02, rel=1e-5)
    assert paired_mean_mde(1, 0.2) is None


def test_paired_proportion_mde_has_the_power_it_claims() -> None:
    for n, rate in ((40, 0.25), (200, 0.1), (1000, 0.05)):
        mde = paired_proportion_mde(n, rate)
        assert mcnemar_power(n, mde, rate) == pytest.approx(0.80, abs=1e-6)
        assert mcnemar_power(n, mde * 0.9, rate) < 0.80
    assert paired_proportion_mde(400, 0.2) < paired_proportion_mde(100, 0.2)


def test_paired_proportion_mde_floors() -> None:
    # 6 pairs all one way are the fewest the exact test calls significant at 5%: 2/64 < 0.05.
    assert fewest_one_sided_pairs() == 6
    assert paired_proportion_mde(10, 0.0) >= 0.6
    assert paired_proportion_mde(0, 0.3) == 1.0
    assert paired_proportion_mde(3, 0.3) == 1.0


def test_paired_proportion_mde_against_simulated_power() -> None:
    """At the MDE, McNemar's test on simulated paired verdicts rejects about 80% of the time."""
    rng = random.Random(2)
    n, rate = 300, 0.2
    change = paired_proportion_mde(n, rate)
    p_up, p_down = (rate + change) / 2, (rate - change) / 2
    rejections = 0
    for _ in range(400):
        draws = [rng.random() for _ in range(n)]
        up = sum(d < p_up for d in draws)
        down = sum(p_up <= d < p_up + p_down for d in draws)
        rejections += mcnemar(down, up).p_value < 0.05
    assert 0.72 <= rejections / 400 <= 0.88
