"""Sequential gates: an anytime-valid test of the pass rate, and runs that stop judging once the
gate is settled, record the rest as not run, and finish them on resume."""

from __future__ import annotations

import math
import random
import sys
import textwrap
from pathlib import Path

import pytest

from referee import EvalCase, EvalSuite
from referee.errors import EvalGateFailure
from referee.evaluators.deterministic import Contains
from referee.run.options import RunOptions
from referee.run.sequential import DEFAULT_SEED, seeded_order
from referee.stats import confidence_sequence, decide, log_evidence, log_incomplete_beta
from referee.store import RunStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ at the root

scipy_special = pytest.importorskip("scipy.special")
scipy_integrate = pytest.importorskip("scipy.integrate")


# The test --------------------------------------------------------------------------------------

@pytest.mark.parametrize("a, b, x", [(3, 5, 0.2), (1, 1, 0.5), (101, 11, 0.8), (900, 100, 0.8),
                                     (50, 200, 0.8), (7, 2, 0.95), (400, 600, 0.35)])
def test_incomplete_beta_matches_scipy(a: int, b: int, x: float) -> None:
    lower, upper = log_incomplete_beta(a, b, x)
    assert math.exp(lower) == pytest.approx(scipy_special.betainc(a, b, x), rel=1e-9, abs=1e-300)
    assert math.exp(upper) == pytest.approx(scipy_special.betaincc(a, b, x), rel=1e-9, abs=1e-300)


@pytest.mark.parametrize("passes, fails, threshold", [(20, 0, 0.8), (26, 1, 0.8), (30, 20, 0.8),
                                                      (5, 5, 0.5), (60, 40, 0.8)])
def test_evidence_is_the_mixture_likelihood_ratio(passes: int, fails: int,
                                                  threshold: float) -> None:
    """Each side's evidence is the likelihood ratio against the threshold averaged over a
    uniform prior on its side: integrated numerically here."""
    def ratio(p: float) -> float:
        return math.exp(passes * math.log(p / threshold)
                        + fails * math.log((1 - p) / (1 - threshold)))

    above = scipy_integrate.quad(ratio, threshold, 1, epsabs=0, epsrel=1e-10)[0] / (1 - threshold)
    below = scipy_integrate.quad(ratio, 0, threshold, epsabs=0, epsrel=1e-10)[0] / threshold
    ours_above, ours_below = log_evidence(passes, fails, threshold)
    assert math.exp(ours_above) == pytest.approx(above, rel=1e-7)
    assert math.exp(ours_below) == pytest.approx(below, rel=1e-7)


def test_decide_by_hand() -> None:
    # 20 passes of 20 at 0.8: (1 - 0.8**21) / 21 / 0.2 / 0.8**20 = 20.46 >= 1 / 0.05.
    assert math.exp(log_evidence(20, 0, 0.8)[0]) == pytest.approx(
        (1 - 0.8 ** 21) / 21 / 0.2 / 0.8 ** 20)
    assert decide(20, 0, 0.8, 0.95) == "above"
    assert decide(19, 0, 0.8, 0.95) is None  # 16.6: not yet
    # k fails of k at 0.5: (1 - 0.5**(k+1)) / (k+1) / 0.5**(k+1): 18.1 at k=6, 31.9 at k=7.
    assert math.exp(log_evidence(0, 7, 0.5)[1]) == pytest.approx((1 - 0.5 ** 8) / 8 / 0.5 ** 8)
    assert decide(0, 6, 0.5, 0.95) is None and decide(0, 7, 0.5, 0.95) == "below"
    assert decide(0, 0, 0.0, 0.95) == "above" and decide(5, 0, 1.0, 0.95) is None
    assert decide(5, 1, 1.0, 0.95) == "below"


def test_the_confidence_sequence_is_where_neither_side_decides() -> None:
    interval = confidence_sequence(90, 10, 0.95)
    assert interval.low < 0.9 < interval.high
    assert decide(90, 10, interval.low - 0.002, 0.95) == "above"
    assert decide(90, 10, interval.low + 0.002, 0.95) is None
    assert decide(90, 10, interval.high + 0.002, 0.95) == "below"
    nothing = confidence_sequence(0, 0, 0.95)
    assert (nothing.low, nothing.high) == (0.0, 1.0)


@pytest.mark.parametrize("true_rate, wrong", [(0.78, "above"), (0.80, "below"), (0.82, "below")])
def test_looking_after_every_case_keeps_the_error_rate(true_rate: float, wrong: str) -> None:
    """The point of an anytime-valid test: asked after each of 300 cases, it still decides
    the wrong way in at most 5% of runs. A repeated fixed-n 95% interval would not."""
    rng = random.Random(f"anytime:{true_rate}")
    wrong_runs = naive_wrong = 0
    runs = 300
    for _ in range(runs):
        passes = fails = 0
        naive_done = False
        for _ in range(300):
            if rng.random() < true_rate:
                passes += 1
            else:
                fails += 1
            n = passes + fails
            rate = passes / n
            spread = 1.96 * math.sqrt(max(rate * (1 - rate), 1e-9) / n)
            if not naive_done and n >= 10 and (rate - spread > 0.8 or rate + spread < 0.8):
                naive_done = True
                naive_wrong += (rate > 0.8) == (wrong == "above")
            decision = decide(passes, fails, 0.8, 0.95)
            if decision is not None:
                wrong_runs += decision == wrong
                break
    assert wrong_runs / runs <= 0.05
    if true_rate == 0.80:  # peeking at a fixed-n interval after every case errs far more often
        assert naive_wrong / runs > 0.10


# Runs ------------------------------------------------------------------------------------------

def _suite(total: int, passing: set[int]) -> tuple[EvalSuite, object, list[int]]:
    suite = EvalSuite("sequential").add_cases([EvalCase(input=f"q{i}") for i in range(total)])
    suite.add_evaluators(Contains(["ok"]))
    called: list[int] = []

    def model(question: str) -> str:
        index = int(question[1:])
        called.append(index)
        return "ok" if index in passing else "no"

    return suite, model, called


def _passing(total: int, rate: float, seed: int = 1) -> set[int]:
    rng = random.Random(seed)
    return {i for i in range(total) if rng.random() < rate}


def test_a_clear_pass_stops_early_and_resume_finishes(tmp_path: Path) -> None:
    suite, model, called = _suite(400, _passing(400, 0.95))
    report = suite.run(model, verbose=False, fail_threshold=0.8, sequential=True,
                       runs_dir=tmp_path, concurrency=1)
    settled = report.metadata["sequential"]
    assert settled["decision"] == "above" and settled["of"] == 400
    assert report.total == settled["ran"] == len(called) < 100
    assert settled["not_run"] == 400 - report.total
    assert settled["summary"].startswith(f"stopped after {report.total} of 400 cases: pass rate "
                                         ">= 0.80 with 95% confidence")
    # The seeded order, not the first cases: the cases that ran are the order's first ones.
    assert called == seeded_order(400, DEFAULT_SEED)[:len(called)]
    # Not run means absent, never failed: only the cases that ran are stored.
    run_dir = report.metadata["run_dir"]
    assert len(list(RunStore(run_dir).stream_cases())) == report.total
    assert report.failed == report.total - report.passed
    # A resume without --sequential finishes the others, and none of the first runs again.
    resumed = suite.run(model, verbose=False, fail_threshold=0.8, resume=run_dir, concurrency=4)
    assert resumed.total == 400 and len(called) == 400 and len(set(called)) == 400
    assert "sequential" not in resumed.metadata


def test_the_reports_say_what_was_settled(tmp_path: Path) -> None:
    import io

    from rich.console import Console

    from referee.report.console import render_console
    from referee.report.html import render_html

    suite, model, _ = _suite(300, _passing(300, 0.97))
    report = suite.run(model, verbose=False, fail_threshold=0.8, sequential=True,
                       runs_dir=tmp_path, concurrency=1)
    summary = report.metadata["sequential"]["summary"]
    out = io.StringIO()
    render_console(report, Console(file=out, width=200))
    assert summary in out.getvalue()
    escaped = summary.replace(">", "&gt;")
    assert f'<div class="meta sequential"><span>{escaped}</span></div>' in render_html(report)
    stored = RunStore(report.metadata["run_dir"]).load()
    assert stored.metadata["sequential"]["decision"] == "above"  # report.json keeps it
    low, high = stored.metadata["sequential"]["interval"]
    assert 0.8 < low < high <= 1.0  # the anytime-valid interval when it settled excludes 0.8


def test_quarantined_flaky_cases_are_no_evidence(tmp_path: Path) -> None:
    suite = EvalSuite("flaky-sequential").add_cases([EvalCase(input=f"q{i}") for i in range(40)])
    suite.add_evaluators(Contains(["ok"]))
    calls: dict[str, int] = {}

    def model(question: str) -> str:  # every case flips: passes its first run only
        calls[question] = calls.get(question, 0) + 1
        return "ok" if calls[question] == 1 else "no"

    with pytest.raises(EvalGateFailure):
        suite.run(model, verbose=False, fail_threshold=0.5, sequential=True, runs=2,
                  flaky="quarantine", runs_dir=tmp_path)
    [run] = [RunStore(d).load() for d in tmp_path.iterdir()]
    settled = run.metadata["sequential"]
    assert run.total == 40 and (settled["passes"], settled["fails"]) == (0, 0)
    assert settled["decision"] is None  # no evidence, so every case ran


def test_a_clear_fail_stops_early_and_fails_the_gate(tmp_path: Path) -> None:
    suite, model, called = _suite(500, _passing(500, 0.6))
    with pytest.raises(EvalGateFailure) as failure:
        suite.run(model, verbose=False, fail_threshold=0.8, sequential=True, runs_dir=tmp_path,
                  concurrency=2)
    report = failure.value.report
    assert report.metadata["sequential"]["decision"] == "below"
    assert report.total < 150 and len(called) == report.total
    assert "Sequential gate: stopped after" in str(failure.value)
    assert "pass rate < 0.80 with 95% confidence" in str(failure.value)


def test_a_settled_run_resumed_sequentially_runs_nothing_more(tmp_path: Path) -> None:
    suite, model, called = _suite(300, _passing(300, 0.97))
    first = suite.run(model, verbose=False, fail_threshold=0.8, sequential=True,
                      runs_dir=tmp_path, concurrency=1)
    ran = len(called)
    again = suite.run(model, verbose=False, fail_threshold=0.8, sequential=True,
                      resume=first.metadata["run_dir"], concurrency=1)
    assert len(called) == ran  # the kept cases already settle it
    assert again.metadata["sequential"]["decision"] == "above"
    assert again.metadata["sequential"]["ran"] == again.total == first.total


def test_an_unsettled_run_judges_every_case(tmp_path: Path) -> None:
    suite, model, called = _suite(60, _passing(60, 0.8, seed=4))
    report = suite.run(model, verbose=False, fail_threshold=0.5, sequential=True,
                       runs_dir=tmp_path, sequential_confidence=0.999999)
    assert report.total == 60 == len(called)
    assert report.metadata["sequential"]["decision"] is None
    assert "not settled after 60 of 60 cases" in report.metadata["sequential"]["summary"]


def test_errors_are_no_evidence(tmp_path: Path) -> None:
    suite = EvalSuite("errors").add_cases([EvalCase(input=f"q{i}") for i in range(50)])
    suite.add_evaluators(Contains(["ok"]))

    def broken(question: str) -> str:
        raise RuntimeError("down")

    with pytest.raises(EvalGateFailure):  # nothing was evaluated
        suite.run(broken, verbose=False, fail_threshold=0.8, sequential=True, runs_dir=tmp_path)
    [run] = [RunStore(d).load() for d in tmp_path.iterdir()]
    assert run.total == 50 and run.errors == 50  # nothing settled it: every case ran
    assert run.metadata["sequential"]["decision"] is None


@pytest.mark.parametrize("settings, message", [
    ({"sequential": True}, "sequential=True stops once fail_threshold is settled; give one"),
    ({"sequential": True, "fail_threshold": 0.8, "sequential_confidence": 1.5},
     "sequential_confidence must be between 0 and 1"),
    ({"sequential": True, "fail_threshold": 0.8, "backend": "ray"},
     "runs on the local backend only"),
])
def test_bad_sequential_options_are_refused(settings: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RunOptions(**settings)


# The command line ------------------------------------------------------------------------------

SUITE_FILE = """
    import random
    from referee import EvalCase, EvalSuite
    from referee.evaluators.deterministic import Contains

    rng = random.Random(2)
    PASSING = {i for i in range(300) if rng.random() < 0.95}
    suite = EvalSuite("cli-sequential").add_cases([EvalCase(input=f"q{i}") for i in range(300)])
    suite.add_evaluators(Contains(["ok"]))

    def model(question):
        return "ok" if int(question[1:]) in PASSING else "no"
"""


def test_cli_sequential_and_full(tmp_path: Path, capsys) -> None:
    from referee.cli import main

    target = tmp_path / "evals.py"
    target.write_text(textwrap.dedent(SUITE_FILE))
    runs = tmp_path / "runs"
    assert main(["run", str(target), "--out", str(runs), "--fail-threshold", "0.8",
                 "--sequential", "--concurrency", "1"]) == 0
    out = capsys.readouterr().out
    assert "stopped after" in out and "of 300 cases: pass rate >= 0.80 with 95% confidence" in out
    assert main(["run", str(target), "--out", str(runs), "--fail-threshold", "0.8",
                 "--sequential", "--full", "-q"]) == 0
    totals = sorted(RunStore(d).load().total for d in runs.iterdir())
    assert totals[-1] == 300 and totals[0] < 100
    assert main(["run", str(target), "--out", str(runs), "--sequential"]) == 2
    assert "--sequential stops once --fail-threshold RATE is settled" in capsys.readouterr().err


# The simulation harness ------------------------------------------------------------------------

def test_the_simulation_harness_counts_what_it_reports() -> None:
    from benchmarks.sequential_gate import format_table, run_gate, scenario

    assert run_gate([True] * 20, 0.8, 0.95) == ("above", 20)
    assert run_gate([True] * 19, 0.8, 0.95) == (None, 19)
    row = scenario("finite", 0.95, seeds=5, cases=200)
    assert row.decided_early == 5 and row.wrong == 0 and row.mean_judged < 100
    assert "| finite | 0.95 | 5 | 5 | 0 |" in format_table([row])
    # A corrected gate tests the judge's verdicts through its calibration: a lenient judge's
    # passes are weaker evidence, so the same verdicts take more cases to settle.
    rng = random.Random(5)
    verdicts = [rng.random() < 0.9 for _ in range(1000)]
    raw, corrected_run = run_gate(verdicts, 0.7, 0.95), run_gate(verdicts, 0.7, 0.95,
                                                                 corrected=True)
    assert raw[0] == corrected_run[0] == "above" and corrected_run[1] > raw[1]
    corrected = scenario("corrected", 0.95, seeds=3, cases=300, threshold=0.6)
    assert corrected.decided_early == 3 and corrected.wrong == 0


# Panels ------------------------------------------------------------------------------------------

def test_a_panel_judged_run_stops_early_and_asks_nobody_about_the_rest(isolated_judge,
                                                                        tmp_path: Path) -> None:
    """Three scripted judges score each output; the panel's mean decides the verdict. Once the
    gate settles, no member is asked about any further case."""
    from referee import GEval, JudgePanel
    from referee.testing.server import ScriptedJudgeServer

    def scores(request) -> str:
        good = "[good]" in request.prompt
        lenient = request.model == "judge-a"
        return f'{{"score": {1.0 if good or lenient else 0.0}, "reason": "r"}}'

    with ScriptedJudgeServer(reply=scores) as server:
        panel = JudgePanel(members=[server.judge_config(model=name)
                                    for name in ("judge-a", "judge-b", "judge-c")])
        suite = EvalSuite("panel").add_evaluator(GEval("concise", runs=1, judge=panel))
        passing = _passing(300, 0.95, seed=8)
        pairs = [(EvalCase(input=f"q{i}"), f"{'[good]' if i in passing else '[bad]'} answer {i}")
                 for i in range(300)]
        report = suite.run_on_cases(pairs, verbose=False, fail_threshold=0.6, sequential=True,
                                    concurrency=1, runs_dir=tmp_path)
        settled = report.metadata["sequential"]
        assert settled["decision"] == "above" and report.total < 100
        assert server.request_count == 3 * report.total  # every member, only for cases run


def test_the_bill_benchmark_counts_what_it_reports(isolated_judge) -> None:
    from benchmarks.sequential_bill import measure
    from referee.run.sync import run_sync

    rows = run_sync(measure(300))
    assert [(r["rate"], r["run"]) for r in rows] == [(0.7, "full"), (0.7, "sequential"),
                                                     (0.9, "full"), (0.9, "sequential")]
    for row in rows:  # GEval runs=1: one judge request per case judged
        assert row["requests"] == row["cases_judged"]
    assert rows[0]["cases_judged"] == 300 and rows[1]["cases_judged"] < 300
    assert rows[1]["decision"] == "below"
