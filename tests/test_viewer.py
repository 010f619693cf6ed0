"""The local viewer: serves stored runs over 127.0.0.1, read-only, to its own origin only."""

from __future__ import annotations

import http.client
import json
import re
from pathlib import Path

import pytest
from test_report_samples import chromium_dom, sample_report

from referee.report.model import CaseStatus, EvalReport
from referee.report.store import RunStore
from referee.report.viewer import start_viewer
from referee.result import CriterionResult


def _store(runs_dir: Path, report: EvalReport, finished: bool = True) -> Path:
    store = RunStore.create(runs_dir, report, case_ids=[c.eval_id for c in report.cases])
    for case in report.cases:
        store.append_case(case)
    if finished:
        store.write_report(report)
    store.release()  # an unfinished run's writer is gone (a live one is listed as running)
    return store.run_dir


def _clean_report() -> EvalReport:
    report = sample_report(name="clean-bot", run_id="20261129-130000-def456")
    report.started_at += 3600
    composite = report.get_case_result("composite")
    assert composite is not None
    fixed = composite.model_copy(update={
        "status": CaseStatus.PASSED,
        "criterion_results": [CriterionResult(criterion="contains", score=1.0, passed=True, threshold=1.0)],
    })
    report.cases = [c for c in report.cases if c.status == CaseStatus.PASSED] + [fixed]
    return report


@pytest.fixture()
def viewer(tmp_path):
    runs = tmp_path / "runs"
    _store(runs, sample_report())
    _store(runs, _clean_report())
    handle = start_viewer(None, runs)
    yield handle
    handle.close()


def _get(handle, path: str, headers: dict[str, str] | None = None, method: str = "GET"):
    port = handle.server.server_address[1]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, headers={"Host": f"127.0.0.1:{port}", **(headers or {})})
        resp = conn.getresponse()
        return resp.status, resp.read().decode("utf-8"), dict(resp.getheaders())
    finally:
        conn.close()


def test_binds_loopback_only(tmp_path) -> None:
    with pytest.raises(ValueError, match="127.0.0.1 only"):
        start_viewer(None, tmp_path, host="0.0.0.0")
    with start_viewer(None, tmp_path) as handle:
        assert handle.server.server_address[0] == "127.0.0.1"
        assert handle.url.startswith("http://127.0.0.1:")


def test_index_lists_runs_and_flags_high_error_rates(viewer) -> None:
    status, page, headers = _get(viewer, "/")
    assert status == 200 and headers["X-Content-Type-Options"] == "nosniff"
    rows = re.findall(r"<tr(?: class=\"flagged\")?><td><a href=\"/run/([^\"]+)\">.*?</tr>", page, re.S)
    assert rows == ["20261129-130000-def456", "20261129-120000-abc123"]  # newest first
    sample_row = re.search(r"<tr class=\"flagged\"><td><a href=\"/run/20261129-120000-abc123\">.*?</tr>",
                           page, re.S).group(0)
    assert "50.0%" in sample_row and "44.4% ⚠" in sample_row and "2026-09-21 14:13:20 UTC" in sample_row
    clean_row = re.search(r"<tr><td><a href=\"/run/20261129-130000-def456\">.*?</tr>", page, re.S).group(0)
    assert "100.0%" in clean_row and "⚠" not in clean_row


def test_serves_one_run_and_its_json(viewer) -> None:
    status, page, headers = _get(viewer, "/run/20261129-120000-abc123")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    assert "refund policy" in page and "&lt;/script&gt;&lt;script&gt;" in page
    assert '<a href="/">' in page
    status, body, headers = _get(viewer, "/run/20261129-120000-abc123/json")
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    assert json.loads(body)["run_id"] == "20261129-120000-abc123"


def test_serves_an_interrupted_run(tmp_path) -> None:
    runs = tmp_path / "runs"
    report = sample_report()
    _store(runs, report, finished=False)
    with start_viewer(None, runs) as handle:
        status, page, _ = _get(handle, "/")
        assert status == 200 and "interrupted" in page
        status, page, _ = _get(handle, "/run/" + report.run_id)
        assert status == 200 and "This run was interrupted" in page


def test_compares_two_runs_side_by_side(viewer) -> None:
    status, page, _ = _get(viewer, "/compare?a=20261129-130000-def456&b=20261129-120000-abc123")
    assert status == 200
    assert "1 regression(s), 0 improvement(s), 2 unchanged, 6 added, 0 removed" in page
    assert '<a href="/run/20261129-130000-def456">' in page and '<a href="/run/20261129-120000-abc123">' in page
    row = re.search(r'<tr class="k-regression"[^>]*>.*?</tr>', page, re.S).group(0)
    assert "composite check" in row and "case PASSED -&gt; FAILED" in row
    # Each side's status links to that case in its own run.
    assert re.search(r'<a href="/run/20261129-130000-def456#case-\d+">PASSED</a>', row)
    assert re.search(r'<a href="/run/20261129-120000-abc123#case-\d+">FAILED</a>', row)
    assert page.count('class="k-added"') == 6
    status, _, _ = _get(viewer, "/compare?a=20261129-130000-def456&b=nope")
    assert status == 404


@pytest.mark.parametrize("headers", [
    {"Host": "evil.example"},
    {"Host": "evil.example:80"},
    {"Host": "127.0.0.1:1"},
    {"Host": ""},
    {"Origin": "http://evil.example"},
    {"Origin": "null"},
    {"Sec-Fetch-Site": "cross-site"},
    {"Sec-Fetch-Site": "same-site"},
])
def test_refuses_foreign_hosts_and_origins(viewer, headers) -> None:
    status, body, _ = _get(viewer, "/run/20261129-120000-abc123", headers)
    assert status == 403
    assert "refund policy" not in body


def test_accepts_its_own_origin(viewer) -> None:
    port = viewer.server.server_address[1]
    for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
        status, _, _ = _get(viewer, "/", {"Host": host, "Origin": f"http://{host}",
                                         "Sec-Fetch-Site": "same-origin"})
        assert status == 200


def test_path_traversal_finds_nothing(tmp_path) -> None:
    runs = tmp_path / "runs"
    _store(runs, sample_report())
    outside = _store(tmp_path / "elsewhere", _clean_report())
    (runs / "linked").symlink_to(outside, target_is_directory=True)
    (tmp_path / "secret.txt").write_text("top secret", encoding="utf-8")
    with start_viewer(None, runs) as handle:
        for path in ("/run/..", "/run/../secret.txt", "/run/..%2Fsecret.txt", "/run/%2e%2e",
                     "/run/linked", "/../secret.txt", "/run/.", "/secret.txt",
                     "/run/20261129-120000-abc123/../../secret.txt",
                     "/run/..%2Felsewhere%2F20261129-130000-def456", "/run/meta.json"):
            status, body, _ = _get(handle, path)
            assert status == 404, path
            assert "top secret" not in body and "clean-bot" not in body
        status, page, _ = _get(handle, "/")
        assert "linked" not in page


def test_is_read_only(viewer) -> None:
    for method in ("POST", "PUT", "DELETE"):
        status, _, _ = _get(viewer, "/", method=method)
        assert status == 405


def test_opens_a_pinned_run_outside_the_runs_dir(tmp_path) -> None:
    outside = _store(tmp_path / "elsewhere", _clean_report())
    with start_viewer(outside, tmp_path / "runs") as handle:
        assert handle.url.endswith("/run/" + outside.name)
        status, page, _ = _get(handle, handle.url.split(str(handle.server.server_address[1]), 1)[1])
        assert status == 200 and "clean-bot" in page
        status, page, _ = _get(handle, "/")
        assert outside.name in page


def test_chromium_viewer_page_runs_no_payload(viewer, tmp_path) -> None:
    dom = chromium_dom(viewer.base_url + "/run/20261129-120000-abc123", tmp_path)
    assert re.search(r'<body[^>]*data-js="on"', dom), "the report's own script did not run"
    # The page's title is the first <title>; a chart's SVG <title> may quote a hostile name as text.
    assert "pwned" not in re.search(r"<title>([^<]*)</title>", dom).group(1)
    assert not re.search(r"<body[^>]*data-pwned", dom)
    assert '<b id="injected">' not in dom


def test_interrupted_run_page_gives_the_resume_command(tmp_path) -> None:
    runs = tmp_path / "runs"
    report = sample_report()
    report.metadata["target"] = "evals/checkout.py"
    run_dir = _store(runs, report, finished=False)
    with start_viewer(None, runs) as handle:
        status, page, _ = _get(handle, "/run/" + report.run_id)
    assert status == 200
    assert f'<code class="resume">referee run evals/checkout.py --resume {run_dir}</code>' in page


def test_index_lists_model_label_date_and_rates(viewer) -> None:
    status, page, _ = _get(viewer, "/")
    assert status == 200
    row = re.search(r'<tr[^>]*><td><a href="/run/20261129-120000-abc123">.*?</tr>', page, re.S)
    assert row is not None
    for text in ("gpt-4o-mini", "2026-", "50.0%", "44.4%"):
        assert text in row.group(0), text
