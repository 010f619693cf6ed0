"""Sequential gates on pass rates corrected for judge error (--sequential --gate-on corrected),
through the real OpenAI SDK against the scripted judge server with a simulated judge of known
TPR/TNR and its calibration file."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from test_corrected_pass_rates import (
    CRITERIA,
    entry_from_counts,
    simulate,
    simulated_judge,
    write_entries,
)

from referee import EvalCase
from referee.errors import EvalGateFailure
from referee.evaluators import GEval
from referee.evaluators.deterministic import Contains
from referee.record import CaseResult, CaseStatus, JudgeCalibration
from referee.result import CriterionResult
from referee.run.judge_gate import JudgeGate
from referee.run.sequential_corrected import CorrectedCriteria
from referee.run.suite import EvalSuite
from referee.stats import decide_corrected, observed_threshold

CASES = 400


@pytest.fixture
def judged(openai_judge_server, tmp_path, monkeypatch):
    """A judge that keeps 90% of good outputs and catches 70% of bad ones, calibrated on 2,000
    labelled rows, and a suite that runs its verdicts sequentially."""
    server = openai_judge_server(simulated_judge)
    cfg = server.judge_config(model="gpt-4o-mini")
    calibration = write_entries(tmp_path / "calibration.json",
                                entry_from_counts(cfg, 900, 1000, 700, 1000))
    monkeypatch.setenv("REFEREE_CALIBRATION_FILE", str(calibration))

    def run(true_rate: float, threshold: float):
        rows = simulate(random.Random(3), CASES, true_rate, 0.9, 0.7, f"r{true_rate}")
        suite = EvalSuite(name="sequential corrected")
        suite.add_evaluator(GEval(CRITERIA, runs=1, judge=cfg, threshold=0.5))
        return suite.run_on_cases([(case, output) for case, output, _ in rows], verbose=False,
                                  fail_threshold=threshold, sequential=True, concurrency=1,
                                  judge_gate=JudgeGate(gate_on="corrected"),
                                  runs_dir=tmp_path / "runs")

    return server, run


def test_a_clearly_good_run_settles_above_on_the_corrected_rate(judged) -> None:
    server, run = judged
    # True 0.95: the judge shows 0.9 x 0.95 + 0.3 x 0.05 = 0.87; a true 0.6 would show at most
    # about 0.68 with the calibration's bounds.
    report = run(0.95, 0.6)
    settled = report.metadata["sequential"]
    assert settled["decision"] == "above" and report.total < CASES / 2
    assert server.request_count == report.total  # the cases not run were never judged
    assert settled["criteria"]["g_eval"]["decision"] == "above"
    assert settled["criteria"]["g_eval"]["corrected"] is True
    assert settled["passes"] + settled["fails"] == report.total and settled["interval"] is None
    assert "every criterion's pass rate, corrected for judge error, >= 0.60" in settled["summary"]


def test_a_clearly_bad_run_settles_below_and_fails(judged) -> None:
    server, run = judged
    with pytest.raises(EvalGateFailure) as failure:
        run(0.3, 0.6)  # the judge shows 0.9 x 0.3 + 0.3 x 0.7 = 0.48
    report = failure.value.report
    assert report.metadata["sequential"]["decision"] == "below" and report.total < CASES / 2
    assert "g_eval's pass rate, corrected for judge error, < 0.60" in str(failure.value)


def test_the_judges_errors_move_the_threshold_it_is_tested_at() -> None:
    # A lenient judge (TNR 0.5) passes half the bad outputs: at a true 0.7 it shows 0.85.
    assert observed_threshold(0.7, 0.9, 0.5) == pytest.approx(0.63 + 0.15)
    # 85 of 100 judged passes: clearly above a raw 0.7, not above a corrected one.
    assert decide_corrected(85, 15, 0.7, tpr=(0.9, 0.9), tnr=(0.5, 0.5),
                            confidence=0.95) is None
    assert decide_corrected(97, 3, 0.7, tpr=(0.9, 0.9), tnr=(0.5, 0.5),
                            confidence=0.95) == "above"
    # A calibration whose bounds allow a coin can support nothing.
    assert decide_corrected(100, 0, 0.5, tpr=(0.5, 0.9), tnr=(0.4, 0.9),
                            confidence=0.95) is None


def test_an_uncalibrated_judged_criterion_never_settles_above() -> None:
    criteria = CorrectedCriteria(0.5, 0.95, ("g_eval", "contains"), {
        "g_eval": JudgeCalibration(evaluator="g_eval", judge="openai/x", question_set="-",
                                   file="c.json", matched=False, reason="no entry")})
    for i in range(200):
        criteria.observe(CaseResult(index=i, eval_id=f"c{i}", status=CaseStatus.PASSED,
                                    criterion_results=[
                                        CriterionResult(criterion="g_eval", score=1.0,
                                                        passed=True, threshold=0.5),
                                        CriterionResult(criterion="contains", score=1.0,
                                                        passed=True, threshold=1.0)]))
    assert criteria.settled == {"contains": "above"} and criteria.decision() is None


def test_a_criterion_without_a_judge_is_tested_on_its_raw_verdicts(tmp_path: Path) -> None:
    suite = EvalSuite("raw").add_evaluator(Contains(["ok"]))
    pairs = [(EvalCase(input=f"q{i}"), "ok") for i in range(300)]
    report = suite.run_on_cases(pairs, verbose=False, fail_threshold=0.8, sequential=True,
                                judge_gate=JudgeGate(gate_on="corrected"), concurrency=1,
                                runs_dir=tmp_path)
    assert report.metadata["sequential"]["decision"] == "above" and report.total < 100
    assert report.metadata["sequential"]["criteria"]["contains"]["corrected"] is False
