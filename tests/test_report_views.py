"""The report's pictures and side-by-side views: charts with the right numbers, diffs of expected
against actual, a case table that sorts and filters, and compare with outputs and deltas.

Chromium loads each page; what it shows is read from the DOM and, for the screenshots, from the
pixels (the chart colours appear only where a chart was drawn).
"""

from __future__ import annotations

import io
import json
import re
import subprocess
from pathlib import Path

import pytest
from chromium_support import browser_env, find_chromium
from stored_runs import store_report
from test_report_samples import chromium_dom

from referee.case import EvalCase, ToolCall
from referee.execution import ExecutionResult
from referee.report.compare import compare_reports
from referee.report.diff import align_calls, align_nodes, word_diff
from referee.report.html import render_compare_html, render_html
from referee.report.model import CaseResult, CaseStatus, EvalReport
from referee.report.store import RunStore
from referee.report.viewer import start_viewer
from referee.result import CriterionResult
from referee.usage import TokenUsage


def _crit(name: str, score: float, passed: bool, *, error: str | None = None,
          skipped: bool = False) -> CriterionResult:
    return CriterionResult(criterion=name, score=score, passed=passed, threshold=0.5, error=error,
                           error_kind="judge" if error else None, skipped=skipped)


def views_report(name: str = "views-bot", shift: float = 0.0) -> EvalReport:
    """Five cases with known numbers: contains passes 3 of 4 scored, faithfulness has an error."""
    expected_calls = [ToolCall(name="lookup_order", args={"order_id": "1001"}),
                      ToolCall(name="get_policy")]
    actual_calls = [ToolCall(name="lookup_order", args={"order_id": "1002"}),
                    ToolCall(name="search", args={"q": "refund"})]
    scores = [0.95, 0.15, 0.85, 0.55]
    cases = []
    for i in range(5):
        case = EvalCase.single_turn(f"question {i}", "The refund window is 30 days.",
                                    expected_tool_trajectory=expected_calls if i == 1 else [],
                                    expected_node_order=["router", "policy"] if i == 1 else [],
                                    name=f"case {i}")
        output = "The refund window is 14 days." if i == 1 else "The refund window is 30 days."
        execution = ExecutionResult(actual_response=output,
                                    tool_calls=actual_calls if i == 1 else [],
                                    node_visits=["router", "orders"] if i == 1 else [])
        results = [_crit("contains", 0.0 if i == 1 else 1.0, i != 1)]
        if i < 4:
            score = min(1.0, scores[i] + shift)
            results.append(_crit("faithfulness", score, score >= 0.5))
        elif i == 4:
            results.append(_crit("faithfulness", 0.0, False, error="judge unreachable"))
        status = CaseStatus.FAILED if any(not r.passed for r in results if r.error is None) \
            else CaseStatus.JUDGE_ERROR if i == 4 else CaseStatus.PASSED
        cases.append(CaseResult(
            index=i, eval_id=f"id-{i}", name=f"case {i}", status=status, case=case,
            execution=execution, criterion_results=results,
            duration_seconds=[0.5, 1.0, 2.0, 3.0, 10.0][i],
            scoring_seconds=[0.4, 0.8, 1.5, 2.5, 9.5][i],
            token_usage=TokenUsage(input_tokens=100 * (i + 1), output_tokens=10, requests=i + 1,
                                   cost_usd=0.001 * (i + 1))))
    return EvalReport(name=name, model_id="model-a", cases=cases, finished_at=None)


def _figure(page: str, kind: str, criterion: str | None = None) -> str:
    pattern = rf'<figure class="chart" data-chart="{kind}"[^>]*'
    if criterion:
        pattern += rf'data-criterion="{re.escape(criterion)}"'
    match = re.search(pattern + r".*?</figure>", page, re.S)
    assert match, f"no {kind} chart"
    return match.group(0)


def test_outcome_chart_carries_each_criterions_counts() -> None:
    page = render_html(views_report())
    figure = _figure(page, "outcomes")
    marks = re.findall(r'data-kind="(\w+)" data-value="(\d+)"', figure)
    # contains: 4 passed, 1 failed; faithfulness: 3 passed, 1 failed, 1 error.
    assert marks == [("passed", "4"), ("failed", "1"), ("passed", "3"), ("failed", "1"),
                     ("errors", "1")]
    assert "contains: 4 passed of 5" in figure and "faithfulness: 1 errors of 5" in figure


def test_score_histogram_counts_only_scored_results() -> None:
    page = render_html(views_report())
    figure = _figure(page, "scores", "faithfulness")
    counts = re.search(r'data-counts="([\d ]+)"', figure).group(1).split()
    # 0.15 -> bin 1, 0.55 -> bin 5, 0.85 -> bin 8, 0.95 -> bin 9; the errored result is not a 0.0.
    assert [int(c) for c in counts] == [0, 1, 0, 0, 0, 1, 0, 0, 1, 1]
    assert 'data-n="4"' in figure
    latency = _figure(page, "latency")
    assert 'data-n="5"' in latency and 'data-high="10"' in latency
    tokens = _figure(page, "tokens")
    assert re.search(r'data-counts="([\d ]+)"', tokens).group(1).split().count("0") == 5


def test_expected_and_actual_side_by_side() -> None:
    page = render_html(views_report())
    case = re.search(r'<details class="case[^"]*" id="case-1".*?</details>\n</div>\n</details>',
                     page, re.S) or re.search(r'id="case-1".*?<div class="muted">#1', page, re.S)
    body = case.group(0)
    assert ('<pre class="diff">The refund window is <del>30</del><span class="diff-gap"> </span>'
            '<ins>14</ins> days.</pre>') in body
    rows = re.findall(r'<tr class="o-(\w+)" data-outcome="\w+"><td class="o-label">([^<]*)', body)
    assert [r[0] for r in rows] == ["wrong_args", "missing", "extra", "matched", "missing", "extra"]
    assert '<div class="muted">order_id</div>' in body
    # Raw calls stay available, collapsed.
    assert '<details class="raw"><summary>tool calls as recorded</summary>' in body
    # A case whose output matches its expectation shows no diff.
    other = re.search(r'id="case-0".*?<div class="muted">#0', page, re.S).group(0)
    assert 'class="diff"' not in other


def test_alignments_mark_every_kind_of_difference() -> None:
    expected = [ToolCall(name="a", args={"x": 1}), ToolCall(name="b"), ToolCall(name="c")]
    actual = [ToolCall(name="a", args={"x": 2}), ToolCall(name="c"), ToolCall(name="d")]
    rows = align_calls(expected, actual)
    assert [(r.outcome, r.expected_name, r.actual_name) for r in rows] == [
        ("wrong_args", "a", "a"), ("missing", "b", None), ("matched", "c", "c"),
        ("extra", None, "d")]
    assert rows[0].differing_keys == ("x",)
    assert [(r.outcome, r.expected, r.actual) for r in align_nodes(["r", "p"], ["r", "q"])] == [
        ("matched", "r", "r"), ("missing", "p", None), ("extra", None, "q")]
    pieces = word_diff("a b c", "a x c")
    assert [(p.op, p.text) for p in pieces] == [("same", "a "), ("removed", "b"), ("added", "x"),
                                                 ("same", " c")]
    assert word_diff("w " * 3000, "v " * 3000) is None  # too long to diff: shown whole instead


def test_arguments_the_recording_left_out_show_as_not_recorded() -> None:
    from referee.evaluators.agent import render_trace
    from referee.execution import AgentStep
    from referee.report.html import _calls

    unknown = ToolCall(name="a", args=None)
    (row,) = align_calls([ToolCall(name="a", args={"x": 1})], [unknown])
    assert (row.outcome, row.actual_args, row.differing_keys) == ("matched", "(not recorded)", ())
    assert _calls([unknown])[0]["args"] == "(not recorded)"
    assert "Tool call 1: a((not recorded))" in render_trace([AgentStep(tool_calls=[unknown])])


def test_case_table_has_latency_tokens_cost_and_criterion_cells() -> None:
    page = render_html(views_report())
    header = re.search(r'<table class="cases" id="case-table">.*?</thead>', page, re.S).group(0)
    assert ">contains</th>" in header and ">faithfulness</th>" in header
    # The model's latency and the time spent scoring, apart (the whole case is 10 s).
    assert ">model (s)</th>" in header and ">scoring (s)</th>" in header
    assert "judge tokens" in header and "judge cost ($)" in header
    row = re.search(r'<tr data-case="4" [^>]*>.*?</tr>', page, re.S).group(0)
    assert 'data-outcomes="passed error"' in row
    assert '<a href="#case-4">case 4</a>' in row
    latency = views_report().cases[4].execution.latency_s
    assert (f'<td class="num" data-v="{latency}">{latency:.3f}</td>' if latency is not None
            else '<td class="num" data-v="-1">—</td>') in row
    assert '<td class="num" data-v="9.5">9.500</td>' in row
    assert '<td class="num" data-v="510">510</td>' in row
    assert '<td class="num" data-v="0.005">0.0050</td>' in row


def _chromium_rows(dom: str) -> list[tuple[str, bool]]:
    """(case index, hidden) of each case-table row, in DOM order."""
    return [(m.group(1), "hidden" in m.group(2))
            for m in re.finditer(r'<tr data-case="(\d+)"([^>]*)>', dom)]


def test_chromium_filters_by_criterion_outcome(tmp_path) -> None:
    path = tmp_path / "report.html"
    path.write_text(render_html(views_report()), encoding="utf-8")
    # faithfulness is criterion column 1: only case 1 (0.15) failed it; case 4's judge error is
    # an error, not a failure.
    dom = chromium_dom(path.as_uri() + "#crit=1&outcome=failed", tmp_path)
    assert "1 of 5 case(s) shown" in dom
    assert [i for i, hidden in _chromium_rows(dom) if not hidden] == ["1"]
    dom = chromium_dom(path.as_uri() + "#crit=1&outcome=error", tmp_path)
    assert [i for i, hidden in _chromium_rows(dom) if not hidden] == ["4"]


def test_chromium_sorts_by_a_column(tmp_path) -> None:
    path = tmp_path / "report.html"
    path.write_text(render_html(views_report()), encoding="utf-8")
    # Column 4 is faithfulness (#, case, status, contains, faithfulness): scores descending,
    # the errored case (sort key -1) last.
    dom = chromium_dom(path.as_uri() + "#sort=4&order=desc", tmp_path)
    assert [i for i, _ in _chromium_rows(dom)] == ["0", "2", "3", "1", "4"]
    assert re.search(r'<th[^>]*aria-sort="descending"[^>]*>faithfulness</th>', dom)
    dom = chromium_dom(path.as_uri() + "#sort=5&order=asc", tmp_path)  # latency
    assert [i for i, _ in _chromium_rows(dom)] == ["0", "1", "2", "3", "4"]


def test_chromium_deep_link_opens_the_case(tmp_path) -> None:
    path = tmp_path / "report.html"
    path.write_text(render_html(views_report()), encoding="utf-8")
    dom = chromium_dom(path.as_uri() + "#case-3", tmp_path)
    assert re.search(r'<details class="case[^"]*" id="case-3"[^>]*\bopen=""', dom)
    assert not re.search(r'<details class="case[^"]*" id="case-2"[^>]*\bopen=""', dom)


# Compare --------------------------------------------------------------------------------------

def test_compare_shows_outputs_and_paired_deltas() -> None:
    a = views_report("a")
    b = views_report("b", shift=0.3)
    b.cases[0] = b.cases[0].model_copy(update={
        "execution": ExecutionResult(actual_response="Refunds take 30 days, sorry.")})
    comparison = compare_reports(a, b)
    [faith] = [d for d in comparison.criterion_deltas if d.criterion == "faithfulness"]
    assert faith.n == 4 and faith.delta == pytest.approx((0.05 + 0.3 + 0.15 + 0.3) / 4)
    assert faith.significant and faith.hint == "likely better"
    text = comparison.render_text()
    assert "faithfulness: 0.625 -> 0.825 (+0.200" in text and "likely better" in text
    data = comparison.to_dict()
    changed = [c for c in data["changes"] if c["output_changed"]]
    assert [c["eval_id"] for c in changed] == ["id-0"]
    assert changed[0]["output_b"] == "Refunds take 30 days, sorry."
    page = render_compare_html(comparison, a_href="/run/a", b_href="/run/b")
    assert '<a href="/run/a#case-1">' in page and '<a href="/run/b#case-1">' in page
    output_diff = re.search(r'<details class="output-diff">.*?</details>', page, re.S).group(0)
    assert "<del>" in output_diff and "<ins>Refunds" in output_diff
    delta_chart = _figure(page, "deltas")
    assert re.search(r'data-kind="up" data-value="0\.(19|20)', delta_chart)
    assert re.search(r'data-kind="flat" data-value="0\.0"', delta_chart)  # contains did not move
    assert re.search(r'<tr data-criterion="faithfulness" data-significant="true">', page)


def test_one_flaky_case_is_within_noise() -> None:
    a = views_report("a")
    b = views_report("b")
    flipped = b.cases[2].model_copy(update={"criterion_results": [
        b.cases[2].criterion_results[0], _crit("faithfulness", 0.1, False)]})
    b.cases[2] = flipped
    [faith] = [d for d in compare_reports(a, b).criterion_deltas if d.criterion == "faithfulness"]
    assert faith.delta < 0 and faith.ci_low < 0 <= faith.ci_high
    assert not faith.significant and faith.hint == "within noise"


def test_deltas_are_paired_by_case() -> None:
    """Scores vary a lot from case to case and B adds 0.05 to every one: only pairing sees it."""
    import random

    rng = random.Random(7)
    base = [rng.random() * 0.9 for _ in range(60)]

    def run(name: str, shift: float) -> EvalReport:
        return EvalReport(name=name, cases=[
            CaseResult(index=i, eval_id=f"c{i}", status=CaseStatus.PASSED,
                       criterion_results=[_crit("tone", score + shift, True)])
            for i, score in enumerate(base)])

    [tone] = compare_reports(run("a", 0.0), run("b", 0.05)).criterion_deltas
    assert tone.n == 60 and tone.delta == pytest.approx(0.05)
    # Resampling A's and B's scores independently would give an interval about 0.19 wide
    # (score spread 0.26, n=60) around 0.05, containing 0; paired, every difference is 0.05.
    assert tone.significant and tone.ci_low == pytest.approx(0.05) == tone.ci_high


def test_compare_cli_writes_html_and_json_with_outputs(tmp_path, capsys) -> None:
    from referee.cli import main

    dirs = [str(store_report(tmp_path / "runs", views_report(name, shift)))
            for name, shift in (("a", 0.0), ("b", 0.3))]
    out_html = tmp_path / "diff.html"
    code = main(["compare", *dirs, "--json", "--html", str(out_html)])
    data = json.loads(capsys.readouterr().out)
    assert code == 0  # no criterion crossed its threshold downwards
    assert {d["criterion"] for d in data["criteria"]} == {"contains", "faithfulness"}
    assert data["a"]["model_id"] == "model-a"
    assert out_html.read_text().startswith("<!DOCTYPE html>")


# Screenshots ------------------------------------------------------------------------------

CHART_BLUE = (0x5B, 0x7B, 0xD5)   # histogram bars
PASS_GREEN = (0x13, 0x73, 0x33)   # outcome bars and "better" deltas


def _screenshot(url: str, tmp_path: Path, name: str) -> object:
    Image = pytest.importorskip("PIL.Image")
    profile = tmp_path / f"profile-{name}"
    profile.mkdir()
    png = tmp_path / f"{name}.png"
    proc = subprocess.run(
        [find_chromium(), "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", "--disable-extensions", f"--user-data-dir={profile}",
         "--hide-scrollbars", "--window-size=1280,1600", "--virtual-time-budget=3000",
         f"--screenshot={png}", url],
        capture_output=True, text=True, timeout=90, env=browser_env(tmp_path))
    assert proc.returncode == 0 and png.is_file(), proc.stderr[-2000:]
    return Image.open(io.BytesIO(png.read_bytes())).convert("RGB")


def _pixels_near(image: object, colour: tuple[int, int, int], tolerance: int = 12) -> int:
    return sum(count for count, rgb in image.getcolors(maxcolors=1 << 20)
               if all(abs(c - t) <= tolerance for c, t in zip(rgb, colour)))


def test_screenshots_show_charts_on_report_compare_and_index(tmp_path) -> None:
    runs = tmp_path / "runs"
    keys = []
    for name, shift in (("a", 0.0), ("b", 0.3)):
        report = views_report(name, shift)
        store = RunStore.create(runs, report, case_ids=[c.eval_id for c in report.cases])
        for case in report.cases:
            store.append_case(case)
        store.write_report(report)
        keys.append(store.run_dir.name)
    with start_viewer(None, runs) as handle:
        report_png = _screenshot(f"{handle.base_url}/run/{keys[0]}", tmp_path, "report")
        compare_png = _screenshot(f"{handle.base_url}/compare?a={keys[0]}&b={keys[1]}", tmp_path,
                                  "compare")
        index_png = _screenshot(handle.base_url + "/", tmp_path, "index")
    # The histograms' blue and the outcome bars' green are drawn on the report's first screen.
    assert _pixels_near(report_png, CHART_BLUE) > 2000
    assert _pixels_near(report_png, PASS_GREEN) > 1000
    # The compare page draws its delta bars (green: B is better on both criteria).
    assert _pixels_near(compare_png, PASS_GREEN) > 300
    # The index is a page of text and table, not a blank or an error page.
    assert index_png.getbbox() is not None
    dark = sum(n for n, rgb in index_png.getcolors(maxcolors=1 << 20) if sum(rgb) < 200)
    assert dark > 500


# Large runs: compressed case details ----------------------------------------------------------

def _large_report(n: int = 250, hostile_at: int | None = None) -> EvalReport:
    from test_report_samples import PAYLOAD

    cases = []
    for i in range(n):
        output = f"answer number {i} says zebra{i}x"
        if i == hostile_at:
            output += PAYLOAD
        cases.append(CaseResult(
            index=i, eval_id=f"c{i}", name=f"case {i}", status=CaseStatus.PASSED,
            case=EvalCase.single_turn(f"question {i}", f"answer number {i}"),
            execution=ExecutionResult(actual_response=output),
            criterion_results=[_crit("contains", 1.0, True)]))
    return EvalReport(name="large", cases=cases)


def test_large_report_ships_case_details_compressed() -> None:
    import base64
    import gzip

    from referee.report.html import BODY_CHUNK, COMPRESS_CASES_OVER

    small = render_html(_large_report(COMPRESS_CASES_OVER))
    assert '<script type="application/gzip"' not in small and "zebra7x" in small
    page = render_html(_large_report(250))
    blocks = re.findall(r'<script type="application/gzip" id="bodies-(\d+)">([^<]+)</script>', page)
    assert [b[0] for b in blocks] == ["0", "1", "2"] and BODY_CHUNK == 100
    assert "zebra7x" not in page  # only inside a block
    markup = gzip.decompress(base64.b64decode(blocks[2][1])).decode()
    assert '<div class="body" data-for="249">' in markup and "zebra249x" in markup
    assert re.search(r'<details class="case[^"]*" id="case-249" data-case="249" data-chunk="2"', page)
    # The summary row and the table stay plain, so the page is readable before any inflation.
    assert '<a href="#case-249">case 249</a>' in page


def test_chromium_inflates_a_case_when_it_is_linked(tmp_path) -> None:
    path = tmp_path / "report.html"
    path.write_text(render_html(_large_report(250)), encoding="utf-8")
    dom = chromium_dom(path.as_uri() + "#case-240", tmp_path)
    assert re.search(r'<details class="case[^"]*" id="case-240"[^>]*\bopen=""', dom)
    assert "zebra240x" in dom          # its chunk was inflated into the page
    assert "zebra10x" not in dom       # the others were not


def test_chromium_searches_compressed_details(tmp_path) -> None:
    path = tmp_path / "report.html"
    path.write_text(render_html(_large_report(250)), encoding="utf-8")
    dom = chromium_dom(path.as_uri() + "#q=zebra230x", tmp_path)
    assert "1 of 250 case(s) shown" in dom
    assert [i for i, hidden in _chromium_rows(dom) if not hidden] == ["230"]


def test_chromium_compressed_payload_stays_inert(tmp_path) -> None:
    from test_report_html import _pwned

    path = tmp_path / "report.html"
    path.write_text(render_html(_large_report(250, hostile_at=120)), encoding="utf-8")
    dom = chromium_dom(path.as_uri() + "#case-120", tmp_path)
    assert "zebra120x" in dom and "onerror=" in dom  # shown as text, after inflation
    assert _pwned(dom) == []


def test_chromium_lists_a_large_run_a_page_at_a_time(tmp_path) -> None:
    from referee.report.html import PAGE_ROWS

    page = render_html(_large_report(250))
    # Laid out hidden from the start, so the first layout covers one page of rows.
    assert len(re.findall(r'<tr data-case="\d+"[^>]* hidden>', page)) == 250 - PAGE_ROWS
    path = tmp_path / "report.html"
    path.write_text(page, encoding="utf-8")
    dom = chromium_dom(path.as_uri(), tmp_path)
    # What is listed is counted: one page of 250 (it said "250 of 250 shown" beside "show more").
    assert "200 of 250 matching case(s) shown" in dom and "250 of 250 case(s) shown" not in dom
    listed = [i for i, hidden in _chromium_rows(dom) if not hidden]
    assert listed == [str(i) for i in range(PAGE_ROWS)]
    assert re.search(r'<button type="button" id="more">show 50 more of 50</button>', dom)
    # A search lists its matches whatever page they were on.
    dom = chromium_dom(path.as_uri() + "#q=zebra245x", tmp_path)
    assert [i for i, hidden in _chromium_rows(dom) if not hidden] == ["245"]
    assert re.search(r'<button type="button" id="more" hidden="">', dom)
