"""Labelling in the self-contained report.html, opened from disk in headless Chromium: the
viewer's queue and keys, labels kept in the browser's local storage across a reload, "Download
labels" as the rows `referee labels export` writes, `referee labels import` into the run, and
`referee calibrate --from-run` reading them."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("numpy")

from calibrate.test_calibrate_end_to_end import server  # noqa: E402,F401
from chromium_cdp import Browser  # noqa: E402
from labels.test_labels_end_to_end import _calibrate, _cases, _run  # noqa: E402
from test_report_samples import sample_report  # noqa: E402
from test_viewer import _store  # noqa: E402

from referee.cli import main  # noqa: E402
from referee.labels import LABELS_FILE, LabelStore, review_queue  # noqa: E402
from referee.labels._review import describe  # noqa: E402
from referee.report.html import render_html  # noqa: E402
from referee.report.store import load_run  # noqa: E402

ORDER = ("Array.from(document.querySelectorAll('#labelling section.item'))"
         ".map(s => s.dataset.case + '|' + s.dataset.criterion)")


def _open_panel(page) -> None:
    page.evaluate("document.querySelector('#label-panel > summary').click()")
    page.wait_for("document.body.dataset.labelling === 'ready'")  # built when first opened


def _downloaded(page, folder: Path) -> str:
    """Click "Download labels" and return the file the browser saved."""
    page.call("Page.setDownloadBehavior", behavior="allow", downloadPath=str(folder))
    page.evaluate("document.getElementById('download-labels').click()")
    name = page.evaluate("document.getElementById('download-labels').getAttribute('download')")
    target = folder / name
    deadline = time.monotonic() + 20
    # The browser writes a temporary file and gives it this name once the download is whole.
    while not target.is_file():
        assert time.monotonic() < deadline, "the browser saved no labels file"
        time.sleep(0.05)
    return target.read_text(encoding="utf-8")


def test_label_the_report_file_reload_download_import_and_calibrate(tmp_path, capsys, server):
    run_dir = _run(tmp_path / "runs", formats=("json", "html"))
    report_file = run_dir / "report.html"
    queue = review_queue(load_run(run_dir))
    truth = {case.eval_id: case.metadata["right"] for case in _cases()}
    with Browser(tmp_path) as page:
        page.goto(report_file.as_uri())
        assert page.evaluate("document.getElementById('label-storage-off').hidden") is True
        # Closed, the panel leaves the report's keys alone (its queue is not even built).
        page.press("y")
        assert page.evaluate(ORDER) == []
        _open_panel(page)
        # The report's own queue is the viewer's: the same results in the same order.
        assert page.evaluate(ORDER) == [f"{i.case_id}|{i.criterion}" for i in queue]
        assert page.evaluate("document.querySelector('#item-0').dataset.label") == ""
        page.evaluate("document.getElementById('labeller').focus()")
        page.type_text("ana")
        page.evaluate("document.getElementById('labeller').blur()")
        first, second = queue[0], queue[1]
        # The current result shows the case it is on (input and output, from the page's rows).
        assert "Question" in page.evaluate("document.querySelector('#item-0 .fields').textContent")
        page.press("y" if first.passed == truth[first.case_id] else "n")
        page.wait_for("document.querySelector('#item-0').dataset.label !== ''")
        assert page.evaluate("document.body.dataset.current") == "1"
        page.press("f" if not truth[second.case_id] else "p")
        page.wait_for("document.querySelector('#item-1').dataset.label !== ''")
        page.press("k")  # back to the second, for a comment
        page.press("c")
        page.type_text("checked against the context")
        page.press("Enter", ctrl=True)
        page.wait_for("document.querySelector('#item-1 .label-text').textContent"
                      ".includes('checked against the context')")
        page.reload()
        # Kept in the browser: shown again, counted, and the page opens at the next result.
        _open_panel(page)
        assert page.evaluate("document.getElementById('labelled-count').textContent") == (
            f"2 of {len(queue)} labelled")
        assert page.evaluate("document.body.dataset.current") == "2"
        assert page.evaluate("document.getElementById('labeller').value") == "ana"
        text = _downloaded(page, tmp_path / "downloads")
    # The file the browser saved, which calibrate reads as it is.
    rows = [json.loads(line) for line in text.split("\n") if line]
    assert [row["id"] for row in rows] == [first.case_id, second.case_id]
    assert [row["label"] for row in rows] == [
        "pass" if truth[first.case_id] else "fail", "pass" if truth[second.case_id] else "fail"]
    assert rows[1]["metadata"]["comment"] == "checked against the context"
    assert {row["metadata"]["labeller"] for row in rows} == {"ana"}
    downloaded = tmp_path / "downloaded.jsonl"
    downloaded.write_text(text, encoding="utf-8")

    # Imported into the run's append-only store, with who and when; twice adds nothing.
    cases_before = (run_dir / "cases.jsonl").read_bytes()
    assert main(["labels", "import", str(run_dir), str(downloaded)]) == 0
    assert "2 label(s) added" in capsys.readouterr().err
    assert main(["labels", "import", str(run_dir), str(downloaded)]) == 0
    assert "0 label(s) added" in capsys.readouterr().err
    stored = LabelStore(run_dir).all()
    assert len(stored) == 2 and {label.labeller for label in stored} == {"ana"}
    assert all(label.at == row["metadata"]["at"] for label, row in zip(stored, rows))
    assert (run_dir / "cases.jsonl").read_bytes() == cases_before
    # The page words a label as the viewer does.
    assert describe(stored[1])[1] == (
        f"person says {'pass' if truth[second.case_id] else 'fail'}; comment: checked against "
        "the context (ana)")

    # The run's export now gives the rows the browser gave (the run named by its directory).
    exported = tmp_path / "exported.jsonl"
    assert main(["labels", "export", str(run_dir), "-o", str(exported)]) == 0
    capsys.readouterr()
    again = [json.loads(line) for line in exported.read_text().split("\n") if line]
    for row in rows + again:
        row["metadata"].pop("run")
    assert again == rows

    # calibrate reads the downloaded file and the run alike.
    from_file = _calibrate(capsys, str(downloaded), "--out", str(tmp_path / "cal-file"))
    from_run = _calibrate(capsys, "--from-run", str(run_dir), "--out", str(tmp_path / "cal-run"))
    for key in ("agreement", "rows", "scored", "data_fingerprint"):
        assert from_run[key] == from_file[key], key
    assert from_run["scored"] == 2


def test_the_report_panel_runs_none_of_the_outputs_and_matches_the_viewer_queue(tmp_path):
    run_dir = _store(tmp_path / "runs", sample_report())
    report = load_run(run_dir)
    page_file = tmp_path / "report.html"
    page_file.write_text(render_html(report), encoding="utf-8")
    with Browser(tmp_path) as page:
        page.goto(page_file.as_uri())
        _open_panel(page)
        assert page.evaluate(ORDER) == [f"{i.case_id}|{i.criterion}" for i in
                                        review_queue(report)]
        for _ in range(len(review_queue(report))):  # every result's fields shown once
            page.press("j")
        assert "pwned" not in page.evaluate("document.title")
        assert page.evaluate("document.body.getAttribute('data-pwned')") is None
        assert page.evaluate("document.getElementById('injected')") is None
        hostile = page.evaluate("Array.from(document.querySelectorAll('#labelling pre'))"
                                ".map(p => p.textContent).join('\\n')")
        assert "</script><script>" in hostile  # shown as text
        # Nothing labelled: the download says so instead of saving an empty file.
        page.evaluate("document.getElementById('download-labels').click()")
        assert "no pass/fail labels" in page.evaluate(
            "document.getElementById('label-status').textContent")


def test_without_local_storage_the_page_says_so_and_still_labels(tmp_path):
    """A page in an opaque origin (as a sandboxed frame or some browsers' file://) may not
    touch local storage: the panel says labels last only as long as the page."""
    html = render_html(sample_report()).encode("utf-8")

    class Sandboxed(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Security-Policy", "sandbox allow-scripts allow-downloads")
            self.send_header("Content-Length", str(len(html)))
            self.end_headers()
            self.wfile.write(html)

        def log_message(self, *args: object) -> None:
            pass

    host = ThreadingHTTPServer(("127.0.0.1", 0), Sandboxed)
    thread = threading.Thread(target=host.serve_forever, daemon=True)
    thread.start()
    try:
        with Browser(tmp_path) as page:
            page.goto(f"http://127.0.0.1:{host.server_address[1]}/report.html")
            assert page.evaluate("document.getElementById('label-storage-off').hidden") is False
            _open_panel(page)
            page.press("n")
            page.wait_for("document.querySelector('#item-0').dataset.label === 'wrong/-'")
            # Still downloadable while the page is open.
            assert page.evaluate(
                "document.getElementById('download-labels').dataset.rows") == "1"
    finally:
        host.shutdown()
        host.server_close()


def _labels_file(tmp_path: Path, lines: list[object]) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n"
                            for line in lines), encoding="utf-8")
    return path


def test_import_checks_every_line_and_stores_nothing_from_a_bad_file(tmp_path, capsys):
    run_dir = _store(tmp_path / "runs", sample_report())
    report = load_run(run_dir)
    cases = {c.eval_id: c for c in report.cases}
    # The hostile case: its output holds markup and a raw U+2028, which is no line end.
    item = next(i for i in review_queue(report) if i.case_id == "hostile")
    case = cases[item.case_id]
    assert "\u2028" in case.execution.actual_response
    good = {"id": item.case_id, "input": case.case.input,
            "output": case.execution.actual_response, "label": "fail",
            "metadata": {"case_id": item.case_id, "criterion": item.criterion,
                         "run_id": report.run_id}}
    bad = [
        ("not json", "invalid JSON", None),
        ([1], "not an object", None),
        ({**good, "label": "maybe"}, "'maybe' is not a label", "label"),
        ({**good, "metadata": None}, "missing", "metadata"),
        ({**good, "metadata": {**good["metadata"], "run_id": "other"}}, "labels of run 'other'",
         "metadata.run_id"),
        ({**good, "metadata": {**good["metadata"], "case_id": "nope"}}, "no case 'nope'",
         "metadata.case_id"),
        ({**good, "metadata": {**good["metadata"], "criterion": "nope"}},
         "no judged criterion 'nope'", "metadata.criterion"),
        ({**good, "output": "another output"}, "not the output the run stored", "output"),
        ({**good, "metadata": {**good["metadata"], "verdict": "maybe"}}, "right", "metadata.verdict"),
        ({**good, "metadata": {**good["metadata"], "at": "noon"}}, "number", "metadata.at"),
        ({**good, "label": "pass" if item.passed else "fail",
          "metadata": {**good["metadata"], "verdict": "right", "judge_passed": not item.passed}},
         "disagrees", "label"),
    ]
    for number, (line, words, field) in enumerate(bad, start=1):
        path = _labels_file(tmp_path, [json.dumps(good, ensure_ascii=False), line])
        assert main(["labels", "import", str(run_dir), str(path)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        # One bad line: one line names the file, the line and the field, and that nothing
        # was stored (issue 31: no summary line repeating it).
        assert len(err) == 1, err
        assert err[0].startswith(f"referee: error: {path}:2: ")
        assert words in err[0], (number, err[0])
        if field:
            assert f"field '{field}'" in err[0]
        assert "nothing was imported" in err[0]
        assert not (run_dir / LABELS_FILE).exists()
    # Every bad line is named at once, so one pass over the file fixes them all.
    path = _labels_file(tmp_path, [bad[2][0], good, bad[5][0]])
    assert main(["labels", "import", str(run_dir), str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:1: " in err and f"{path}:3: " in err and "2 bad line(s)" in err
    # A hand-written row (no verdict in metadata) is the person's own verdict, named by
    # --labeller, at the time of the import.
    path = _labels_file(tmp_path, [json.dumps(good, ensure_ascii=False)])
    assert main(["labels", "import", str(run_dir), str(path), "--labeller", "bo"]) == 0
    [label] = LabelStore(run_dir).all()
    assert (label.human, label.verdict, label.labeller, label.judge_passed) == (
        "fail", None, "bo", item.passed)
    assert main(["labels", "import", str(run_dir), str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl: file not found" in capsys.readouterr().err


def test_a_large_report_labels_from_its_packed_rows(tmp_path):
    """Past COMPRESS_CASES_OVER cases the panel's rows ship gzip-packed like the case details;
    the page unpacks them to show a result and to build the download, text exact."""
    from test_report_views import _large_report

    report = _large_report(250, hostile_at=0)
    page_file = tmp_path / "report.html"
    html = render_html(report)
    assert "zebra0x" not in html.split('id="label-data"', 1)[1]  # packed, not plain
    page_file.write_text(html, encoding="utf-8")
    with Browser(tmp_path) as page:
        page.goto(page_file.as_uri())
        _open_panel(page)
        page.wait_for("document.querySelector('#item-0 .fields').textContent.includes('zebra0x')")
        page.press("p")
        page.wait_for("document.getElementById('download-labels').dataset.rows === '1'")
        text = _downloaded(page, tmp_path / "downloads")
    [row] = [json.loads(line) for line in text.split("\n") if line]
    case = report.cases[0]
    assert (row["id"], row["label"]) == ("c0", "pass")
    assert row["output"] == case.execution.actual_response  # the hostile payload, exact
    assert row["input"] == case.case.input and row["expected_output"] == case.case.expected_output


def test_the_viewer_run_page_links_to_its_labelling_page_instead_of_a_panel(tmp_path):
    report = sample_report()
    served = render_html(report, index_href="/", run_key="r", label_href="/run/r/label")
    assert 'id="label-panel"' not in served and 'href="/run/r/label"' in served
    assert 'id="label-panel"' in render_html(report)


def test_a_large_download_is_saved_whole(tmp_path):
    """1,200 labelled rows of 2,000-character outputs (labels kept from an earlier visit)."""
    from test_report_views import _large_report

    report = _large_report(1200)
    for case in report.cases:
        case.execution.actual_response += " " + "x" * 2000
    page_file = tmp_path / "report.html"
    page_file.write_text(render_html(report), encoding="utf-8")
    labels = {f"c{i}\ncontains": {"case_id": f"c{i}", "criterion": "contains", "scoring": 1,
                                   "verdict": "right", "human": None, "comment": "",
                                   "judge_passed": True, "judge_score": 1.0, "labeller": "ana",
                                   "at": 1.0} for i in range(1200)}
    with Browser(tmp_path) as page:
        page.goto(page_file.as_uri())
        page.evaluate(f"localStorage.setItem('referee-labels:{report.run_id}', "
                      f"{json.dumps(json.dumps(labels))})")
        page.reload()
        _open_panel(page)
        assert page.evaluate("document.getElementById('download-labels').dataset.rows") == "1200"
        text = _downloaded(page, tmp_path / "downloads")
    assert len(text) > 2 * 1024 * 1024
    rows = [json.loads(line) for line in text.split("\n") if line]
    assert len(rows) == 1200 and rows[-1]["output"] == report.cases[-1].execution.actual_response


def test_a_key_in_an_output_is_masked_in_the_report_and_its_label_still_imports(
        tmp_path, monkeypatch, capsys):
    key = "gwkey-CANARY-3b5d7f9a1c2e4f6a8b0d2f4a6c8e0b2d4f"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    report = sample_report()
    refund = next(c for c in report.cases if c.eval_id == "refund")
    refund.execution.actual_response += f" (sent with {key})"
    run_dir = _store(tmp_path / "runs", report)
    page = render_html(load_run(run_dir))
    data = page.split('id="label-data">', 1)[1].split("</script>", 1)[0]
    assert key[:12] not in data  # the labelling data carries no key, nor a piece of one
    rows = json.loads(data)["rows"]
    assert key not in rows["refund"]["output"] and "(sent with " in rows["refund"]["output"]
    # The row as the page downloads it (masked output) still fits the run.
    path = _labels_file(tmp_path, [{"input": rows["refund"]["input"],
                                    "output": rows["refund"]["output"], "label": "pass",
                                    "metadata": {"case_id": "refund", "criterion": "contains"}}])
    assert main(["labels", "import", str(run_dir), str(path)]) == 0, capsys.readouterr().err
    assert len(LabelStore(run_dir).all()) == 1


def test_a_score_json_cannot_hold_leaves_the_page_data_readable(tmp_path):
    """A criterion that scored NaN: the page's JSON stays strict JSON, which browsers parse."""
    from referee.report.model import CaseResult, CaseStatus, EvalReport
    from referee.result import CriterionResult

    def strict(constant: str):
        raise AssertionError(f"{constant} is not JSON")

    odd = CriterionResult(criterion="mine", score=float("nan"), passed=False, threshold=0.5)
    report = EvalReport(cases=[CaseResult(eval_id="a", status=CaseStatus.FAILED,
                                          criterion_results=[odd])])
    page = render_html(report)
    data = json.loads(page.split('id="label-data">', 1)[1].split("</script>", 1)[0],
                      parse_constant=strict)
    assert data["queue"][0]["score"] is None
    page_file = tmp_path / "report.html"
    page_file.write_text(page, encoding="utf-8")
    with Browser(tmp_path) as browser:
        browser.goto(page_file.as_uri())
        _open_panel(browser)
        assert "score none" in browser.evaluate("document.querySelector('#item-0').textContent")


def test_a_huge_output_is_cut_in_the_panel_marked_imported_and_refused_by_calibrate(
        tmp_path, capsys):
    """A runaway 1 MB output: the panel's row holds the page's cut of it and says so; the row
    the browser downloads keeps the mark and imports into the run (only the label is stored),
    and `referee calibrate` refuses to judge the cut text, pointing at import and --from-run."""
    from referee.report.html import MAX_FIELD_CHARS

    report = sample_report()
    refund = next(c for c in report.cases if c.eval_id == "refund")
    refund.execution.actual_response = ("Refunds take 30 days. " + "x" * 1000 + "\n") * 1000
    huge = refund.execution.actual_response
    run_dir = _store(tmp_path / "runs", report)
    page = render_html(load_run(run_dir))
    assert len(page) < len(huge)
    row = json.loads(page.split('id="label-data">', 1)[1].split("</script>", 1)[0])["rows"][
        "refund"]
    assert row["output"] == huge[:MAX_FIELD_CHARS]
    assert row["cut_fields"] == {"output": len(huge) - MAX_FIELD_CHARS}
    assert "input" not in row["cut_fields"]
    assert 'id="label-cut-note"' in page and "--from-run" in page
    assert 'id="label-cut-note"' not in render_html(sample_report())  # nothing cut, no note

    # In the browser: the result shows the cut and how much was left out, and "Download
    # labels" keeps the mark on the row.
    page_file = tmp_path / "report.html"
    page_file.write_text(page, encoding="utf-8")
    with Browser(tmp_path) as browser:
        browser.goto(page_file.as_uri())
        _open_panel(browser)
        order = browser.evaluate(ORDER)
        target = order.index("refund|contains")
        while browser.evaluate("Number(document.body.dataset.current)") < target:
            browser.press("j")
        shown = browser.evaluate(f"document.querySelector('#item-{target} .fields').textContent")
        assert f"… {len(huge) - MAX_FIELD_CHARS} more character(s) not shown" in shown
        browser.press("p")
        browser.wait_for("document.getElementById('download-labels').dataset.rows === '1'")
        [downloaded] = [json.loads(line) for line in
                        _downloaded(browser, tmp_path / "downloads").split("\n") if line]
    assert downloaded["output"] == row["output"]
    assert downloaded["metadata"]["cut_fields"] == row["cut_fields"]
    unmarked = {**downloaded, "metadata": {k: v for k, v in downloaded["metadata"].items()
                                           if k != "cut_fields"}}
    path = _labels_file(tmp_path, [unmarked])
    assert main(["labels", "import", str(run_dir), str(path)]) == 2  # a prefix must be marked
    assert "not the output the run stored" in capsys.readouterr().err
    path = _labels_file(tmp_path, [downloaded])
    assert main(["labels", "import", str(run_dir), str(path)]) == 0, capsys.readouterr().err
    [label] = LabelStore(run_dir).all()
    assert (label.case_id, label.criterion, label.human) == ("refund", "contains", "pass")

    capsys.readouterr()
    assert main(["calibrate", str(path), "--judge", "openai/gpt-4o-mini", "--evaluator",
                 "faithfulness", "--no-write"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"referee: error: {path}:1: field 'output': ")
    assert "labels import" in err[0] and "--from-run" in err[0]
