"""`referee compare` says in words which differences are real: McNemar for verdicts, Wilcoxon and a
paired bootstrap for scores, Holm across criteria, in the console, the JSON and the HTML."""

from __future__ import annotations

import json
import re

import pytest
from stored_runs import store_report

from referee.record import CaseResult, CaseStatus, EvalReport
from referee.report.compare import compare_reports
from referee.report.html import render_compare_html
from referee.result import CriterionResult

scipy_stats = pytest.importorskip("scipy.stats")


def _crit(name: str, score: float, threshold: float = 0.7, **kw) -> CriterionResult:
    return CriterionResult(criterion=name, score=score, passed=score >= threshold,
                           threshold=threshold, **kw)


def _run(name: str, faithfulness: list[float], tone: list[float],
         statuses: dict[int, CaseStatus] | None = None) -> EvalReport:
    cases = []
    for i, (faith, tone_score) in enumerate(zip(faithfulness, tone)):
        results = [_crit("faithfulness", faith), _crit("tone", tone_score)]
        status = (statuses or {}).get(i) or (
            CaseStatus.PASSED if all(r.passed for r in results) else CaseStatus.FAILED)
        cases.append(CaseResult(index=i, eval_id=f"c{i}", status=status,
                                criterion_results=results))
    return EvalReport(name=name, cases=cases)


TONE = [0.5 + 0.05 * (i % 10) for i in range(40)]


def _seven_more_failures() -> tuple[EvalReport, EvalReport]:
    """B fails faithfulness on 7 cases A passed, and on nothing else; tone does not move."""
    a = _run("a", [0.9] * 40, TONE)
    b = _run("b", [0.3] * 7 + [0.9] * 33, TONE)
    return a, b


def test_seven_more_failures_are_called_real() -> None:
    comparison = compare_reports(*_seven_more_failures())
    by_name = {v.criterion: v for v in comparison.verdict_shifts}
    faith = by_name["faithfulness"]
    assert (faith.n, faith.newly_failing, faith.newly_passing) == (40, 7, 0)
    assert faith.test.method == "exact" and faith.test.p_value == pytest.approx(2 / 2 ** 7)
    # Two criteria were tested: Holm doubles the smaller p-value (tone's is 1).
    assert faith.adjusted_p == pytest.approx(4 / 2 ** 7) and faith.real
    assert faith.change == pytest.approx(-7 / 40)
    text = comparison.render_text()
    assert "B fails 7 more cases on faithfulness; p = 0.016, Holm-adjusted 0.031; real" in text
    assert "A and B agree on tone in all 40 cases; no difference" in text
    # Whole cases: those of the 7 whose tone also passed went from PASSED to FAILED.
    overall = by_name["overall"]
    newly_failed = sum(TONE[i] >= 0.7 for i in range(7))
    assert (overall.newly_failing, overall.newly_passing) == (newly_failed, 0)
    assert overall.adjusted_p == overall.test.p_value  # one test on its own, not adjusted


def test_a_small_change_could_be_noise_and_says_what_would_be_seen() -> None:
    a = _run("a", [0.9] * 40, TONE)
    b = _run("b", [0.3] * 2 + [0.9] * 37 + [0.3], TONE)
    [faith] = [v for v in compare_reports(a, b).verdict_shifts if v.criterion == "faithfulness"]
    assert faith.newly_failing == 3 and not faith.real
    words = faith.describe()
    assert "B fails 3 more cases on faithfulness; p = 0.250" in words and "could be noise" in words
    assert f"a pass-rate change under {faith.mde * 100:.0f} points goes unseen with 40 cases" in words


def test_score_changes_use_wilcoxon_with_holm_and_effect_sizes() -> None:
    faith_a = [0.5 + 0.01 * i for i in range(40)]
    faith_b = [s + (0.1 if i % 5 else -0.02) for i, s in enumerate(faith_a)]
    a = _run("a", faith_a, TONE)
    b = _run("b", faith_b, TONE)
    comparison = compare_reports(a, b)
    faith = next(d for d in comparison.criterion_deltas if d.criterion == "faithfulness")
    differences = [y - x for x, y in zip(faith_a, faith_b)]
    reference = scipy_stats.wilcoxon(differences, correction=False, method="approx")
    assert faith.wilcoxon is not None and faith.wilcoxon.method == "normal"  # tied magnitudes
    assert faith.wilcoxon.p_value == pytest.approx(reference.pvalue, rel=1e-6)
    assert faith.adjusted_p == pytest.approx(min(1.0, 2 * reference.pvalue), rel=1e-6)
    assert faith.real and faith.effect_dz is not None and faith.effect_dz > 0
    # 32 differences of +0.1 share ranks 9..40 (24.5 each), 8 of -0.02 share 1..8 (4.5 each):
    # T+ = 784, T- = 36, rank-biserial (784 - 36) / 820.
    assert faith.wilcoxon.rank_sum_positive == 784
    assert faith.wilcoxon.rank_biserial == pytest.approx(748 / 820)
    statement = faith.statement()
    assert statement.startswith("B scores higher on faithfulness by 0.076 on average; p = ")
    assert statement.split("; ")[2].startswith("real (paired-bootstrap 95% CI +0.0")
    tone = next(d for d in comparison.criterion_deltas if d.criterion == "tone")
    assert tone.statement() == "tone scores: identical in all 40 cases; no difference"


def test_overall_scores_compare_each_cases_mean_score() -> None:
    faith_a = [0.5 + 0.01 * i for i in range(40)]
    faith_b = [s + (0.1 if i % 5 else -0.02) for i, s in enumerate(faith_a)]
    comparison = compare_reports(_run("a", faith_a, TONE), _run("b", faith_b, TONE))
    overall = comparison.overall_scores
    assert overall is not None and overall.n == 40
    # A case's score is the mean of its two criteria; tone does not move, so each case moves
    # by half its faithfulness change.
    differences = [(b - a) / 2 for a, b in zip(faith_a, faith_b)]
    reference = scipy_stats.wilcoxon(differences, correction=False, method="approx")
    assert overall.delta == pytest.approx(sum(differences) / 40)
    assert overall.wilcoxon is not None
    assert overall.wilcoxon.p_value == pytest.approx(reference.pvalue, rel=1e-6)
    assert overall.adjusted_p == overall.wilcoxon.p_value  # one test on its own
    assert overall.statement().startswith("B scores higher overall (mean case score) by 0.038")
    assert comparison.statements()[-1] == overall.statement()
    assert comparison.to_dict()["overall_scores"]["real"] is True


def test_errors_leave_the_overall_pairs() -> None:
    a = _run("a", [0.9] * 10, [0.9] * 10)
    b = _run("b", [0.9] * 10, [0.9] * 10, statuses={0: CaseStatus.MODEL_ERROR})
    b.cases[0] = b.cases[0].model_copy(update={"criterion_results": []})
    overall = next(v for v in compare_reports(a, b).verdict_shifts if v.criterion == "overall")
    assert overall.n == 9 and overall.test.discordant == 0


def test_json_and_html_carry_the_tests(tmp_path, capsys) -> None:
    from referee.cli import main

    dirs = [str(store_report(tmp_path / "runs", report)) for report in _seven_more_failures()]
    page = tmp_path / "compare.html"
    assert main(["compare", *dirs, "--json", "--html", str(page)]) == 1  # 7 regressions
    data = json.loads(capsys.readouterr().out)
    faith = next(v for v in data["verdicts"] if v["criterion"] == "faithfulness")
    assert faith["real"] is True and faith["method"] == "exact"
    assert faith["p"] == pytest.approx(2 / 2 ** 7) and faith["holm_p"] == pytest.approx(4 / 2 ** 7)
    assert faith["statement"].startswith("B fails 7 more cases on faithfulness; p = 0.016")
    scores = next(d for d in data["criteria"] if d["criterion"] == "faithfulness")
    assert scores["wilcoxon_method"] == "normal" and scores["real"] is True
    assert scores["effect_dz"] is not None and scores["mde"] > 0
    html = page.read_text()
    assert "B fails 7 more cases on faithfulness; p = 0.016, Holm-adjusted 0.031; real" in html
    assert re.search(r'<tr data-criterion="faithfulness" data-real="true">', html)
    assert re.search(r'<tr data-criterion="tone" data-real="false">', html)
    assert main(["compare", *dirs]) == 1
    console = capsys.readouterr().out
    assert "Which differences are real" in console
    assert "B fails 7 more cases on faithfulness; p = 0.016" in console


def test_compare_html_without_pairs_has_no_tests_section() -> None:
    empty = render_compare_html(compare_reports(EvalReport(name="a"), EvalReport(name="b")))
    assert "Which differences are real" not in empty


def test_a_candidate_stopped_by_a_sequential_gate_says_so() -> None:
    a = _run("a", [0.9] * 40, TONE)
    b = _run("b", [0.9] * 25, TONE[:25])
    b.metadata["sequential"] = {"not_run": 15, "summary": "stopped after 25 of 40 cases: pass "
                                "rate >= 0.50 with 95% confidence (settled after 20; 15 not run)"}
    text = compare_reports(a, b).render_text()
    assert ("B stopped judging early (sequential gate): stopped after 25 of 40 cases" in text
            and "show as removed and are in no paired test" in text)
    assert "stopped judging early" not in compare_reports(a, a).render_text()


def test_a_criterion_named_overall_is_still_a_criterion() -> None:
    def run(name: str, failing: int) -> EvalReport:
        return EvalReport(name=name, cases=[
            CaseResult(index=i, eval_id=f"c{i}", status=CaseStatus.PASSED,
                       criterion_results=[_crit("overall", 0.3 if i < failing else 0.9),
                                          _crit("tone", 0.9)]) for i in range(30)])

    shifts = compare_reports(run("a", 0), run("b", 8)).verdict_shifts
    named, whole = [s for s in shifts if s.criterion == "overall"]
    assert not named.whole_case and whole.whole_case
    assert "on overall; p = 0.008, Holm-adjusted 0.016; real" in named.describe()
    assert whole.to_dict()["whole_case"] is True
