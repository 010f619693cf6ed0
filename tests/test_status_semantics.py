"""Issue 10, section 1: status precedence, scored-only statistics, "n/a", unique criterion labels.

The rules are stated once in docs/architecture.md ("Status, labels and n/a"); these tests hold
every report to them.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from rich.console import Console

from referee import AgentEvaluator, EvalCase, EvalConfig, EvalSuite
from referee.config import CriteriaConfig, CriterionConfig
from referee.criteria.base import SyncCriterion
from referee.evaluators import Contains, NotEmpty
from referee.report.compare import compare_reports
from referee.report.console import render_console
from referee.report.html import render_html
from referee.report.junit import render_junit
from referee.report.model import CaseResult, CaseStatus, EvalReport, EvalSummary
from referee.report.store import load_run
from referee.result import CriterionResult, unique_labels
from referee.run.engine import case_status


def _r(name: str = "c", *, score: float = 1.0, passed: bool = True, **kw) -> CriterionResult:
    return CriterionResult(criterion=name, score=score, passed=passed, threshold=0.5, **kw)


OK = _r()
BAD = _r(score=0.0, passed=False)
JUDGE = _r(score=0.5, passed=True, details={"judge_unavailable": True})  # document 000 fallback
OUTAGE = _r(score=0.0, passed=False, error="HTTP 503", error_kind="judge")
BROKEN = _r(score=0.0, passed=False, error="KeyError: 'x'", error_kind="evaluator")
NAN = _r(score=0.0, passed=False, error="score is NaN")  # BaseCriterion._failure: no kind
SKIP = _r(score=0.0, passed=False, skipped=True)


@pytest.mark.parametrize(("results", "status"), [
    ([BAD, OUTAGE], CaseStatus.FAILED),  # a known failure beats an unknown
    ([BAD, JUDGE], CaseStatus.FAILED),
    ([BAD, BROKEN], CaseStatus.FAILED),
    ([OUTAGE, BROKEN, OK], CaseStatus.JUDGE_ERROR),
    ([BROKEN, OK], CaseStatus.EVALUATOR_ERROR),
    ([NAN, OK], CaseStatus.EVALUATOR_ERROR),  # an error, never a quality FAILED
    ([JUDGE], CaseStatus.JUDGE_ERROR),
    ([OK, SKIP], CaseStatus.PASSED),
    ([SKIP, SKIP], CaseStatus.SKIPPED),
    ([], CaseStatus.SKIPPED),
])
def test_status_precedence(results, status) -> None:
    assert case_status(results) == status


@pytest.mark.parametrize(("results", "status"), [
    ([BAD, OUTAGE], CaseStatus.FAILED),
    ([BAD, JUDGE], CaseStatus.FAILED),
    ([OUTAGE, BROKEN, OK], CaseStatus.JUDGE_ERROR),
    ([BROKEN, OK], CaseStatus.EVALUATOR_ERROR),
    ([NAN, OK], CaseStatus.EVALUATOR_ERROR),
    ([JUDGE], CaseStatus.JUDGE_ERROR),
    ([OUTAGE], CaseStatus.JUDGE_ERROR),
    ([OK, SKIP], CaseStatus.PASSED),
    ([SKIP, SKIP], CaseStatus.SKIPPED),
    ([], CaseStatus.SKIPPED),
])
def test_a_case_result_built_the_multivon_way_follows_the_same_precedence(results, status) -> None:
    """docs/compat.md (departure 3): multivon's ``CaseResult(case_input=, results=)`` takes
    its status by the table of docs/architecture.md, from its results as the engine does."""
    assert CaseResult(case_input="q", results=results).status == status
    assert CaseResult(case_input="q", results=results, model_error="boom").status == \
        CaseStatus.MODEL_ERROR
    errored = CaseStatus.FAILED if status == CaseStatus.FAILED else CaseStatus.JUDGE_ERROR
    assert CaseResult(case_input="q", results=results, judge_error="503").status == errored


@pytest.mark.parametrize(("runs", "status"), [
    ([CaseStatus.MODEL_ERROR, CaseStatus.FAILED, CaseStatus.PASSED], CaseStatus.FAILED),
    ([CaseStatus.JUDGE_ERROR, CaseStatus.TIMEOUT, CaseStatus.PASSED], CaseStatus.TIMEOUT),
    ([CaseStatus.EVALUATOR_ERROR, CaseStatus.JUDGE_ERROR], CaseStatus.JUDGE_ERROR),
    ([CaseStatus.SKIPPED, CaseStatus.PASSED], CaseStatus.PASSED),
    ([CaseStatus.SKIPPED], CaseStatus.SKIPPED),
])
def test_across_runs_a_failed_run_comes_first_then_the_case_table(runs, status) -> None:
    """docs/compat.md (departure 13): one FAILED run makes the case FAILED even beside a run
    that had nothing to judge; otherwise the runs' statuses follow the case table."""
    from referee.report.trials import combine_runs

    cases = [CaseResult(eval_id="x", status=s) for s in runs]
    assert combine_runs(cases, case=None, index=0, key="x").status == status


def test_criterion_statistics_cover_scored_results_only() -> None:
    cases = [CaseResult(eval_id=str(i), status=CaseStatus.FAILED, criterion_results=[r])
             for i, r in enumerate([_r(score=0.9), _r(score=0.3, passed=False), OUTAGE, JUDGE,
                                    SKIP])]
    stats = EvalSummary.from_cases(cases).criterion_stats["c"]
    assert (stats.total, stats.passed, stats.failed, stats.errors, stats.skipped, stats.scored) == (
        5, 1, 1, 2, 1, 2)
    assert stats.avg_score == pytest.approx(0.6)  # not (0.9 + 0.3 + 0 + 0.5 + 0) / 4
    assert stats.pass_rate == 0.5
    nothing = EvalSummary.from_cases(cases[2:]).criterion_stats["c"]
    assert (nothing.scored, nothing.avg_score, nothing.pass_rate) == (0, 0.0, 0.0)


def test_unique_labels() -> None:
    assert unique_labels(["contains", "contains", "x", "contains"]) == [
        "contains", "contains#2", "x", "contains#3"]
    # A user's own "contains#2" keeps its name; the namesake moves on.
    assert unique_labels(["contains", "contains#2", "contains"]) == [
        "contains", "contains#2", "contains#3"]


def _two_contains_suite() -> EvalSuite:
    suite = EvalSuite("labels")
    suite.add_cases([EvalCase(input="a", name="first"), EvalCase(input="b", name="second")])
    suite.add_evaluators(Contains(["refund"]), Contains(["30 days"]))
    return suite


def _console_text(report: EvalReport) -> str:
    console = Console(record=True, width=120, force_terminal=False)
    render_console(report, console)
    return console.export_text()


def test_two_namesake_criteria_stay_apart_in_every_report(tmp_path: Path) -> None:
    def baseline(prompt: str) -> str:
        return "refund within 30 days"

    def candidate(prompt: str) -> str:
        return "refund soon" if prompt == "b" else "refund within 30 days"

    suite = _two_contains_suite()
    a = suite.run(baseline, verbose=False, runs_dir=tmp_path, formats=["json"])
    b = suite.run(candidate, verbose=False, runs_dir=tmp_path, formats=["json"])

    second = b.cases[1]
    assert [r.criterion for r in second.criterion_results] == ["contains", "contains#2"]
    assert second.get_criterion_result("contains#2").passed is False
    stats = b.summary.criterion_stats
    assert set(stats) == {"contains", "contains#2"}
    assert (stats["contains"].passed, stats["contains#2"].failed) == (2, 1)

    stored = load_run(b.metadata["run_dir"])
    assert [r.criterion for r in stored.cases[1].criterion_results] == ["contains", "contains#2"]

    junit = ET.fromstring(render_junit(stored).split("\n", 1)[1])
    names = [(tc.get("name"), [c.tag for c in tc]) for tc in junit.iter("testcase")
             if tc.get("classname").endswith("second")]
    assert names == [("contains", []), ("contains#2", ["failure"])]

    assert "contains#2" in render_html(stored)
    assert "contains#2" in _console_text(stored)

    comparison = compare_reports(load_run(a.metadata["run_dir"]), stored)
    (regression,) = comparison.regressions
    assert [c.criterion for c in regression.criteria] == ["contains", "contains#2"]
    assert any(reason.startswith("contains#2: 1.000 (pass) -> 0.000 (fail)")
               for reason in regression.reasons)


def test_reports_stored_before_labels_still_keep_namesakes_apart() -> None:
    # A run stored by an older referee: two results under one name.
    old = CaseResult(eval_id="x", name="x", status=CaseStatus.FAILED, criterion_results=[
        _r("contains", score=1.0), _r("contains", score=0.0, passed=False)])
    report = EvalReport(name="old", cases=[old])
    junit = ET.fromstring(render_junit(report).split("\n", 1)[1])
    tests = [(tc.get("name"), [c.tag for c in tc]) for tc in junit.iter("testcase")]
    assert tests == [("contains", []), ("contains#2", ["failure"])]
    regressed = report.model_copy(deep=True)
    regressed.cases[0].criterion_results[0] = _r("contains", score=0.0, passed=False)
    (change,) = compare_reports(report, regressed).changes
    assert [c.criterion for c in change.criteria] == ["contains", "contains#2"]


def test_a_failing_case_always_has_a_junit_failure() -> None:
    # Whatever its criterion results say (here: only an errored one), FAILED is never green.
    case = CaseResult(eval_id="x", name="x", status=CaseStatus.FAILED, error="custom gate",
                      criterion_results=[OUTAGE])
    suite = ET.fromstring(render_junit(EvalReport(cases=[case])).split("\n", 1)[1]).find(
        "testsuite")
    assert suite.get("failures") == "1"
    failure = suite.find("testcase/failure")
    assert failure is not None and failure.get("message") == "custom gate"


def test_nothing_evaluated_is_na_in_console_html_junit_and_compare() -> None:
    errored = CaseResult(eval_id="x", name="x", status=CaseStatus.JUDGE_ERROR, error="HTTP 503",
                         criterion_results=[OUTAGE])
    skipped = CaseResult(eval_id="y", name="y", status=CaseStatus.SKIPPED,
                         criterion_results=[SKIP])
    report = EvalReport(name="none", cases=[errored, skipped])
    assert (report.evaluated, report.pass_rate) == (0, 0.0)  # documented value kept

    text = _console_text(report)
    totals = next(line for line in text.splitlines() if line.strip().startswith("2 "))
    assert totals.split()[-2:] == ["n/a", "50.0%"]
    assert ("Pass rate n/a: none of the 2 case(s) could be evaluated: 1 errored "
            "(judge_error=1), 1 skipped") in text
    per_eval = next(line for line in text.splitlines() if line.startswith("c "))
    assert per_eval.split()[-3:] == ["n/a", "n/a", "(0)"]  # pass rate and mean of c

    html = render_html(report)
    assert "<b>n/a</b>" in html and ">0.0%<" not in html

    junit = ET.fromstring(render_junit(report).split("\n", 1)[1])
    props = {p.get("name"): p.get("value") for p in junit.iter("property")}
    assert props.pop("judge_spend").startswith("0 request(s)")  # its one call failed
    assert props == {"pass_rate": "n/a", "evaluated": "0", "error_rate": "50.0%",
                     "criterion_errors": "1"}

    text = compare_reports(report, report).render_text()
    assert "pass rate n/a, error rate 50.0%" in text
    assert report.to_dict()["totals"]["criterion_errors"] == 1


class _Prepared(SyncCriterion):
    name = "prepared"

    def __init__(self, config: CriterionConfig) -> None:
        super().__init__(config)
        self.prepared = 0

    async def prepare(self) -> None:
        self.prepared += 1

    def evaluate_sync(self, actual, expected):
        return self._result(1.0)


def test_a_disabled_criterion_is_reported_as_disabled_and_never_scored() -> None:
    off = NotEmpty()
    off.config = off.config.model_copy(update={"enabled": False})
    unprepared = _Prepared(CriterionConfig(enabled=False))
    suite = EvalSuite("disabled")
    suite.add_cases([EvalCase(input="q", name="q")])
    suite.add_evaluators(off, unprepared, Contains(["yes"]))

    report = suite.run(lambda prompt: "", verbose=False, save=False)

    (case,) = report.cases
    assert case.status == CaseStatus.FAILED  # decided by Contains alone
    disabled = [r for r in case.criterion_results if r.details.get("disabled")]
    assert [r.criterion for r in disabled] == ["not_empty", "prepared"]
    assert all(r.skipped and not r.is_scored and "disabled" in r.reason for r in disabled)
    assert unprepared.prepared == 0  # not even prepared
    assert report.summary.criterion_stats["not_empty"].skipped == 1


async def test_agent_evaluator_honours_enabled_false_on_criteria_passed_directly() -> None:
    only_off = EvalConfig(criteria=CriteriaConfig())
    evaluator = AgentEvaluator(lambda text: "hi", config=only_off, save=False,
                               criteria=[_Prepared(CriterionConfig(enabled=False))])
    report = await evaluator.evaluate([EvalCase(input="q", name="q")], verbose=False)
    (case,) = report.cases
    assert case.status == CaseStatus.SKIPPED
    (result,) = case.criterion_results
    assert result.details["disabled"] is True and math.isclose(result.score, 0.0)


def test_the_stored_judge_description_keeps_namesakes_apart() -> None:
    from referee.evaluators import CustomRubric
    from referee.judge import JudgeConfig
    from referee.run.session import describe_judges

    first = CustomRubric([("Polite?", True)], judge=JudgeConfig(provider="openai", model="gpt-4o"))
    second = CustomRubric([("Polite?", True)],
                          judge=JudgeConfig(provider="anthropic", model="claude-haiku-4-5"))
    per = describe_judges([first, second])["per_criterion"]
    assert list(per) == ["custom_rubric", "custom_rubric#2"]
    assert [cfg["model"] for cfg in per.values()] == ["gpt-4o", "claude-haiku-4-5"]
