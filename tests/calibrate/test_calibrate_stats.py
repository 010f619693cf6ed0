"""The agreement statistics against simulated judges whose true behaviour is known.

Each test draws hundreds of labelled rows from a fixed seed, so it is repeatable, and checks an
estimate against the value theory gives for the simulated judge.
"""

from __future__ import annotations

import math

import pytest

np = pytest.importorskip("numpy")

from referee.calibrate._stats import (  # noqa: E402
    GRID,
    Interval,
    agreement_at,
    agreement_curve,
    cohen_kappa,
    cross_validate,
    fit_threshold,
    fitted_threshold_interval,
    stratified_folds,
    wilson_interval,
)

ROWS = 300
TRIALS = 60
RESAMPLES = 1000


def binary_judge(rng, n: int, base_rate: float, sensitivity: float, specificity: float):
    """Labels, and a judge that passes a human pass with probability ``sensitivity`` and fails a
    human fail with probability ``specificity``; scores are 1.0 (pass) or 0.0 (fail)."""
    labels = rng.random(n) < base_rate
    says_pass = np.where(labels, rng.random(n) < sensitivity, rng.random(n) >= specificity)
    return says_pass.astype(float), labels


def true_kappa(base_rate: float, sensitivity: float, specificity: float) -> float:
    p = base_rate
    judged_pass = p * sensitivity + (1 - p) * (1 - specificity)
    observed = p * sensitivity + (1 - p) * specificity
    chance = p * judged_pass + (1 - p) * (1 - judged_pass)
    return (observed - chance) / (1 - chance)


def covers(interval, truth: float) -> bool:
    return interval.low <= truth <= interval.high


def test_intervals_of_a_judge_of_known_accuracy_cover_the_truth_in_nearly_every_trial():
    # A judge right 85% of the time on passes and 75% on fails, pass base rate 40%. With a
    # bootstrap that resampled scores and labels apart (ignoring the pairing), kappa's
    # interval would sit around 0 and this coverage would collapse.
    p, sens, spec = 0.4, 0.85, 0.75
    kappa = true_kappa(p, sens, spec)
    hits = {"kappa": 0, "tpr": 0, "tnr": 0}
    for trial in range(TRIALS):
        rng = np.random.default_rng(1000 + trial)
        scores, labels = binary_judge(rng, ROWS, p, sens, spec)
        result = agreement_at(scores, labels, 0.5, resamples=RESAMPLES, seed=trial)
        hits["kappa"] += covers(result.metrics["kappa"], kappa)
        hits["tpr"] += covers(result.metrics["tpr"], sens)
        hits["tnr"] += covers(result.metrics["tnr"], spec)
    for name, count in hits.items():
        assert count >= 0.88 * TRIALS, f"{name} interval covered the truth in {count}/{TRIALS}"


def test_the_interval_width_matches_the_sampling_spread_of_kappa():
    # The bootstrap interval must be about as wide as kappa really varies between samples:
    # a bootstrap that ignored pairing would be centred on 0, one that resampled nothing
    # would have no width.
    p, sens, spec = 0.5, 0.9, 0.8
    estimates, widths, centres = [], [], []
    for trial in range(TRIALS):
        rng = np.random.default_rng(2000 + trial)
        scores, labels = binary_judge(rng, ROWS, p, sens, spec)
        result = agreement_at(scores, labels, 0.5, resamples=RESAMPLES, seed=trial)
        kappa = result.metrics["kappa"]
        estimates.append(kappa.value)
        widths.append(kappa.high - kappa.low)
        centres.append((kappa.high + kappa.low) / 2)
    spread = 2 * 1.96 * float(np.std(estimates))
    assert 0.75 * spread <= float(np.mean(widths)) <= 1.3 * spread
    assert abs(float(np.mean(centres)) - true_kappa(p, sens, spec)) < 0.03


def test_a_judge_independent_of_the_labels_has_kappa_near_zero():
    estimates, covered = [], 0
    for trial in range(TRIALS):
        rng = np.random.default_rng(3000 + trial)
        labels = rng.random(ROWS) < 0.4
        scores = (rng.random(ROWS) < 0.55).astype(float)  # a coin, whatever the label
        kappa = agreement_at(scores, labels, 0.5, resamples=RESAMPLES, seed=trial).metrics["kappa"]
        estimates.append(kappa.value)
        covered += covers(kappa, 0.0)
    assert abs(float(np.mean(estimates))) < 0.02
    assert covered >= 0.88 * TRIALS


def test_metrics_at_a_threshold_are_the_textbook_ones():
    scores = [0.9, 0.8, 0.3, 0.7, 0.2, 0.1]
    labels = [True, True, True, False, False, False]
    result = agreement_at(scores, labels, 0.5, resamples=200)
    assert (result.tp, result.fp, result.fn, result.tn) == (2, 1, 1, 2)
    values = {k: v.value for k, v in result.metrics.items()}
    assert values["accuracy"] == pytest.approx(4 / 6)
    assert values["tpr"] == values["recall"] == pytest.approx(2 / 3)
    assert values["tnr"] == pytest.approx(2 / 3)
    assert values["precision"] == pytest.approx(2 / 3)
    assert values["f1"] == pytest.approx(2 / 3)
    assert values["kappa"] == pytest.approx(1 / 3)  # po 2/3, pe 1/2
    assert result.base_rate == 0.5
    assert cohen_kappa([s >= 0.5 for s in scores], labels) == pytest.approx(1 / 3)


def test_undefined_metrics_are_none_not_zero():
    result = agreement_at([0.1, 0.2, 0.3], [True, False, True], 0.5, resamples=100)
    assert result.metrics["precision"].value is None  # the judge passed nothing
    assert result.metrics["tpr"].value == 0.0


def _normal_cdf(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def _scored_rows(rng, n, pos, neg, base_rate=0.5):
    labels = rng.random(n) < base_rate
    scores = np.where(labels, rng.normal(*pos, n), rng.normal(*neg, n)).clip(0, 1)
    return scores, labels


def test_a_fitted_threshold_lands_where_theory_puts_it():
    # Youden's J = TPR - FPR peaks where the two score densities cross. With unequal spreads
    # that is not the midpoint; the theoretical optimum is found from the normal CDFs.
    pos, neg = (0.70, 0.06), (0.40, 0.15)
    fine = np.linspace(0.3, 0.8, 5001)
    youden = [(1 - _normal_cdf((t - pos[0]) / pos[1])) - (1 - _normal_cdf((t - neg[0]) / neg[1]))
              for t in fine]
    theory = float(fine[int(np.argmax(youden))])
    scores, labels = _scored_rows(np.random.default_rng(7), 800, pos, neg)
    fitted = fitted_threshold_interval(scores, labels, "youden", resamples=500, seed=1)
    assert abs(fitted.value - theory) <= 0.03, (fitted, theory)
    assert fitted.low - 0.01 <= theory <= fitted.high + 0.01
    # Equal spreads, equal base rates: kappa and Youden both peak at the midpoint.
    scores, labels = _scored_rows(np.random.default_rng(8), 3000, (0.65, 0.1), (0.35, 0.1))
    for metric in ("kappa", "youden"):
        fitted = fitted_threshold_interval(scores, labels, metric, resamples=300, seed=2)
        assert abs(fitted.value - 0.5) <= 0.03, (metric, fitted)
        assert fitted.low <= 0.5 <= fitted.high


def test_ties_take_the_middle_of_the_equally_good_thresholds():
    # Scores of a four-question QAG evaluator take five values: every threshold in (0.5, 0.75]
    # splits these rows alike, and the fit takes the middle of that run.
    scores = [1.0, 0.75, 0.75, 0.5, 0.25, 0.0]
    labels = [True, True, True, False, False, False]
    assert fit_threshold(scores, labels, "kappa") == pytest.approx(0.63)


def test_the_agreement_curve_spans_the_grid():
    scores, labels = _scored_rows(np.random.default_rng(9), 300, (0.7, 0.1), (0.3, 0.1))
    curve = agreement_curve(scores, labels)
    assert curve["threshold"] == [float(t) for t in GRID]
    assert len(curve["kappa"]) == len(curve["f1"]) == len(curve["youden"]) == 101
    best = int(np.nanargmax(np.array(curve["kappa"], dtype=float)))
    assert 0.4 <= curve["threshold"][best] <= 0.6
    assert curve["kappa"][0] == pytest.approx(0.0)  # threshold 0 passes everything


def test_cross_validation_fits_each_fold_on_the_others():
    scores, labels = _scored_rows(np.random.default_rng(10), 400, (0.65, 0.1), (0.35, 0.1))
    folds = stratified_folds(labels, 5, seed=0)
    for fold in range(5):  # each fold holds about a fifth of each class
        assert abs(int(np.sum(labels[folds == fold])) - int(labels.sum()) / 5) <= 1
    cv = cross_validate(scores, labels, 5, "kappa", resamples=300)
    assert len(cv.thresholds) == 5 and all(0.4 <= t <= 0.6 for t in cv.thresholds)
    in_sample = agreement_at(scores, labels, fit_threshold(scores, labels), resamples=300)
    # Out-of-fold agreement can only be as good as the in-sample optimum, give or take noise.
    assert cv.agreement.metrics["kappa"].value <= in_sample.metrics["kappa"].value + 0.02
    assert cv.agreement.n == 400


def test_results_repeat_with_a_seed():
    scores, labels = _scored_rows(np.random.default_rng(11), 200, (0.6, 0.15), (0.4, 0.15))
    one = fitted_threshold_interval(scores, labels, resamples=300, seed=5)
    two = fitted_threshold_interval(scores, labels, resamples=300, seed=5)
    assert one == two


def test_wilson_interval():
    interval = wilson_interval(8, 10)
    assert interval.value == 0.8
    assert interval.low == pytest.approx(0.490, abs=0.001)
    assert interval.high == pytest.approx(0.943, abs=0.001)
    assert wilson_interval(0, 0).value is None


def test_bad_inputs_are_clear_errors():
    with pytest.raises(ValueError, match="metric"):
        fit_threshold([0.5], [True], "auc")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        fit_threshold([1.5], [True])
    with pytest.raises(ValueError, match="at least 2 folds"):
        cross_validate([0.5, 0.6], [True, False], 1)


def test_no_threshold_is_fitted_from_no_scored_rows():
    # Every threshold tied at "undefined" used to "fit" 0.50, and referee calibrate wrote that
    # into the calibration file as if measured when no row was scored (all judge errors).
    assert math.isnan(fit_threshold([], []))
    assert fitted_threshold_interval([], [], resamples=50) == Interval(None, None, None)


def test_a_statistic_no_resample_moves_has_no_bootstrap_interval():
    from referee.calibrate._stats import agreement_at, fit_problem, fitted_threshold_interval

    # A perfect split of 20 rows: every resample agrees perfectly too. That is not certainty.
    scores, labels = [1.0] * 10 + [0.0] * 10, [True] * 10 + [False] * 10
    agreement = agreement_at(scores, labels, 0.5, resamples=300)
    kappa = agreement.metrics["kappa"]
    assert (kappa.value, kappa.low, kappa.high, kappa.constant) == (1.0, None, None, True)
    accuracy = agreement.metrics["accuracy"]  # a proportion: Wilson's interval from its counts
    assert accuracy.constant and accuracy.method == "wilson"
    assert accuracy.value == 1.0 and 0.80 < accuracy.low < 0.9 and accuracy.high == 1.0
    threshold = fitted_threshold_interval(scores, labels, resamples=300)
    assert fit_problem(agreement, threshold, "kappa") is None  # it separates, perfectly


def test_fits_that_do_not_separate_are_named():
    from referee.calibrate._stats import agreement_at, fit_problem, fitted_threshold_interval

    # Scores unrelated to the labels: the best kappa is at most chance.
    scores = [0.2, 0.8, 0.2, 0.8, 0.2, 0.8, 0.2, 0.8]
    labels = [True, False, True, False, True, False, True, False]
    threshold = fitted_threshold_interval(scores, labels, resamples=200)
    agreement = agreement_at(scores, labels, threshold.value, resamples=200)
    assert "passes every one of the 8 scored rows" in fit_problem(agreement, threshold, "kappa")
    everything_fails = agreement_at(scores, labels, 0.9, resamples=200)
    assert "fails every one" in fit_problem(everything_fails, threshold, "kappa")


def test_the_computed_agreement_is_the_one_the_report_stores():
    """One Agreement (and one interval type): what _stats computes goes into the report as is,
    and reads back from its JSON equal."""
    from referee.calibrate import _report

    agreement = agreement_at([0.1, 0.9, 0.8, 0.2], [False, True, True, True], 0.5, resamples=50)
    assert type(agreement) is _report.Agreement
    assert isinstance(agreement.kappa, _report.Estimate)
    assert agreement.base_rate == 0.75 and agreement.metrics["tpr"] == agreement.tpr
    assert _report.Agreement.model_validate_json(agreement.model_dump_json()) == agreement
