"""A stored run with people's labels shows, in its console, JSON and HTML reports (and so in the
viewer, which serves the HTML report), each judged criterion's mean score corrected by the labels
(prediction-powered inference) with its interval, beside the corrected pass rates."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from stored_runs import store_scored_run

from referee.labels._store import Label, LabelStore
from referee.record import EvalReport
from referee.report.console import render_text
from referee.report.html import render_html
from referee.report.json_report import lean_report_dict
from referee.report.writers import write_reports
from referee.stats import prediction_powered_mean
from referee.store import load_run

CASES = 60
LABELLED = list(range(0, CASES, 4))  # 15 of 60


def _judged(rng: random.Random) -> tuple[list[float], list[float]]:
    truth = [rng.random() for _ in range(CASES)]
    return truth, [min(1.0, t + 0.15 + rng.gauss(0, 0.05)) for t in truth]  # a lenient judge


def _stored_run(tmp_path: Path, judged: list[float]) -> Path:
    return store_scored_run(tmp_path / "runs", judged, name="labelled")


@pytest.fixture
def labelled_run(tmp_path: Path):
    truth, judged = _judged(random.Random(5))
    run_dir = _stored_run(tmp_path, judged)
    store = LabelStore(run_dir)
    for i in LABELLED:
        store.append(Label(case_id=f"c{i}", criterion="g_eval", scoring=1,
                           human="pass" if truth[i] >= 0.5 else "fail", human_score=truth[i],
                           labeller="tester", at=1.0))
    expected = prediction_powered_mean(
        [judged[i] for i in range(CASES) if i not in LABELLED],
        [judged[i] for i in LABELLED], [truth[i] for i in LABELLED])
    return run_dir, expected


def test_the_console_shows_the_corrected_mean_with_its_interval(labelled_run) -> None:
    run_dir, expected = labelled_run
    text = render_text(load_run(run_dir), width=200)
    assert "Judge numbers corrected by people's labels" in text
    assert (f"g_eval: mean score: judge {expected.judge_mean:.3f}; corrected "
            f"{expected.value:.3f} ({expected.correction:+.3f}) [{expected.low:.3f}, "
            f"{expected.high:.3f}]") in text
    assert "g_eval: pass rate: judge " in text
    assert expected.value < expected.judge_mean - 0.1  # the lenient judge's bias is taken out


def test_the_json_report_carries_the_estimates(labelled_run) -> None:
    run_dir, expected = labelled_run
    data = lean_report_dict(load_run(run_dir))
    mean = data["corrected_by_labels"]["criteria"]["g_eval"]["mean_score"]
    assert (mean["corrected"], mean["low"], mean["high"]) == pytest.approx(
        (expected.value, expected.low, expected.high), rel=1e-12)
    assert mean["labelled"] == len(LABELLED) and mean["scored"] == CASES
    assert data["corrected_by_labels"]["criteria"]["g_eval"]["pass_rate"]["corrected"] \
        is not None
    # The stored run's own report files, written again, carry them too.
    written = write_reports(load_run(run_dir), run_dir, "json,html")
    on_disk = json.loads(written["json"].read_text())
    assert on_disk["corrected_by_labels"]["criteria"]["g_eval"]["mean_score"]["corrected"] \
        == pytest.approx(expected.value)
    assert 'id="corrected-by-labels"' in written["html"].read_text()


def test_the_html_report_shows_a_row_per_quantity(labelled_run) -> None:
    run_dir, expected = labelled_run
    page = render_html(load_run(run_dir))
    assert "Judge numbers corrected by people" in page
    assert (f'data-criterion="g_eval" data-quantity="mean score" data-value="{expected.value}" '
            f'data-low="{expected.low}" data-high="{expected.high}"') in page
    assert f"{expected.low:.3f} – {expected.high:.3f}" in page
    assert 'data-quantity="pass rate"' in page


def test_a_run_without_labels_shows_none(tmp_path: Path) -> None:
    _, judged = _judged(random.Random(1))
    report = load_run(_stored_run(tmp_path, judged))
    assert "corrected by people" not in render_text(report, width=200)
    assert "corrected_by_labels" not in lean_report_dict(report)
    assert "corrected-by-labels" not in render_html(report)
    # Nor does a run held in memory only.
    assert "corrected_by_labels" not in lean_report_dict(EvalReport(name="x"))


def test_too_few_labels_say_why(tmp_path: Path) -> None:
    _, judged = _judged(random.Random(2))
    run_dir = _stored_run(tmp_path, judged)
    LabelStore(run_dir).append(Label(case_id="c0", criterion="g_eval", scoring=1, human="pass",
                                     human_score=0.9, labeller="tester", at=1.0))
    text = render_text(load_run(run_dir), width=200)
    assert ("g_eval: mean score: no estimate (1 labelled case(s); at least 2 are needed with a "
            "human_score)") in text


def test_unreadable_labels_are_named_and_the_report_still_renders(tmp_path: Path) -> None:
    _, judged = _judged(random.Random(3))
    run_dir = _stored_run(tmp_path, judged)
    (run_dir / "labels.jsonl").write_text('{"case_id": "c0"}\nnot json\n{"case_id": "c1"}\n')
    report = load_run(run_dir)
    text = render_text(report, width=200)
    assert "labels not read: " in text and "labels.jsonl" in text
    assert lean_report_dict(report)["corrected_by_labels"]["problem"].startswith("labels not read")
