"""Comparing two runs case by case: what regressed, what improved, what came and went."""

from __future__ import annotations

from referee.report.compare import compare_reports
from referee.report.model import CaseResult, CaseStatus, EvalReport
from referee.result import CriterionResult


def _crit(name: str, score: float, threshold: float = 0.7, **kw) -> CriterionResult:
    return CriterionResult(criterion=name, score=score, passed=score >= threshold, threshold=threshold, **kw)


def _case(eval_id: str, status: CaseStatus, *results: CriterionResult, error: str | None = None) -> CaseResult:
    return CaseResult(eval_id=eval_id, name=eval_id.upper(), status=status,
                      criterion_results=list(results), error=error)


def _runs() -> tuple[EvalReport, EvalReport]:
    a = EvalReport(run_id="a", name="bot", cases=[
        _case("steady", CaseStatus.PASSED, _crit("faith", 0.9)),
        _case("broke", CaseStatus.PASSED, _crit("faith", 0.9)),
        _case("fixed", CaseStatus.FAILED, _crit("faith", 0.3)),
        _case("crashed", CaseStatus.PASSED, _crit("faith", 1.0)),
        _case("noisy", CaseStatus.PASSED, _crit("faith", 0.95)),
        _case("mixed", CaseStatus.FAILED, _crit("faith", 0.9), _crit("tone", 0.2)),
        _case("flaky-judge", CaseStatus.FAILED, _crit("faith", 0.2)),
        _case("gone", CaseStatus.PASSED, _crit("faith", 1.0)),
    ])
    b = EvalReport(run_id="b", name="bot", cases=[
        _case("steady", CaseStatus.PASSED, _crit("faith", 0.9)),
        _case("broke", CaseStatus.FAILED, _crit("faith", 0.4)),
        _case("fixed", CaseStatus.PASSED, _crit("faith", 0.8)),
        _case("crashed", CaseStatus.MODEL_ERROR, error="TimeoutError: upstream 504"),
        _case("noisy", CaseStatus.PASSED, _crit("faith", 0.71)),
        # Still FAILED overall, but "faith" crossed its threshold downwards: a regression.
        _case("mixed", CaseStatus.FAILED, _crit("faith", 0.5), _crit("tone", 0.1)),
        _case("flaky-judge", CaseStatus.JUDGE_ERROR,
              _crit("faith", 0.0, error="judge unreachable", error_kind="judge")),
        _case("new", CaseStatus.PASSED, _crit("faith", 1.0)),
    ])
    return a, b


def test_regressions_improvements_and_membership() -> None:
    cmp = compare_reports(*_runs())
    assert cmp.has_regressions
    assert [c.eval_id for c in cmp.regressions] == ["broke", "crashed", "mixed"]
    assert [c.eval_id for c in cmp.improvements] == ["fixed"]
    assert [c.eval_id for c in cmp.unchanged] == ["steady", "noisy", "flaky-judge"]
    assert [c.eval_id for c in cmp.added] == ["new"]
    assert [c.eval_id for c in cmp.removed] == ["gone"]
    crashed = cmp.regressions[1]
    assert crashed.transition == "PASSED -> MODEL_ERROR"
    assert crashed.reasons[0] == "case PASSED -> MODEL_ERROR: TimeoutError: upstream 504"
    mixed = cmp.regressions[2]
    assert mixed.reasons == ("faith: 0.900 (pass) -> 0.500 (fail), threshold 0.700",)
    # Failed -> judge error is not a quality verdict either way, but it is reported.
    assert cmp.unchanged[2].reasons == ("case FAILED -> JUDGE_ERROR",)


def test_identical_runs_have_no_regressions() -> None:
    a, _ = _runs()
    cmp = compare_reports(a, a.model_copy(deep=True))
    assert not cmp.has_regressions and len(cmp.unchanged) == len(a.cases)


def test_render_text_names_each_change() -> None:
    text = compare_reports(*_runs()).render_text()
    assert "3 regression(s), 1 improvement(s), 3 unchanged, 1 added, 1 removed" in text
    assert "Regressions:\n  BROKE  PASSED -> FAILED\n    case PASSED -> FAILED\n" in text
    assert "faith: 0.900 (pass) -> 0.400 (fail), threshold 0.700" in text
    assert "Improvements:\n  FIXED  FAILED -> PASSED" in text
    assert "Changed without a verdict:\n  FLAKY-JUDGE  FAILED -> JUDGE_ERROR" in text
    assert "Added in B: NEW" in text and "Removed in B: GONE" in text
    assert "pass rate 66.7%" in text  # B: 4 passed of 6 evaluated


def test_duplicate_ids_are_matched_in_order() -> None:
    a = EvalReport(cases=[_case("dup", CaseStatus.PASSED), _case("dup", CaseStatus.FAILED)])
    b = EvalReport(cases=[_case("dup", CaseStatus.PASSED), _case("dup", CaseStatus.PASSED)])
    cmp = compare_reports(a, b)
    assert [c.kind for c in cmp.changes] == ["unchanged", "improvement"]


def test_to_dict_is_plain_data() -> None:
    data = compare_reports(*_runs()).to_dict()
    assert data["has_regressions"] is True
    assert data["b"]["error_rate"] == 2 / 8
    assert {c["kind"] for c in data["changes"]} == {"regression", "improvement", "unchanged", "added", "removed"}


def test_an_unfinished_candidate_is_not_acceptable() -> None:
    a, _ = _runs()
    partial = EvalReport(run_id="b", name="bot", cases=a.cases[:3],
                         metadata={"interrupted": True, "expected_cases": len(a.cases)})
    comparison = compare_reports(a, partial)
    assert not comparison.has_regressions and comparison.candidate_unfinished
    assert not comparison.acceptable
    assert "B is unfinished: 3 of 8 case(s) ran" in comparison.render_text()
    assert comparison.to_dict()["candidate_unfinished"] is True
    finished = compare_reports(a, a)
    assert finished.acceptable and not finished.candidate_unfinished
