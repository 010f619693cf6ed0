"""Labelling verdicts in the viewer: the queue, keyboard labelling in headless Chromium, labels
kept beside the run, their export, and the per-session token that guards every write."""

from __future__ import annotations

import http.client
import json
from pathlib import Path

import pytest
from chromium_cdp import Browser
from test_report_samples import sample_report
from test_viewer import _store

from referee.cli import main
from referee.labels import LABELS_FILE, LabelStore, review_queue
from referee.report.store import load_run
from referee.report.viewer import start_viewer

RUN = "20261129-120000-abc123"


@pytest.fixture()
def run(tmp_path) -> Path:
    return _store(tmp_path / "runs", sample_report())


def _post(handle, path: str, body: bytes, headers: dict[str, str]):
    port = handle.server.server_address[1]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", path, body=body, headers={
            "Host": f"127.0.0.1:{port}", "Content-Type": "application/json", **headers})
        resp = conn.getresponse()
        return resp.status, resp.read().decode("utf-8")
    finally:
        conn.close()


def _first_item(run: Path) -> tuple[str, str]:
    first = review_queue(load_run(run))[0]
    return first.case_id, first.criterion


def test_label_with_the_keyboard_reload_and_export(run, tmp_path, capsys) -> None:
    cases_before = (run / "cases.jsonl").read_bytes()
    queue = review_queue(load_run(run))
    with start_viewer(None, run.parent, labeller="ana") as handle, Browser(tmp_path) as page:
        page.goto(f"{handle.base_url}/run/{RUN}")
        # The run's page links to its labelling page.
        href = page.evaluate("document.querySelector('a[href$=\"/label\"]').getAttribute('href')")
        page.goto(handle.base_url + href)
        assert page.evaluate("document.querySelectorAll('section.item').length") == len(queue)
        # The sample run's hostile names and outputs are shown as text, never run.
        assert "pwned" not in page.evaluate("document.title")
        assert page.evaluate("document.body.getAttribute('data-pwned')") is None
        assert page.evaluate("document.getElementById('injected')") is None
        order = page.evaluate("Array.from(document.querySelectorAll('section.item'))"
                              ".map(s => s.dataset.case + '|' + s.dataset.criterion)")
        assert order == [f"{i.case_id}|{i.criterion}" for i in queue]
        page.press("y")  # the first verdict is right; the page moves on to the next
        page.wait_for("document.querySelector('#item-0').dataset.label === 'right/-'")
        assert page.evaluate("document.body.dataset.current") == "1"
        page.press("n")  # the second is wrong
        page.wait_for("document.querySelector('#item-1').dataset.label === 'wrong/-'")
        page.press("k")  # back to the second: a person's own verdict and a comment
        page.press("c")
        page.type_text("the context says 30 days")
        page.press("Enter", ctrl=True)
        page.wait_for("document.querySelector('#item-1 .label-text').textContent"
                      ".includes('the context says 30 days')")
        page.press("f")
        page.wait_for("document.querySelector('#item-1').dataset.label === 'wrong/fail'")
        page.reload()
        # The labels were kept: the page shows them and opens at the first unlabelled result.
        assert page.evaluate("document.querySelector('#item-0').dataset.label") == "right/-"
        assert page.evaluate("document.querySelector('#item-1 .label-text').textContent") == (
            "judge wrong; person says fail; comment: the context says 30 days (ana)")
        assert page.evaluate("document.querySelector('#item-1 textarea').value") == (
            "the context says 30 days")
        assert page.evaluate("document.body.dataset.current") == "2"
        assert "2 of" in page.evaluate("document.getElementById('labelled-count').textContent")
    # Append-only beside the run; the run's own records are untouched.
    assert (run / "cases.jsonl").read_bytes() == cases_before
    lines = [json.loads(line) for line in (run / LABELS_FILE).read_text().splitlines()]
    assert len(lines) == 4 and {line["labeller"] for line in lines} == {"ana"}
    latest = LabelStore(run).latest()
    first, second = queue[0], queue[1]
    assert latest[(first.case_id, first.criterion)].human_passed is first.passed
    assert latest[(second.case_id, second.criterion)].human_passed is False
    # Exported as the labels file calibrate reads.
    out = tmp_path / "labels.jsonl"
    assert main(["labels", "export", str(run), "-o", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2
    exported = {r["metadata"]["case_id"] + "|" + r["metadata"]["criterion"]: r for r in rows}
    row = exported[f"{second.case_id}|{second.criterion}"]
    assert row["label"] == "fail" and row["metadata"]["comment"] == "the context says 30 days"
    case = next(c for c in load_run(run).cases if c.eval_id == second.case_id)
    assert row["input"] == case.case.input and row["output"] == case.execution.actual_response
    from referee.calibrate import load_labels

    assert len(load_labels(out)) == 2
    assert "2 labelled row(s)" in capsys.readouterr().err


@pytest.mark.parametrize("case", ["no token", "wrong token", "foreign origin", "cross-site"])
def test_a_write_without_the_token_or_from_another_origin_stores_nothing(run, case) -> None:
    case_id, criterion = _first_item(run)
    body = json.dumps({"case_id": case_id, "criterion": criterion, "verdict": "right"}).encode()
    with start_viewer(None, run.parent) as handle:
        token = handle.server.RequestHandlerClass.token
        headers = {"no token": {},
                   "wrong token": {"X-Referee-Token": token[:-1] + ("A" if token[-1] != "A" else "B")},
                   "foreign origin": {"X-Referee-Token": token, "Origin": "http://evil.example"},
                   "cross-site": {"X-Referee-Token": token, "Sec-Fetch-Site": "cross-site"}}[case]
        status, _ = _post(handle, f"/run/{RUN}/labels", body, headers)
        assert status == 403
        assert not (run / LABELS_FILE).exists()
        # The same request with the token, from the viewer's own origin, is stored.
        port = handle.server.server_address[1]
        status, answer = _post(handle, f"/run/{RUN}/labels", body,
                               {"X-Referee-Token": token, "Origin": f"http://127.0.0.1:{port}"})
        assert status == 200, answer
        assert len(LabelStore(run).all()) == 1


def test_a_foreign_page_in_chromium_cannot_store_a_label(run, tmp_path) -> None:
    """A page served from another origin posts to the viewer as a CSRF attack would."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    case_id, criterion = _first_item(run)
    with start_viewer(None, run.parent) as handle:
        target = f"{handle.base_url}/run/{RUN}/labels"
        attack = ("<!DOCTYPE html><body data-js='on'><script>fetch(%s, {method: 'POST', "
                  "mode: 'no-cors', headers: {'Content-Type': 'text/plain'}, body: %s})"
                  ".then(() => document.title = 'sent', () => document.title = 'sent');"
                  "</script></body>") % (json.dumps(target), json.dumps(json.dumps(
                      {"case_id": case_id, "criterion": criterion, "verdict": "wrong"})))

        class Attacker(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                data = attack.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        evil = ThreadingHTTPServer(("127.0.0.1", 0), Attacker)
        thread = threading.Thread(target=evil.serve_forever, daemon=True)
        thread.start()
        try:
            with Browser(tmp_path) as page:
                page.goto(f"http://127.0.0.1:{evil.server_address[1]}/")
                page.wait_for("document.title === 'sent'")
        finally:
            evil.shutdown()
            evil.server_close()
    assert not (run / LABELS_FILE).exists()


def test_bad_labels_are_refused_with_a_reason(run) -> None:
    case_id, criterion = _first_item(run)
    with start_viewer(None, run.parent) as handle:
        token = {"X-Referee-Token": handle.server.RequestHandlerClass.token}
        for body, words in [
            (b"not json", "not JSON"),
            (json.dumps({"case_id": "nope", "criterion": criterion}).encode(), "no case 'nope'"),
            (json.dumps({"case_id": case_id, "criterion": "nope"}).encode(), "no judged criterion"),
            (json.dumps({"case_id": case_id, "criterion": criterion, "verdict": "maybe"}).encode(),
             "verdict"),
            (json.dumps({"case_id": case_id, "criterion": criterion, "extra": 1}).encode(),
             "unknown field 'extra'"),
        ]:
            status, answer = _post(handle, f"/run/{RUN}/labels", body, token)
            assert status == 400 and words in json.loads(answer)["error"], answer
        status, _ = _post(handle, "/run/nope/labels", b"{}", token)
        assert status == 404
    assert not (run / LABELS_FILE).exists()
