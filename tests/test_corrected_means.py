"""Corrected means of scores (prediction-powered inference): a judge's mean corrected by labelled
rows, by hand, its coverage over seeded trials, and `referee labels estimate` on a stored run."""

from __future__ import annotations

import json
import math
import random
import statistics
from pathlib import Path

import pytest
from stored_runs import store_scored_run

from referee.labels._estimate import estimate_run
from referee.labels._import import import_labels
from referee.labels._store import Label, LabelStore
from referee.stats import prediction_powered_mean


def test_classic_ppi_by_hand() -> None:
    # Judge mean on the 3 unlabelled 0.7; the labelled residuals person - judge are -0.2, -0.1:
    # 0.7 - 0.15 = 0.55. Variance 0.01 / 3 + 0.005 / 2, so the 95% half-width is
    # 1.959964 * sqrt(0.0058333).
    result = prediction_powered_mean([0.8, 0.6, 0.7], [0.9, 0.5], [0.7, 0.4], tuned=False)
    assert result.value == pytest.approx(0.55) and result.weight == 1.0
    half = 1.959964 * math.sqrt(0.01 / 3 + 0.005 / 2)
    assert (result.low, result.high) == pytest.approx((0.55 - half, 0.55 + half), rel=1e-6)
    assert result.judge_mean == pytest.approx(0.7) and result.correction == pytest.approx(-0.15)


def test_the_tuned_weight_by_hand() -> None:
    unlabelled = [0.2, 0.4, 0.6, 0.8]
    judge = [0.3, 0.5, 0.9]
    truth = [0.2, 0.6, 0.7]
    # lambda = cov(judge, truth) / ((1 + n/N) var(all judge scores)), clipped to [0, 1].
    mean_j, mean_t = statistics.fmean(judge), statistics.fmean(truth)
    cov = sum((a - mean_j) * (b - mean_t) for a, b in zip(judge, truth)) / 2
    weight = cov / ((1 + 3 / 4) * statistics.variance(unlabelled + judge))
    result = prediction_powered_mean(unlabelled, judge, truth)
    assert result.weight == pytest.approx(weight)
    residuals = [t - weight * j for j, t in zip(judge, truth)]
    assert result.value == pytest.approx(weight * statistics.fmean(unlabelled)
                                         + statistics.fmean(residuals))


def test_a_judge_that_knows_nothing_gets_no_weight() -> None:
    rng = random.Random(1)
    truth = [rng.random() for _ in range(50)]
    judge = [rng.random() for _ in range(50)]  # unrelated to the truth
    result = prediction_powered_mean([rng.random() for _ in range(500)], judge, truth)
    assert result.weight < 0.3  # close to the labels' own mean, not pulled by the judge
    assert abs(result.value - statistics.fmean(truth)) < 0.05


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="must be paired"):
        prediction_powered_mean([0.5], [0.1, 0.2], [0.3])
    with pytest.raises(ValueError, match="at least 2 labelled rows"):
        prediction_powered_mean([0.5], [0.1], [0.3])
    with pytest.raises(ValueError, match="at least 1 unlabelled row"):
        prediction_powered_mean([], [0.1, 0.2], [0.3, 0.4])


def _biased_judge(truth: float, rng: random.Random) -> float:
    """A lenient judge: it scores 0.15 above the person, with noise, on the 0..1 scale."""
    return min(1.0, max(0.0, truth + 0.15 + rng.gauss(0.0, 0.1)))


@pytest.mark.parametrize("tuned", [True, False])
def test_coverage_over_seeded_trials(tuned: bool) -> None:
    """The interval holds the true mean in at least 90% of 300 seeded trials (nominal 95%),
    where the judge's own mean, however precise, almost never does."""
    true_mean = 0.5  # person's scores are uniform on [0, 1]
    covered = judge_covered = 0
    trials = 300
    for seed in range(trials):
        rng = random.Random(seed)
        truth = [rng.random() for _ in range(600)]
        judged = [_biased_judge(t, rng) for t in truth]
        labelled = rng.sample(range(600), 60)
        chosen = set(labelled)
        result = prediction_powered_mean([judged[i] for i in range(600) if i not in chosen],
                                         [judged[i] for i in labelled],
                                         [truth[i] for i in labelled], tuned=tuned)
        covered += result.low <= true_mean <= result.high
        spread = 1.96 * statistics.stdev(judged) / math.sqrt(600)
        judge_covered += abs(statistics.fmean(judged) - true_mean) <= spread
    assert covered / trials >= 0.90
    assert judge_covered / trials < 0.05


def test_pass_rate_coverage_with_binary_verdicts() -> None:
    """The same correction on pass/fail verdicts (1/0): a judge that passes 30% of the bad
    outputs and 95% of the good ones, a true pass rate of 0.6."""
    covered = 0
    trials = 300
    for seed in range(trials):
        rng = random.Random(f"binary:{seed}")
        truth = [float(rng.random() < 0.6) for _ in range(800)]
        judged = [float(rng.random() < (0.95 if t else 0.30)) for t in truth]
        labelled = rng.sample(range(800), 80)
        chosen = set(labelled)
        result = prediction_powered_mean([judged[i] for i in range(800) if i not in chosen],
                                         [judged[i] for i in labelled],
                                         [truth[i] for i in labelled])
        covered += result.low <= 0.6 <= result.high
    assert covered / trials >= 0.90


# referee labels estimate ----------------------------------------------------------------------

def _stored_run(tmp_path: Path, truth: list[float], judged: list[float]) -> Path:
    return store_scored_run(tmp_path / "runs", judged, name="ppi")


def test_labels_estimate_corrects_a_stored_run(tmp_path: Path, capsys) -> None:
    from referee.cli import main

    rng = random.Random(9)
    truth = [rng.random() for _ in range(200)]
    judged = [_biased_judge(t, rng) for t in truth]
    run_dir = _stored_run(tmp_path, truth, judged)
    labelled = rng.sample(range(200), 40)
    store = LabelStore(run_dir)
    for i in labelled:
        store.append(Label(case_id=f"c{i}", criterion="g_eval", scoring=1,
                           human="pass" if truth[i] >= 0.5 else "fail", human_score=truth[i],
                           judge_passed=judged[i] >= 0.5, judge_score=judged[i],
                           labeller="tester", at=1.0))
    chosen = set(labelled)
    expected = prediction_powered_mean([judged[i] for i in range(200) if i not in chosen],
                                       [judged[i] for i in labelled], [truth[i] for i in labelled])
    [estimate] = estimate_run(run_dir)
    got = estimate.mean_score.corrected
    assert got is not None and (got.labelled, got.unlabelled) == (40, 160)
    assert (got.value, got.low, got.high, got.weight) == pytest.approx(
        (expected.value, expected.low, expected.high, expected.weight), rel=1e-12)
    assert got.value < got.judge_mean - 0.08  # the lenient judge's bias is taken out
    passes = estimate.pass_rate.corrected
    assert passes is not None and passes.labelled == 40 and passes.unlabelled == 160
    assert main(["labels", "estimate", str(run_dir), "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["criterion"] == "g_eval"
    assert row["mean_score"]["corrected"] == pytest.approx(expected.value)
    assert row["mean_score"]["low"] == pytest.approx(expected.low)
    assert main(["labels", "estimate", str(run_dir)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("g_eval\n  pass rate: judge ")
    assert f"mean score: judge {expected.judge_mean:.3f}; corrected {expected.value:.3f}" in text


def test_labels_estimate_says_why_there_is_none(tmp_path: Path) -> None:
    run_dir = _stored_run(tmp_path, [0.5] * 5, [0.6, 0.4, 0.7, 0.8, 0.2])
    LabelStore(run_dir).append(Label(case_id="c0", criterion="g_eval", scoring=1, human="pass",
                                     labeller="tester", at=1.0))
    [estimate] = estimate_run(run_dir)
    assert estimate.pass_rate.corrected is None
    assert estimate.pass_rate.reason == "1 labelled case(s); at least 2 are needed"
    assert estimate.mean_score.reason == ("0 labelled case(s); at least 2 are needed with a "
                                          "human_score")


def test_human_scores_import_with_their_labels(tmp_path: Path) -> None:
    run_dir = _stored_run(tmp_path, [0.5] * 3, [0.6, 0.4, 0.7])
    rows = tmp_path / "labels.jsonl"
    rows.write_text("\n".join(json.dumps({"label": label, "metadata": {
        "case_id": case, "criterion": "g_eval", "human_score": score}})
        for case, label, score in (("c0", "pass", 0.9), ("c1", "fail", 0.1))) + "\n")
    assert import_labels(run_dir, rows, labeller="tester").added == 2
    stored = LabelStore(run_dir).latest()
    assert stored[("c0", "g_eval")].human_score == 0.9
    assert stored[("c1", "g_eval")].human_passed is False
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"label": "pass", "metadata": {
        "case_id": "c2", "criterion": "g_eval", "human_score": 1.5}}) + "\n")
    with pytest.raises(Exception, match="metadata.human_score"):
        import_labels(run_dir, bad, labeller="tester")
