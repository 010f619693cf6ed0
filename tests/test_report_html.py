"""The HTML report is self-contained, shows every case, and renders hostile output as text.

The Chromium tests load the file in a real browser: the report's own script must run
(filters are wired, body[data-js=on]) while no payload from model output may run.
"""

from __future__ import annotations

import re

from test_report_samples import (
    IMG_PAYLOAD,
    PAYLOAD,
    RAW_HTTP_MARKER,
    SCRIPT_PAYLOAD,
    chromium_dom,
    sample_report,
)

from referee.execution import ExecutionResult
from referee.report.html import MAX_FIELD_CHARS, render_html
from referee.report.model import CaseResult, CaseStatus, EvalReport


def _pwned(dom: str) -> list[str]:
    """Traces a payload would have left in the rendered DOM."""
    traces = []
    # The page's own title is the first <title>; the charts' SVG <title>s may quote a case name.
    page_title = re.search(r"<title>([^<]*)</title>", dom)
    if page_title and "pwned" in page_title.group(1):
        traces.append("title changed")
    if re.search(r"<body[^>]*data-pwned", dom):
        traces.append("body attribute set")
    if '<b id="injected">' in dom:
        traces.append("markup broke out of its container")
    return traces


def test_html_is_one_file_with_no_external_resources() -> None:
    page = render_html(sample_report())
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"""(src|href|action)\s*=\s*["']?(https?:)?//""", page, re.I)
    assert "@import" not in page and "url(" not in page
    # One script runs; any other <script> is data it reads (the labelling panel's rows).
    assert page.count("<script>") == 1 and page.count("<style") == 1
    assert re.findall(r"<script[^>]*>", page) == ["<script type=\"application/json\" "
                                                    "id=\"label-data\">", "<script>"]
    csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', page)
    assert csp is not None
    policy = csp.group(1)
    assert "default-src 'none'" in policy and "unsafe-inline" not in policy
    assert re.search(r"script-src 'sha256-[A-Za-z0-9+/=]+'", policy)


def test_html_shows_summary_and_case_details() -> None:
    page = render_html(sample_report())
    for text in ("checkout-bot", "50.0%", "44.4%", "gpt-4o-mini", "anthropic/claude-haiku-4-5",
                 "MODEL_ERROR", "TIMEOUT", "SKIPPED", "TimeoutError: upstream 504",
                 "What is the refund window?", "30 days", "Refunds are accepted within 30 days.",
                 "lookup_policy", "router → policy",
                 "Does the answer state fact 2?", "unknown", "Unknown. The answer mentions it",
                 "Curt but polite.", "Abrupt.", '{&#34;score&#34;: 0.5, &#34;reason&#34;: &#34;Abrupt.&#34;}',
                 "Mostly matches.", "gemini-2.5-flash", "1 of 2 sub-criteria passed",
                 "Book a table", "planner → booking", "judge unreachable after 3 attempts (HTTP 503)"):
        assert text in page, text
    assert page.count('<details class="case') == 9
    assert len(re.findall(r'<details class="case[^>]*data-group="error"', page)) == 4
    assert len(re.findall(r'<tr data-case="\d+" data-group="error"', page)) == 4
    assert RAW_HTTP_MARKER not in page


def test_html_escapes_every_payload() -> None:
    page = render_html(sample_report())
    body = page.split("<body", 1)[1].rsplit("<script>", 1)[0]
    assert SCRIPT_PAYLOAD not in body and IMG_PAYLOAD not in body
    assert "<img" not in body and "<b id=" not in body
    # The report's own charts are the only SVG: none comes from a payload.
    assert body.count("<svg") == body.count('<figure class="chart"')
    assert "<svg onload" not in body
    assert "&lt;/script&gt;&lt;script&gt;document.title=" in body
    assert "&lt;img src=x onerror=" in body
    # The payload's own "&amp;" must come out as the literal text "&amp;".
    assert "&amp;amp;" in body


def test_huge_output_is_cut_and_says_so() -> None:
    case = CaseResult(eval_id="big", status=CaseStatus.PASSED,
                      execution=ExecutionResult(actual_response="x" * (MAX_FIELD_CHARS + 500)))
    page = render_html(EvalReport(name="big", cases=[case]))
    assert "500 more character(s) not shown" in page
    assert len(page) < MAX_FIELD_CHARS + 50_000


def test_chromium_runs_the_report_script_and_no_payload(tmp_path) -> None:
    path = tmp_path / "report.html"
    path.write_text(render_html(sample_report()), encoding="utf-8")
    dom = chromium_dom(path.as_uri(), tmp_path)
    assert re.search(r'<body[^>]*data-js="on"', dom), "the report's own script did not run"
    assert "9 of 9 case(s) shown" in dom
    assert "<title>checkout-bot — referee report</title>" in dom
    assert _pwned(dom) == []


def test_chromium_csp_alone_stops_markup_that_escaped_escaping(tmp_path) -> None:
    """Defence in depth: raw payload spliced into the page still cannot run under its CSP."""
    page = render_html(sample_report())
    spliced = page.replace("<h2>Cases</h2>", "<h2>Cases</h2>" + PAYLOAD, 1)
    without_csp = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", spliced)
    (tmp_path / "with.html").write_text(spliced, encoding="utf-8")
    (tmp_path / "without.html").write_text(without_csp, encoding="utf-8")

    dom = chromium_dom((tmp_path / "with.html").as_uri(), tmp_path)
    assert re.search(r'<body[^>]*data-js="on"', dom), "the report's own script did not run"
    assert "title changed" not in _pwned(dom) and "body attribute set" not in _pwned(dom)

    # Control: the same page without its policy does run the payload, so the probe works.
    control = chromium_dom((tmp_path / "without.html").as_uri(), tmp_path)
    assert "title changed" in _pwned(control) and "body attribute set" in _pwned(control)


def test_bare_and_empty_runs_render() -> None:
    empty = render_html(EvalReport(name="nothing yet"))
    assert "nothing yet" in empty and '<details class="case' not in empty
    assert "0.0%" not in empty and "<b>n/a</b>" in empty
    bare = CaseResult(eval_id="bare", status=CaseStatus.MODEL_ERROR, error="ValueError: no")
    page = render_html(EvalReport(cases=[bare]))
    assert "ValueError: no" in page and 'data-status="MODEL_ERROR"' in page


def test_a_criterion_error_shows_once_and_unmarked() -> None:
    from referee.result import CriterionResult

    result = CriterionResult(criterion="judged", score=0.0, passed=False, threshold=0.5,
                             error="timed out after 3 attempt(s)", error_kind="judge")
    assert result.reason == "[judge unavailable: timed out after 3 attempt(s)]"  # multivon's mark
    case = CaseResult(eval_id="j", status=CaseStatus.JUDGE_ERROR, criterion_results=[result])
    page = render_html(EvalReport(cases=[case]))
    # Once in the case (the labelling panel names it again beside the verdict to label).
    case_part = page.split('<details class="case', 1)[1]
    assert case_part.count("timed out after 3 attempt(s)") == 1 and "judge unavailable:" not in page


def test_question_lists_of_other_shapes_render_as_rows() -> None:
    from referee.result import CriterionResult

    result = CriterionResult(
        criterion="check", score=0.5, passed=False, threshold=0.7,
        details={"questions": ["Is it polite?", "Is it short?"], "verdicts": ["yes", "no"],
                 "raw_replies": ["Yes, very.", "No: 400 words."], "odd": {"nested": [1, 2]}},
    )
    case = CaseResult(eval_id="q", status=CaseStatus.FAILED, criterion_results=[result])
    page = render_html(EvalReport(cases=[case]))
    row = re.search(r"<tr><td class=\"num\">2</td><td>Is it short\?</td>.*?</tr>", page, re.S)
    assert row is not None
    assert 'class="v-no">no<' in row.group(0) and "No: 400 words." in row.group(0)
    assert "&#34;nested&#34;" in page and "&#34;verdicts&#34;" not in page


def test_chromium_filters_from_the_url_fragment(tmp_path) -> None:
    path = tmp_path / "report.html"
    path.write_text(render_html(sample_report()), encoding="utf-8")
    dom = chromium_dom(path.as_uri() + "#filter=error&q=upstream", tmp_path)
    assert "1 of 9 case(s) shown" in dom
    assert re.search(r'<button type="button" data-filter="error" aria-pressed="true">', dom)
    visible = re.findall(r'<details class="case[^"]*" id="case-\d+" data-case="\d+" '
                         r'data-group="(\w+)" data-status="(\w+)"[^>]*?(?<!hidden="")>', dom)
    assert visible == [("error", "MODEL_ERROR")]
    assert len(re.findall(r"<details[^>]*hidden", dom)) == 8
