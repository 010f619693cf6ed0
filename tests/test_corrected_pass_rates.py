"""Pass rates corrected for judge error and gates on measured judges: the statistics, then runs
through the real OpenAI SDK against the scripted judge server with simulated judges of known
TPR/TNR, then the CLI gates."""

from __future__ import annotations

import json
import math
import random
import re
import textwrap
from pathlib import Path

import pytest
from test_report_samples import chromium_dom

from referee.case import EvalCase
from referee.cli import main
from referee.errors import EvalGateFailure
from referee.evaluators import GEval
from referee.evaluators.calibration import (
    CalibrationEntry,
    CalibrationFile,
    read_calibration_file,
)
from referee.report.correction import corrected_pass_rate, rogan_gladen
from referee.report.model import EvalReport
from referee.run.judge_gate import JudgeGate
from referee.run.suite import EvalSuite
from referee.testing import RecordedRequest, ScriptedJudgeServer

CRITERIA = "Does the answer resolve the customer's question correctly?"
JUDGE_PASS, JUDGE_FAIL = "[looks-right]", "[looks-wrong]"


def wilson(passed: int, n: int, z: float = 1.96) -> tuple[float, float]:
    p = passed / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


# The statistics ----------------------------------------------------------------------------------

def test_rogan_gladen_inverts_the_judges_errors_and_is_undefined_for_a_coin():
    # True rate 0.5 seen by a judge with TPR 0.9, TNR 0.7: observed 0.9*0.5 + 0.3*0.5 = 0.6.
    assert rogan_gladen(0.6, 0.9, 0.7) == pytest.approx(0.5)
    assert rogan_gladen(0.99, 0.9, 0.7) == 1.0  # clipped
    assert rogan_gladen(0.1, 0.9, 0.7) == 0.0
    assert rogan_gladen(0.6, 0.5, 0.5) is None
    assert rogan_gladen(0.6, 0.3, 0.6) is None


def test_a_judge_no_better_than_a_coin_cannot_support_a_pass_rate():
    rate = corrected_pass_rate(60, 100, 50, 100, 50, 100)
    assert not rate.supported and rate.value is None and rate.low is None
    assert "cannot support a pass rate" in rate.reason
    # Good on average, but measured on so few labels that a coin is plausible.
    rate = corrected_pass_rate(60, 100, 2, 3, 2, 3)
    assert not rate.supported and "cannot support a pass rate" in rate.reason
    with pytest.raises(ValueError, match="labelled passes and labelled fails"):
        corrected_pass_rate(60, 100, 5, 5, 0, 0)


def test_the_interval_carries_the_calibrations_uncertainty_too():
    # The same run corrected with the same TPR/TNR measured on 40 or on 4,000 labels: the
    # smaller calibration must give the wider interval.
    small = corrected_pass_rate(180, 300, 18, 20, 14, 20)
    large = corrected_pass_rate(180, 300, 1800, 2000, 1400, 2000)
    assert small.value == pytest.approx(large.value) == pytest.approx(0.5)
    assert (small.high - small.low) > 1.5 * (large.high - large.low)
    assert large.low < 0.5 < large.high


def test_the_corrected_interval_covers_the_true_rate_across_seeds_and_the_raw_one_does_not():
    true_rate, tpr, tnr = 0.5, 0.9, 0.7
    trials, covered, raw_covered = 120, 0, 0
    for seed in range(trials):
        rng = random.Random(seed)
        passed = sum(rng.random() < (tpr if rng.random() < true_rate else 1 - tnr)
                     for _ in range(400))
        kept = sum(rng.random() < tpr for _ in range(150))
        caught = sum(rng.random() < tnr for _ in range(150))
        rate = corrected_pass_rate(passed, 400, kept, 150, caught, 150, draws=1000, seed=seed)
        covered += rate.supported and rate.low <= true_rate <= rate.high
        low, high = wilson(passed, 400)
        raw_covered += low <= true_rate <= high
    assert covered >= 0.9 * trials, covered
    assert raw_covered <= 0.05 * trials, raw_covered


def test_an_old_calibration_entry_still_loads_and_cannot_correct(tmp_path):
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({"format": "referee-calibration", "version": 1, "entries": [{
        "evaluator": "g_eval", "judge_provider": "openai", "judge_model": "gpt-4o-mini",
        "question_set": "-", "threshold": 0.5, "metric": "kappa", "n": 40,
        "date": "2026-11-01", "data_fingerprint": "abc", "kappa": 0.7}]}))
    [entry] = read_calibration_file(path).entries
    assert entry.kappa == 0.7 and entry.tpr is None and entry.error_counts is None


# Runs through the scripted judge server -------------------------------------------------------

def simulated_judge(request: RecordedRequest) -> str:
    """A judge that gives each output the verdict its marker says (the test decided it)."""
    score = 1.0 if JUDGE_PASS in request.prompt else 0.0
    return json.dumps({"score": score, "reason": "scripted"})


@pytest.fixture
def server(openai_judge_server):
    return openai_judge_server(simulated_judge)


def simulate(rng: random.Random, n: int, true_rate: float, tpr: float, tnr: float, tag: str
             ) -> list[tuple[EvalCase, str, bool]]:
    """(case, output, truly passes): outputs pass at ``true_rate``; the judge's verdict, written
    into the output, keeps a good one with probability ``tpr`` and catches a bad one with
    ``tnr``."""
    rows = []
    for i in range(n):
        good = rng.random() < true_rate
        judged_pass = rng.random() < tpr if good else rng.random() >= tnr
        marker = JUDGE_PASS if judged_pass else JUDGE_FAIL
        rows.append((EvalCase(eval_id=f"{tag}-{i}", input=f"Question {tag} {i}?"),
                     f"{marker} answer {i}", good))
    return rows


def entry_from_counts(cfg, kept: int, positives: int, caught: int, negatives: int, *,
                      threshold: float = 0.5, kappa: float = 0.6) -> CalibrationEntry:
    return CalibrationEntry(
        evaluator="g_eval", judge_provider=cfg.provider, judge_model=cfg.model,
        threshold=threshold, n=positives + negatives, date="2026-12-04",
        data_fingerprint="simulated", kappa=kappa, tpr=kept / positives,
        tnr=caught / negatives, positives=positives, negatives=negatives,
        agreement_source="in-sample")


def write_entries(path: Path, *entries: CalibrationEntry) -> Path:
    path.write_text(json.dumps(CalibrationFile(entries=list(entries)).model_dump(mode="json")))
    return path


def test_a_run_calibrated_by_referee_calibrate_recovers_the_true_pass_rate(
        server, tmp_path, monkeypatch):
    pytest.importorskip("numpy")
    from referee.calibrate import LabelledCase, calibrate

    cfg = server.judge_config(model="gpt-4o-mini")
    calibration = tmp_path / "calibration.json"
    true_rate, tpr, tnr = 0.5, 0.9, 0.6  # the judge shows 0.9 * 0.5 + 0.4 * 0.5 = 65%
    covered = raw_covered = 0
    seeds = range(3)
    for seed in seeds:
        rng = random.Random(seed)
        labelled = [LabelledCase.make(input=case.input, output=output, passed=good)
                    for case, output, good in simulate(rng, 200, 0.5, tpr, tnr, f"cal{seed}")]
        report = calibrate(GEval(CRITERIA, runs=1, judge=cfg), labelled, resamples=100,
                           runs_dir=tmp_path / "calibrations", folds=4)
        report.write_calibration_file(calibration)
        [entry] = read_calibration_file(calibration).entries
        assert entry.positives + entry.negatives == 200
        assert entry.agreement_source == "cross-validated, 4 folds"
        # The judge's measured errors are the simulated ones, up to sampling.
        assert abs(entry.tpr - tpr) < 0.1 and abs(entry.tnr - tnr) < 0.15

        monkeypatch.setenv("REFEREE_CALIBRATION_FILE", str(calibration))
        rows = simulate(rng, 300, true_rate, tpr, tnr, f"run{seed}")
        suite = EvalSuite(name="support answers")
        suite.add_evaluator(GEval(CRITERIA, runs=1, judge=cfg, threshold="calibrated"))
        run = suite.run_on_cases([(case, output) for case, output, _ in rows], verbose=False,
                                 save=False)
        monkeypatch.delenv("REFEREE_CALIBRATION_FILE")
        assert run.judge_calibration["g_eval"].matched
        corrected = run.corrected_pass_rate
        assert corrected is not None and corrected.supported
        assert corrected.scored == 300
        covered += corrected.low <= true_rate <= corrected.high
        low, high = wilson(corrected.passed, corrected.scored)
        raw_covered += low <= true_rate <= high
        # report.json carries it beside the raw rate.
        data = run.to_dict(with_cases=False)
        assert data["corrected"]["run"]["value"] == pytest.approx(corrected.value)
        assert EvalReport.from_dict(data).judge_calibration["g_eval"].tpr == entry.tpr
    assert covered >= 2
    assert raw_covered == 0  # the raw rate is biased by the judge's errors


def test_a_run_judged_at_another_threshold_than_calibrated_is_not_corrected(
        server, tmp_path, monkeypatch):
    cfg = server.judge_config(model="gpt-4o-mini")
    calibration = write_entries(tmp_path / "calibration.json",
                                entry_from_counts(cfg, 90, 100, 70, 100, threshold=0.5))
    monkeypatch.setenv("REFEREE_CALIBRATION_FILE", str(calibration))
    rows = simulate(random.Random(1), 20, 0.5, 0.9, 0.7, "t")
    suite = EvalSuite(name="s")
    suite.add_evaluator(GEval(CRITERIA, runs=1, judge=cfg, threshold=0.8))
    run = suite.run_on_cases([(c, o) for c, o, _ in rows], verbose=False, save=False)
    record = run.judge_calibration["g_eval"]
    assert not record.matched and "threshold 0.5" in record.reason
    assert run.corrected_pass_rates() == {}
    with pytest.raises(EvalGateFailure, match="g_eval .*calibrated at threshold 0.5"):
        suite.run_on_cases([(c, o) for c, o, _ in rows], verbose=False, save=False,
                           judge_gate=JudgeGate(require_calibrated=True))


# The CLI gates ----------------------------------------------------------------------------------

SUITE = textwrap.dedent('''
    import os
    from referee import EvalCase, EvalSuite
    from referee.evaluators import Contains, GEval
    from referee.judge import JudgeConfig

    JUDGE = JudgeConfig(provider="openai", model="gpt-4o-mini", api_style="chat",
                        base_url=os.environ["OPENAI_BASE_URL"], cache=False)
    suite = EvalSuite(name="gated")
    suite.add_evaluator(GEval("{criteria}", runs=1, judge=JUDGE, threshold=0.5))
    if os.environ.get("WITH_CONTAINS"):
        suite.add_evaluator(Contains(["answer"]))
    OUTPUTS = {outputs}
    suite.add_cases([EvalCase(eval_id=key, input=key) for key in OUTPUTS])

    def model(question):
        return OUTPUTS[question]
''')


def suite_file(tmp_path: Path, judged_pass: int, judged_fail: int) -> Path:
    outputs = {f"q{i}": f"{JUDGE_PASS if i < judged_pass else JUDGE_FAIL} answer {i}"
               for i in range(judged_pass + judged_fail)}
    path = tmp_path / "gated_suite.py"
    path.write_text(SUITE.format(criteria=CRITERIA, outputs=repr(outputs)))
    return path


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def gated(server, tmp_path, monkeypatch):
    """A suite of 100 cases the judge passes 60 of, and the calibration file it reads."""
    monkeypatch.setenv("REFEREE_CALIBRATION_FILE", str(tmp_path / "calibration.json"))
    cfg = server.judge_config(model="gpt-4o-mini")
    return suite_file(tmp_path, 60, 40), tmp_path / "calibration.json", cfg


def test_require_calibrated_refuses_an_unmeasured_judge_and_passes_a_measured_one(
        gated, tmp_path, capsys):
    suite, calibration, cfg = gated
    out_dir = str(tmp_path / "runs")
    code, _, err = run_cli(capsys, "run", str(suite), "--out", out_dir, "--require-calibrated",
                           "--format", "json")
    assert code == 1
    assert "judged criteria without a calibration" in err
    assert "g_eval (openai/gpt-4o-mini):" in err and "no entry for g_eval" in err
    assert "the run is stored in" in err

    write_entries(calibration, entry_from_counts(cfg, 90, 100, 70, 100, kappa=0.45))
    code, out, err = run_cli(capsys, "run", str(suite), "--out", out_dir, "--require-calibrated")
    assert code == 0, err
    # The console shows the corrected rate beside the raw one: 60/100 with TPR 0.9, TNR 0.7.
    assert "raw 60.0% (60/100); corrected 50.0% [" in out

    code, _, err = run_cli(capsys, "run", str(suite), "--out", out_dir, "--min-kappa", "0.6",
                           "--format", "json")
    assert code == 1
    assert "g_eval (openai/gpt-4o-mini): calibrated kappa 0.45 < 0.60" in err


def test_gate_on_corrected_gates_the_lower_bound_not_the_raw_rate(gated, tmp_path, capsys):
    suite, calibration, cfg = gated
    out_dir = str(tmp_path / "runs")
    write_entries(calibration, entry_from_counts(cfg, 900, 1000, 700, 1000))
    # Raw 60% clears 0.55; corrected 50% (interval about 40-60%) does not.
    code, _, err = run_cli(capsys, "run", str(suite), "--out", out_dir, "--fail-threshold",
                           "0.55", "--format", "json")
    assert code == 0, err
    code, _, err = run_cli(capsys, "run", str(suite), "--out", out_dir, "--fail-threshold",
                           "0.55", "--gate-on", "corrected", "--format", "json")
    assert code == 1
    assert "(--gate-on corrected)" in err
    assert "g_eval (openai/gpt-4o-mini): corrected pass rate lower bound" in err
    code, _, err = run_cli(capsys, "run", str(suite), "--out", out_dir, "--fail-threshold",
                           "0.3", "--gate-on", "corrected", "--format", "json")
    assert code == 0, err
    report = json.loads(next((tmp_path / "runs").glob("*/report.json")).read_text())
    assert report["corrected"]["criteria"]["g_eval"]["value"] == pytest.approx(0.5)


def test_gate_on_corrected_refuses_a_judge_that_cannot_support_a_pass_rate(
        gated, tmp_path, capsys):
    suite, calibration, cfg = gated
    write_entries(calibration, entry_from_counts(cfg, 5, 10, 5, 10))
    code, out, err = run_cli(capsys, "run", str(suite), "--out", str(tmp_path / "runs"),
                             "--fail-threshold", "0.1", "--gate-on", "corrected")
    assert code == 1
    # The console wraps long lines where the run's path happens to fall: read it unwrapped.
    said = "cannotsupportapassrate"
    assert said in re.sub(r"\s+", "", err) and said in re.sub(r"\s+", "", out)


def test_gate_on_corrected_gates_a_criterion_without_a_judge_on_its_raw_rate(
        gated, tmp_path, capsys, monkeypatch):
    suite, calibration, cfg = gated
    write_entries(calibration, entry_from_counts(cfg, 900, 1000, 700, 1000))
    monkeypatch.setenv("WITH_CONTAINS", "1")
    code, out, err = run_cli(capsys, "run", str(suite), "--out", str(tmp_path / "runs"),
                             "--fail-threshold", "0.3", "--gate-on", "corrected")
    assert code == 0, err
    assert "run: no corrected pass rate for the run" in out
    # The HTML report shows the corrected rate beside the raw one, with its numbers.
    [page] = (tmp_path / "runs").glob("*/report.html")
    dom = chromium_dom(page.as_uri(), tmp_path)
    assert re.search(r'<body[^>]*data-js="on"', dom)
    row = re.search(r'<tr data-criterion="g_eval" data-value="([0-9.]+)" data-low="([0-9.]+)" '
                    r'data-high="([0-9.]+)">(.*?)</tr>', dom, re.DOTALL)
    assert row is not None, dom[dom.find("corrected"):][:2000]
    value, low, high = (float(row.group(i)) for i in (1, 2, 3))
    assert value == pytest.approx(0.5) and low < 0.5 < high
    assert "60.0% (60/100)" in row.group(4) and "TPR 0.90 of 1000" in row.group(4)
    assert 'id="corrected-run-note"' in dom
    assert "<tr data-criterion=\"contains\"" not in dom  # no judge, nothing to correct


def test_gate_on_corrected_needs_a_fail_threshold(gated, tmp_path, capsys):
    suite, _, _ = gated
    code, _, err = run_cli(capsys, "run", str(suite), "--out", str(tmp_path / "runs"),
                           "--gate-on", "corrected")
    assert code == 2 and "--fail-threshold" in err
    assert not (tmp_path / "runs").exists()



def test_agent_evaluator_gates_its_judged_criteria_on_calibration(isolated_judge, tmp_path,
                                                                 monkeypatch):
    from referee.config import CriteriaConfig, CriterionConfig, EvalConfig
    from referee.execution import ExecutionResult
    from referee.run.agent import AgentEvaluator

    calibration = tmp_path / "calibration.json"
    monkeypatch.setenv("REFEREE_CALIBRATION_FILE", str(calibration))
    cases = [EvalCase.single_turn(f"refund window {i}?", "30 days", eval_id=f"c{i}")
             for i in range(3)]
    with ScriptedJudgeServer(json.dumps({"score": 0.9, "reasoning": "same"})) as server:
        config = EvalConfig(criteria=CriteriaConfig(response_match=CriterionConfig(
            judge_model="openai/local-llama", num_samples=1, base_url=server.base_url())))
        evaluator = AgentEvaluator(lambda case: ExecutionResult(actual_response="30 days."),
                                   config=config, save=False)
        gate = JudgeGate(require_calibrated=True)
        with pytest.raises(EvalGateFailure, match=r"response_match_score \(openai/local-llama\): "
                                                  r".*has no entry for response_match_score"):
            evaluator.evaluate_sync(cases, verbose=False, judge_gate=gate)
        entry = CalibrationEntry(
            evaluator="response_match_score", judge_provider="openai", judge_model="local-llama",
            threshold=0.8, n=200, date="2026-12-04", data_fingerprint="simulated", kappa=0.7,
            tpr=0.9, tnr=0.8, positives=100, negatives=100)
        write_entries(calibration, entry)
        report = evaluator.evaluate_sync(cases, verbose=False, judge_gate=gate)
        assert report.judge_calibration["response_match_score"].matched
        assert report.corrected_pass_rate is not None  # 3 of 3 passed, corrected with TPR/TNR


def test_a_broken_calibration_file_never_stops_a_run(server, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default file, .referee/calibration.json, is consulted
    (tmp_path / ".referee").mkdir()
    (tmp_path / ".referee" / "calibration.json").write_text("{not json")
    suite = EvalSuite(name="s")
    suite.add_evaluator(GEval(CRITERIA, runs=1, judge=server.judge_config(model="gpt-4o-mini"),
                              threshold=0.5))
    rows = simulate(random.Random(3), 4, 0.5, 0.9, 0.7, "b")
    run = suite.run_on_cases([(c, o) for c, o, _ in rows], verbose=False, save=False)
    assert run.evaluated == 4
    record = run.judge_calibration["g_eval"]
    assert not record.matched and "calibration file cannot be read" in record.reason
    assert "invalid JSON" in record.reason
