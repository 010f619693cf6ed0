"""multivon-eval's repeated trials and report statistics over referee's one report:
``EvalSuite.run(runs=N)`` (and ``run_async``), ``CaseResult.runs``/``all_scores``/``score_std``/
``is_flaky``, the report's ``pass_at_k``, ``pass_hat_k``, ``flaky_count``, ``stability_score``,
``lottery_cases``, ``saturated``, ``min_detectable_regression``, ``avg_score_ci``,
``assert_budget``, ``save_csv`` and ``run_async(evaluator_concurrency=...)``.

Written from multivon's public signatures and documented estimators; no test code copied. The
judged paths go through the OpenAI SDK against the scripted loopback judge.
"""

from __future__ import annotations

import asyncio
import csv
import itertools
import json
import threading
from math import comb

import pytest

import referee
from referee import (
    Contains,
    EvalCase,
    EvalGateFailure,
    EvalReport,
    EvalResult,
    EvalStatus,
    EvalSuite,
    Evaluator,
    ExecutionResult,
)
from referee.errors import InputError
from referee.judge.pricing import set_price
from referee.report.console import render_text
from referee.report.model import CaseResult
from referee.report.store import load_run
from referee.report.trials import pass_at_k, pass_hat_k
from referee.testing.server import ScriptedJudgeServer


def alternating(*answers: str):
    """A model that answers each call with the next of ``answers``, round and round, and
    counts its calls."""
    cycle = itertools.cycle(answers)
    lock = threading.Lock()

    def model(question: str) -> str:
        with lock:
            model.calls += 1  # type: ignore[attr-defined]
            return next(cycle)

    model.calls = 0  # type: ignore[attr-defined]
    return model


def suite_of(*inputs: str, evaluator=None) -> EvalSuite:
    suite = EvalSuite("trials").add_cases([EvalCase(input=i, case_id=i) for i in inputs])
    return suite.add_evaluator(evaluator or Contains(["yes"]))


def hand_case(runs: int, passes: int, name: str = "c") -> CaseResult:
    return CaseResult(case_input=name, actual_output="out", runs=runs, pass_count=passes,
                      results=[EvalResult(evaluator="check", score=1.0, passed=True)])


# --- runs=N through the engine -------------------------------------------------------------------

def test_each_case_runs_n_times_and_its_runs_are_combined():
    model = alternating("yes", "no")  # with concurrency=1: yes, no, yes, no, ...
    report = suite_of("a").run(model, runs=4, concurrency=1, verbose=False, save=False)
    case = report.case_results[0]
    assert model.calls == 4
    assert case.runs == 4 and len(case.run_results) == 4
    assert [r.status for r in case.run_results] == [EvalStatus.PASSED, EvalStatus.FAILED] * 2
    assert case.pass_count == 2 and case.all_scores == [1.0, 0.0, 1.0, 0.0]
    assert case.score == 0.5 and case.score_std == 0.5 and case.run_pass_rate == 0.5
    assert case.is_flaky and case.status == EvalStatus.FAILED  # passes only if every run did
    contains = case.results[0]
    assert contains.score == 0.5 and not contains.passed
    assert contains.details["passed_runs"] == 2 and contains.details["run_scores"] == [1.0, 0.0] * 2
    assert case.actual_output == "no"  # the last run's output
    assert all(r.case is None for r in case.run_results)  # the case is kept once, outside

    steady = suite_of("b").run(lambda _: "yes", runs=3, verbose=False, save=False)
    only = steady.case_results[0]
    assert only.status == EvalStatus.PASSED and only.pass_count == 3 and not only.is_flaky
    assert only.score_std == 0.0 and steady.flaky_count == 0 and steady.stability_score == 1.0


def test_a_case_run_once_reads_as_multivon_single_run():
    case = suite_of("a").run(lambda _: "yes", verbose=False, save=False).case_results[0]
    assert case.runs == 1 and case.run_results == [] and case.pass_count == -1
    assert case.all_scores == [] and case.score_std == 0.0 and not case.is_flaky
    assert case.run_pass_rate == 1.0


def test_a_known_failure_beats_an_errored_run_and_errored_runs_are_no_trials():
    def model(question: str) -> str:
        model.calls[question] = model.calls.get(question, 0) + 1
        if model.calls[question] == 2:
            raise RuntimeError("upstream down")
        return "yes" if question == "steady" or model.calls[question] == 1 else "no"

    model.calls = {}
    report = suite_of("steady", "shaky").run(model, runs=3, verbose=False, save=False)
    steady, shaky = report.case_results
    # Passed, crashed, passed: the unknown run leaves the case unknown, as one errored
    # criterion would; the error says which run.
    assert steady.status == EvalStatus.MODEL_ERROR
    assert steady.error == "run 2 of 3: RuntimeError: upstream down"
    # Passed, crashed, failed: a known failure beats the error (design #8).
    assert shaky.status == EvalStatus.FAILED
    assert shaky.all_scores == [1.0, 0.0] and shaky.pass_count == 1 and shaky.is_flaky
    assert shaky.run_pass_rate == 0.5  # of the two evaluated runs
    assert report.errors == 1 and report.evaluated == 1


def test_a_judge_error_in_one_run_stays_on_the_criterion():
    calls = itertools.count()

    class Outage(Evaluator):
        name = "outage"

        def evaluate(self, case, output):
            from referee import JudgeUnavailable
            if next(calls) == 1:
                raise JudgeUnavailable("judge down")
            return self._result(1.0, "fine")

    report = suite_of("a", evaluator=Outage()).run(lambda _: "x", runs=3, concurrency=1,
                                                  verbose=False, save=False)
    case = report.case_results[0]
    assert case.status == EvalStatus.JUDGE_ERROR
    combined = case.results[0]
    assert combined.error_kind == "judge" and combined.details["errored_runs"] == 1
    assert combined.details["run_scores"] == [1.0, None, 1.0]
    assert report.pass_rate == 0.0 and report.evaluated == 0


def test_runs_and_evaluator_concurrency_are_checked():
    suite = suite_of("a")
    with pytest.raises(ValueError, match="runs must be a positive int, got 0"):
        suite.run(lambda _: "yes", runs=0, verbose=False, save=False)
    with pytest.raises(ValueError, match="evaluator_concurrency must be a positive int"):
        suite.run(lambda _: "yes", evaluator_concurrency=0, verbose=False, save=False)


async def test_run_async_takes_runs_and_bounds_evaluators_across_the_run():
    class Slow(Evaluator):
        """Records how many of its kind score at once."""

        active = 0
        peak = 0

        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

        async def evaluate(self, case, output):
            Slow.active += 1
            Slow.peak = max(Slow.peak, Slow.active)
            await asyncio.sleep(0.01)
            Slow.active -= 1
            return self._result(1.0, "ok")

    def suite() -> EvalSuite:
        s = EvalSuite("async").add_cases([EvalCase(input=f"q{i}") for i in range(4)])
        return s.add_evaluators(Slow("one"), Slow("two"))

    async def model(question: str) -> str:
        return "answer"

    report = await suite().run_async(model, runs=2, concurrency=4, evaluator_concurrency=1,
                                     verbose=False, save=False)
    assert Slow.peak == 1
    assert all(c.runs == 2 and c.status == EvalStatus.PASSED for c in report.case_results)
    Slow.peak = 0
    await suite().run_async(model, concurrency=4, verbose=False, save=False)
    assert Slow.peak > 1  # unbounded: the two evaluators of four cases overlap


# --- repeated runs are independent trials, also with the judge cache on --------------------------

def test_repeated_runs_ask_the_judge_afresh_with_the_cache_on(isolated_judge, monkeypatch,
                                                               tmp_path):
    monkeypatch.setenv("REFEREE_CACHE_DIR", str(tmp_path / "cache"))
    verdicts = itertools.cycle(["Yes", "No", "Yes"])
    lock = threading.Lock()

    def next_verdict(request) -> str:
        with lock:
            return next(verdicts)

    with ScriptedJudgeServer(reply=next_verdict) as server:
        def build() -> EvalSuite:
            suite = EvalSuite("judged").add_cases([EvalCase(input="Where is my refund?")])
            return suite.add_check("The reply is polite", questions=["Is the reply polite?"],
                                   judge=server.judge_config(cache=True))

        first = build().run(lambda _: "Please wait two days.", runs=3, verbose=False,
                            save=False)
        # Three runs, three requests (identical prompts): the cache did not replay run 1.
        assert server.request_count == 3
        case = first.case_results[0]
        assert [r.status for r in case.run_results] == [
            EvalStatus.PASSED, EvalStatus.FAILED, EvalStatus.PASSED]
        assert case.is_flaky and case.all_scores == [1.0, 0.0, 1.0]
        assert len({r.prompt for r in server.requests}) == 1

        # The same run again: every run is replayed from the cache, each from its own trial.
        again = build().run(lambda _: "Please wait two days.", runs=3, verbose=False,
                            save=False)
        assert server.request_count == 3
        assert again.case_results[0].all_scores == [1.0, 0.0, 1.0]
        assert again.token_usage.cached_requests == 3


# --- the report's statistics ---------------------------------------------------------------------

def test_pass_k_estimators_match_their_formulas():
    assert pass_at_k(5, 2, 3) == pytest.approx(1 - comb(3, 3) / comb(5, 3))
    assert pass_hat_k(5, 4, 2) == pytest.approx(comb(4, 2) / comb(5, 2))
    assert pass_at_k(4, 0, 2) == 0.0 and pass_hat_k(4, 4, 4) == 1.0
    # Not the plug-in estimate (c/n)**k, which overstates pass^k for a finite n.
    assert pass_hat_k(4, 2, 2) == pytest.approx(1 / 6) != (2 / 4) ** 2
    with pytest.raises(ValueError, match="exceeds the 3 recorded trials"):
        pass_at_k(3, 1, 4)
    # The same estimators at the top level, as multivon exports them; the suite-level mean
    # refuses to extrapolate too (a report answers "unknown" instead, below).
    assert referee.pass_at_k is pass_at_k and referee.pass_hat_k is pass_hat_k
    result = referee.suite_pass_k([(4, 2), (4, 4)], 2, metric="pass^k", n_boot=200, seed=1)
    assert isinstance(result, referee.PassKResult)
    assert result.value == pytest.approx((1 / 6 + 1) / 2) and result.n_cases == 2
    with pytest.raises(ValueError, match="exceeds the 4 recorded trials"):
        referee.suite_pass_k([(4, 2)], 5)
    with pytest.raises(ValueError, match="n_boot must be >= 1"):
        referee.suite_pass_k([(4, 2)], 1, n_boot=0)


def test_report_pass_at_k_and_pass_hat_k_over_evaluated_cases():
    report = EvalReport(suite_name="s", case_results=[
        hand_case(5, 5, "always"), hand_case(5, 2, "sometimes"), hand_case(5, 0, "never"),
        CaseResult(case_input="crashed", actual_output="", results=[], model_error="boom")])
    at2 = report.pass_at_k(2)
    expected = (1.0 + (1 - comb(3, 2) / comb(5, 2)) + 0.0) / 3
    assert at2.value == pytest.approx(expected) and at2.n_cases == 3  # the error is no case
    assert at2.ci_low <= at2.value <= at2.ci_high and at2.estimator == "combinatorial-unbiased"
    hat5 = report.pass_hat_k(5)
    assert hat5.value == pytest.approx(1 / 3) and hat5.runs == 5
    assert report.pass_hat_k(5) == hat5  # the interval is seeded: reports reproduce

    unknown = report.pass_at_k(6)
    assert unknown.value is None and unknown.ci_low is None
    assert "k=6 exceeds the 5 trials (evaluated runs) of each case" in unknown.unknown_reason
    with pytest.raises(ValueError, match="k must be >= 1"):
        report.pass_at_k(0)
    empty = EvalReport(suite_name="s", case_results=[])
    assert empty.pass_hat_k(1).value is None
    # Every case alike: the interval is Wilson's over the cases, not a point.
    ceiling = EvalReport(suite_name="s", case_results=[hand_case(3, 3, f"c{i}") for i in range(10)])
    assert ceiling.pass_hat_k(3).value == 1.0 and ceiling.pass_hat_k(3).ci_low < 1.0


def test_gate_on_pass_hat_k_fails_when_unknown_or_low():
    report = EvalReport(suite_name="s", case_results=[hand_case(4, 4, "a"), hand_case(4, 1, "b")])
    with pytest.raises(EvalGateFailure, match="exceeds"):
        report.assert_pass_hat_k(5, 0.1)
    with pytest.raises(EvalGateFailure, match="lower bound"):
        report.assert_pass_hat_k(2, 0.9)
    report.assert_pass_hat_k(1, 0.0)


def test_flaky_lottery_and_stability():
    report = EvalReport(suite_name="s", case_results=[
        hand_case(4, 4, "stable"), hand_case(4, 1, "rare"), hand_case(4, 3, "mostly"),
        hand_case(4, 0, "broken")])
    assert report.flaky_count == 2 and report.stability_score == 0.5
    assert report.runs_per_case == 4
    # pass@2 - pass^2: rare 0.5 - 0 = 0.5, mostly 1 - 0.5 = 0.5 (a tie keeps case order).
    assert [c.case_input for c in report.lottery_cases(2)] == ["rare", "mostly"]
    assert [c.case_input for c in report.lottery_cases()] == ["rare", "mostly"]  # k = 4
    assert report.lottery_cases(5) == []  # no case has five runs
    assert report.case_results[1].status == EvalStatus.FAILED


def test_saturation_and_min_detectable_regression():
    passing = EvalReport(suite_name="s", case_results=[hand_case(1, 1, f"c{i}") for i in range(50)])
    assert passing.saturated
    # Variance taken at 0.95 (the ceiling would promise too much): sqrt((1.96 + 0.8416)^2 *
    # 2 * 0.95 * 0.05 / 50) = 0.1221.
    assert passing.min_detectable_regression == pytest.approx(0.1221, abs=1e-4)
    assert passing.min_detectable_regression == referee.min_detectable_effect(50, baseline=0.95)
    assert referee.min_detectable_effect(0) == 1.0
    failing = EvalReport(suite_name="s", case_results=[hand_case(1, 0, f"c{i}") for i in range(20)])
    assert not failing.saturated
    assert failing.min_detectable_regression == pytest.approx(0.4429, abs=1e-4)  # at 0.5
    errored = EvalReport(suite_name="s", case_results=[
        CaseResult(case_input="x", actual_output="", results=[], model_error="boom")])
    assert not errored.saturated and errored.min_detectable_regression == 1.0


def test_avg_score_ci_bootstraps_evaluated_case_scores():
    cases = [CaseResult(case_input=f"c{i}", actual_output="",
                        results=[EvalResult(evaluator="e", score=s, passed=s >= 0.5)])
             for i, s in enumerate([0.2, 0.4, 0.6, 0.8, 1.0])]
    report = EvalReport(suite_name="s", case_results=cases)
    low, high = report.avg_score_ci()
    assert report.avg_score == pytest.approx(0.6) and low < 0.6 < high
    assert report.avg_score_ci() == (low, high)
    narrow = report.avg_score_ci(confidence=0.5)
    assert low <= narrow[0] <= narrow[1] <= high
    assert EvalReport(suite_name="s", case_results=[]).avg_score_ci() == (0.0, 1.0)


# --- stored runs and reports ---------------------------------------------------------------------

def test_a_stored_run_keeps_every_run_and_resumes_and_rescores_them(tmp_path):
    model = alternating("yes", "no", "no")
    report = suite_of("a", "b").run(model, runs=3, concurrency=1, runs_dir=tmp_path,
                                    verbose=False)
    run_dir = report.metadata["run_dir"]
    stored = load_run(run_dir)
    assert stored.runs == 3 and stored.runs_per_case == 3
    for before, after in zip(report.case_results, stored.case_results):
        assert [r.status for r in after.run_results] == [r.status for r in before.run_results]
        assert after.all_scores == before.all_scores and after.is_flaky == before.is_flaky
    assert stored.pass_at_k(2) == report.pass_at_k(2)
    saved = json.loads((tmp_path / run_dir.split("/")[-1] / "report.json").read_text())
    assert saved["runs"] == 3 and saved["trials"]["flaky_count"] == report.flaky_count
    assert saved["trials"]["pass_hat_k"]["k"] == 3
    from_json = EvalReport.from_dict(json.loads(report.to_json()))
    assert [c.all_scores for c in from_json.case_results] == \
        [c.all_scores for c in report.case_results]

    with pytest.raises(InputError, match="ran each case 3 time"):
        suite_of("a", "b").run(model, runs=2, resume=run_dir, verbose=False)

    # Re-scoring scores each run's stored output again; the model is not called.
    calls = model.calls
    rescored = suite_of("a", "b", evaluator=Contains(["no"])).run(
        model, runs=3, resume=run_dir, rescore=True, verbose=False)
    assert model.calls == calls
    for before, after in zip(report.case_results, rescored.case_results):
        assert after.all_scores == [1.0 - s for s in before.all_scores]


def test_hand_built_multivon_case_results_round_trip():
    case = hand_case(5, 3)
    assert case.status == EvalStatus.FAILED and case.runs == 5 and case.pass_count == 3
    back = CaseResult.model_validate_json(case.model_dump_json())
    assert back.runs == 5 and back.is_flaky and back.run_pass_rate == 0.6
    scored = CaseResult(case_input="x", actual_output="y", runs=3, pass_count=3,
                        all_scores=[1.0, 0.8, 0.9],
                        results=[EvalResult(evaluator="e", score=0.9, passed=True)])
    assert scored.status == EvalStatus.PASSED and scored.all_scores == [1.0, 0.8, 0.9]
    assert scored.score == pytest.approx(0.9)
    with pytest.raises(ValueError, match="all_scores holds 2 score"):
        CaseResult(case_input="x", actual_output="y", runs=3, pass_count=1, all_scores=[1, 0])
    with pytest.raises(ValueError, match="pass_count must be between 0 and runs=2"):
        CaseResult(case_input="x", actual_output="y", runs=2, pass_count=3)


def test_console_and_html_show_repeated_runs(tmp_path):
    from test_report_samples import chromium_dom

    report = suite_of("a").run(alternating("yes", "no"), runs=2, concurrency=1,
                               verbose=False, save=False)
    text = render_text(report)
    assert "Runs per case: 2; flaky cases: 1 of 1 (stability 0.0%); pass@2 1.000" in text
    assert "FAILED  a  (passed 1 of 2 evaluated run(s) of 2)" in text
    single = render_text(suite_of("a").run(lambda _: "yes", verbose=False, save=False))
    assert "Runs per case" not in single
    page = tmp_path / "report.html"
    report.save_html(page)
    dom = chromium_dom(page.as_uri(), tmp_path)
    assert 'id="repeated-runs">Runs per case: 2; flaky cases: 1 of 1' in dom
    assert "passed in 1 of 2 scored run(s) of 2" in dom


# --- budgets and CSV -----------------------------------------------------------------------------

def test_assert_budget_checks_tokens_cost_and_latency(isolated_judge):
    set_price("runs-budget-priced", input_per_mtok=1_000_000.0, output_per_mtok=0.0)

    def model(question: str) -> ExecutionResult:
        return ExecutionResult(actual_response="Sure.", latency_s=0.1 if question == "a" else 0.3)

    with ScriptedJudgeServer(reply="Yes") as server:
        def run(judge_model: str) -> EvalReport:
            suite = EvalSuite("budget").add_cases([EvalCase(input="a"), EvalCase(input="b")])
            suite.add_check("polite", questions=["Is it polite?"],
                            judge=server.judge_config(model=judge_model))
            return suite.run(model, verbose=False, save=False)

        priced = run("runs-budget-priced")
        unpriced = run("runs-budget-unpriced")
    tokens = priced.token_usage.total_tokens
    assert tokens > 0 and priced.token_usage.cost_usd == pytest.approx(
        priced.token_usage.input_tokens)
    priced.assert_budget(max_total_tokens=tokens, max_total_cost_usd=1e9,
                         max_avg_latency_ms=200.0, max_p95_latency_ms=300.0)
    with pytest.raises(EvalGateFailure) as failed:
        priced.assert_budget(max_total_tokens=tokens - 1, max_avg_cost_per_case_usd=1.0,
                             max_avg_latency_ms=150.0, max_p95_latency_ms=250.0)
    message = str(failed.value)
    assert f"total tokens {tokens:,} exceed {tokens - 1:,}" in message
    assert "average cost per case $" in message
    assert "average latency 200 ms exceeds 150 ms" in message
    assert "p95 latency 290 ms exceeds 250 ms" in message
    with pytest.raises(EvalGateFailure, match="cost budget cannot be checked"):
        unpriced.assert_budget(max_total_cost_usd=100.0)
    unpriced.assert_budget(max_total_tokens=tokens)
    with pytest.raises(ValueError, match="max_total_tokens must be a finite number >= 0"):
        priced.assert_budget(max_total_tokens=-1)


def test_save_csv_writes_a_row_per_evaluator_with_the_run_figures(tmp_path):
    report = suite_of("a", "b").run(alternating("yes", "no", "yes", "yes"), runs=2,
                                    concurrency=1, verbose=False, save=False)
    path = tmp_path / "out" / "report.csv"
    report.save_csv(path)
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    assert [r["input"] for r in rows] == ["a", "b"]
    assert rows[0]["evaluator"] == "contains" and rows[0]["is_flaky"] == "True"
    assert rows[0]["run_pass_rate"] == "0.5" and rows[0]["score_std"] == "0.5"
    assert rows[1]["status"] == "PASSED" and rows[1]["runs"] == "2"
    assert rows[0]["reason"] == "passed in 1 of 2 scored run(s) of 2"
    crashed = EvalReport(suite_name="s", case_results=[
        CaseResult(case_input="x", actual_output="", results=[], model_error="boom")])
    crashed.save_csv(path)
    (row,) = csv.DictReader(path.open(encoding="utf-8"))
    assert row["status"] == "MODEL_ERROR" and row["reason"] == "boom" and row["evaluator"] == ""


def test_acceptance_policy_counts_every_run_as_a_trial():
    from referee import AcceptancePolicy, CheckRequirement

    def model(question: str) -> str:
        model.calls += 1
        if model.calls == 2:
            raise RuntimeError("upstream down")
        return "no"

    model.calls = 0
    report = suite_of("a").run(model, runs=2, concurrency=1, verbose=False, save=False)
    case = report.case_results[0]
    assert case.status == EvalStatus.FAILED  # failed, then crashed: the failure is known
    policy = AcceptancePolicy((CheckRequirement("contains", min_pass_rate=0.5),))
    result = policy.evaluate(report)
    # The crashed run errored and measured nothing: the case is neither error-free nor fully
    # measured, although its combined result is a plain failure.
    errors = next(m for m in result.measurements if m["metric"] == "case_error_rate")
    assert errors["errored_cases"] == 1
    final_only = AcceptancePolicy((CheckRequirement("contains", min_pass_rate=0.5),),
                                  trial_scope="final_attempt").evaluate(report)
    assert next(m for m in final_only.measurements
                if m["metric"] == "case_error_rate")["errored_cases"] == 1


def test_early_stop_ends_a_case_once_its_runs_settle_it():
    steady = alternating("yes")
    report = suite_of("a", "b").run(steady, runs=10, early_stop=True, verbose=False, save=False)
    # Six straight passes make a pass rate of 0.8 (1.6 ** 6 = 16.8) at least (1 - 0.2) / 0.05
    # = 16 times likelier than 0.5: the case stops there.
    assert [c.runs for c in report.case_results] == [6, 6] and steady.calls == 12
    assert report.runs_per_case == 10
    unknown = report.pass_hat_k(10)
    assert unknown.value is None and "exceeds the 6 trials (evaluated runs) of each case" in \
        unknown.unknown_reason
    assert report.pass_hat_k(6).value == 1.0
    shaky = suite_of("c").run(alternating("yes", "no"), runs=10, early_stop=True,
                              concurrency=1, verbose=False, save=False)
    assert shaky.case_results[0].runs == 10  # half and half never settles
    mixed = EvalReport(suite_name="s", runs=10, case_results=[
        report.case_results[0], shaky.case_results[0]])
    assert "of the shortest-run case" in mixed.pass_at_k(8).unknown_reason
