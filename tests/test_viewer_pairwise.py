"""The viewer's compare page judges two stored runs pairwise: asked for from the page in
headless Chromium, run in the background through the real SDK against the scripted judge
server, stored beside run B and shown again on reload without a judge request; the write is
guarded like the labelling writes."""

from __future__ import annotations

import html
import http.client
import json
import re
import threading
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from chromium_cdp import Browser
from test_pairwise import shown
from test_pairwise_cli import CASES, panel_judge, wrong
from test_pairwise_models import checking_judge, right
from test_report_samples import PAYLOAD

from referee import EvalSuite, configure
from referee.judge.panel import JudgePanel
from referee.pairwise._store import COMPARISONS_DIR
from referee.report.viewer import start_viewer
from referee.testing import Fault, ScriptedJudgeServer

pytestmark = pytest.mark.usefixtures("isolated_judge")


@pytest.fixture
def server():
    with ScriptedJudgeServer(reply=checking_judge) as srv:
        configure(srv.judge_config())  # the judge the form offers by default
        yield srv


def stored_run(runs: Path, name: str, model) -> Path:
    before = set(runs.iterdir()) if runs.is_dir() else set()
    EvalSuite(name).add_cases(CASES).run(model, verbose=False, runs_dir=runs)
    [run_dir] = set(runs.iterdir()) - before
    return run_dir


@pytest.fixture
def runs(tmp_path) -> tuple[Path, Path]:
    base = tmp_path / "runs"
    return stored_run(base, "wrong", wrong), stored_run(base, "right", right)


def compare_url(handle, a: Path, b: Path) -> str:
    return f"{handle.base_url}/compare?a={quote(a.name)}&b={quote(b.name)}"


def request(handle, method: str, path: str, body: dict | None = None,
            headers: dict[str, str] | None = None) -> tuple[int, str]:
    port = handle.server.server_address[1]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=json.dumps(body).encode() if body is not None else None,
                     headers={"Host": f"127.0.0.1:{port}", "Content-Type": "application/json",
                              **(headers or {})})
        resp = conn.getresponse()
        return resp.status, resp.read().decode("utf-8")
    finally:
        conn.close()


def settle(page: Browser, expression: str, timeout: float = 60.0):
    """Wait for ``expression`` across the navigation the page makes when the judging ends."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = page.evaluate(expression)
        except RuntimeError:  # the page was navigating
            value = None
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {expression}"
        time.sleep(0.1)


def card(page: Browser, name: str) -> str:
    return page.evaluate(f"document.querySelector('#pairwise #{name} b').textContent")


def test_judge_two_runs_from_the_compare_page_and_reopen_it_without_asking(runs, tmp_path,
                                                                            server):
    a, b = runs
    with start_viewer(None, a.parent) as handle, Browser(tmp_path) as page:
        page.goto(compare_url(handle, a, b))
        assert page.evaluate("document.getElementById('not-judged') !== null")
        # The regressions are still there; the form offers the configured judge, both orders.
        assert page.evaluate("document.querySelector('table.changes') !== null")
        cfg = server.judge_config()
        assert page.evaluate("document.querySelector('#judge-form input[name=judge]').value") == (
            f"{cfg.provider}/{cfg.model}")
        assert page.evaluate("document.querySelector('#judge-form [name=both_orders]').checked")
        page.evaluate("document.querySelector('#judge-form [name=criterion]').value = "
                      "'The sum is correct.'")
        page.evaluate("document.querySelector('#judge-form button').click()")
        settle(page, "document.querySelector('#pairwise') !== null")

        # 6 cases: two identical outputs are ties without asking, 4 pairs x 2 orders asked.
        assert server.request_count == 8
        assert (card(page, "wins"), card(page, "ties"), card(page, "losses")) == ("4", "2", "0")
        assert card(page, "inconsistent") == "0" and card(page, "win-rate") == "100%"
        summary = page.evaluate("document.getElementById('summary').textContent")
        assert "Wilson CI" in summary and "sign test p = 0.125" in summary
        assert "Bradley-Terry" in page.evaluate(
            "document.getElementById('bradley-terry').textContent")
        assert page.evaluate("document.getElementById('criterion').textContent") == (
            "Criterion:\nThe sum is correct.")
        pairs = page.evaluate("Array.from(document.querySelectorAll('#pairwise .pair'))"
                              ".map(p => [p.dataset.outcome, p.querySelector('.output-a')"
                              ".textContent, p.querySelector('.output-b').textContent,"
                              " p.querySelector('.reason').textContent])")
        # In the runs' case order (not the order the judge finished them), side by side.
        assert [p[:3] for p in pairs] == [["tie", "0", "0"], ["b", "3", "2"], ["b", "5", "4"],
                                          ["tie", "6", "6"], ["b", "9", "8"], ["b", "11", "10"]]
        assert pairs[1][3] == "2 is the correct sum" and pairs[0][3] == "identical outputs"
        # The form now holds the shown comparison's settings.
        assert page.evaluate("document.querySelector('#judge-form [name=criterion]').value") == (
            "The sum is correct.")

        page.reload()
        assert card(page, "wins") == "4" and len(page.evaluate(
            "Array.from(document.querySelectorAll('#pairwise .pair'))")) == 6
        assert server.request_count == 8  # shown from the stored comparison, nothing asked
    [stored] = (b / COMPARISONS_DIR).iterdir()
    assert len(stored.read_text().splitlines()) == 7  # its description and 6 pairs


def test_a_judge_panel_from_the_form_is_shown_with_its_members_and_reopened_as_such(
        runs, tmp_path, server):
    a, b = runs
    server.set_reply(panel_judge)
    panel = "openai/good-1, openai/good-2, openai/biased"
    with start_viewer(None, a.parent) as handle, Browser(tmp_path) as page:
        page.goto(compare_url(handle, a, b))
        page.evaluate(f"document.querySelector('#judge-form [name=judge]').value = '{panel}'")
        page.evaluate("document.querySelector('#judge-form button').click()")
        settle(page, "document.querySelector('#pairwise #judges') !== null")
        assert server.request_count == 4 * 2 * 3  # each member, each differing pair, both orders
        assert (card(page, "wins"), card(page, "ties"), card(page, "losses")) == ("4", "2", "0")
        judges_text = "Array.from(document.querySelectorAll('#judges li')).map(l => l.textContent)"
        members = page.evaluate(judges_text)
        assert [m.split(": ")[0] for m in members] == [
            "openai/good-1", "openai/good-2", "openai/biased"]
        assert "openai/biased: B won 0, tied 4, lost 0" in members[2]
        meta = page.evaluate("document.querySelector('#pairwise .meta').textContent")
        assert "judge panel of 3 (majority, quorum 2)" in meta
        assert "openai/good-2: A shown first" in page.evaluate(
            "document.querySelector('#pair-1').textContent")
        # The form holds the panel; reopened, the page shows the same members asking nothing.
        assert page.evaluate("document.querySelector('#judge-form [name=judge]').value") == panel
        page.reload()
        assert page.evaluate(judges_text) == members
        assert server.request_count == 24


def test_a_configured_panel_is_the_forms_default_and_keeps_its_own_rules(runs, server):
    a, b = runs
    server.set_reply(panel_judge)
    configure(JudgePanel(members=[server.judge_config(model=m) for m in ("good-1", "biased")],
                         quorum=1))
    with start_viewer(None, a.parent) as handle:
        page = request(handle, "GET", f"/compare?a={quote(a.name)}&b={quote(b.name)}")[1]
        offered = html.unescape(re.search(r'<input name="judge" size="40" value="([^"]*)"',
                                          page).group(1))
        assert offered == "openai/good-1, openai/biased"
        token = handle.server.RequestHandlerClass.token
        status, answer = request(handle, "POST", "/compare/judge",
                                 {"a": a.name, "b": b.name, "criterion": "The sum is correct.",
                                  "judge": offered}, {"X-Referee-Token": token})
        assert status == 202, answer
        job = json.loads(answer)["job"]
        deadline = time.monotonic() + 30
        while (state := json.loads(request(handle, "GET", f"/compare/status?job={job}")[1])
               )["state"] == "running":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert state["state"] == "done", state
        assert server.request_count == 4 * 2 * 2
        result = html.unescape(request(handle, "GET", state["href"])[1])
        assert "judge panel of 2 (majority, quorum 1): openai/good-1, openai/biased" in result
    [stored] = (b / COMPARISONS_DIR).iterdir()
    assert json.loads(stored.read_text().splitlines()[0])["panel"]["quorum"] == 1


def test_a_failed_pair_does_not_stop_the_rest_and_asking_again_retries_only_it(
        runs, tmp_path, server):
    a, b = runs
    server.set_reply(lambda r: Fault.http(400) if shown(r.prompt, "USER INPUT") == "What is 1 + 1?"
                     else checking_judge(r))
    with start_viewer(None, a.parent) as handle, Browser(tmp_path) as page:
        page.goto(compare_url(handle, a, b))
        page.evaluate("document.querySelector('#judge-form button').click()")
        settle(page, "document.querySelector('#pairwise') !== null")
        assert card(page, "wins") == "3" and card(page, "judge-errors") == "1"
        note = page.evaluate("document.querySelector('[data-note=judge-error]').textContent")
        assert "1 pair(s) got no verdict from the judge (JUDGE_ERROR)" in note
        assert "What is 1 + 1?" in note and "ask again" in note
        failed = page.evaluate("document.querySelector('.pair[data-outcome=judge_error] .reason')"
                               ".textContent")
        assert failed.startswith("JUDGE_ERROR")

        # The judge recovers; the same settings again ask only the failed pair.
        server.set_reply(checking_judge)
        asked = server.request_count
        page.evaluate("document.querySelector('#judge-form button').click()")
        settle(page, "document.querySelector('#pairwise #judge-errors b')"
                     ".textContent === '0'")
        assert server.request_count == asked + 2
        assert card(page, "wins") == "4"
        assert page.evaluate("document.querySelector('[data-note=judge-error]')") is None


def test_a_judging_that_cannot_run_says_why_on_the_page(runs, tmp_path, server):
    a, b = runs
    with start_viewer(None, a.parent) as handle, Browser(tmp_path) as page:
        page.goto(compare_url(handle, a, b))
        page.evaluate("document.querySelector('#judge-form [name=judge]').value = 'gpt-4o-mini'")
        page.evaluate("document.querySelector('#judge-form button').click()")
        settle(page, "document.getElementById('judge-status').dataset.state === 'failed'")
        assert "expected PROVIDER/MODEL" in page.evaluate(
            "document.getElementById('judge-status').textContent")
        page.evaluate("document.querySelector('#judge-form [name=judge]').value = "
                      "'nosuch/model-x'")
        page.evaluate("document.querySelector('#judge-form button').click()")
        settle(page, "document.getElementById('judge-status').textContent.includes('nosuch')")
        assert "unknown provider 'nosuch' (expected one of" in page.evaluate(
            "document.getElementById('judge-status').textContent")
        # A judging that fails once started (here nothing can be written beside run B) ends
        # the job with its reason on the page, not the viewer.
        (b / COMPARISONS_DIR).write_text("in the way")
        page.evaluate("document.querySelector('#judge-form [name=judge]').value = "
                      f"'{server.judge_config().provider}/{server.judge_config().model}'")
        page.evaluate("document.querySelector('#judge-form button').click()")
        settle(page, "document.getElementById('judge-status').textContent"
                     ".includes('comparisons')")
        message = page.evaluate("document.getElementById('judge-status').textContent")
        assert message.startswith("The judged comparison failed: ") and "Errno" in message
        assert page.evaluate("document.getElementById('judge-status').dataset.state") == "failed"
        assert server.request_count == 0
        # Reopened, the page still says why the last judging of these runs failed.
        page.reload()
        assert page.evaluate("document.getElementById('judge-status').textContent") == message
        assert request(handle, "GET", "/")[0] == 200


def test_the_viewer_answers_while_a_judging_runs(runs, server, monkeypatch):
    a, b = runs
    # A loopback judge's adaptive window starts at 2 requests, which the held pair could fill.
    monkeypatch.setenv("REFEREE_JUDGE_CONCURRENCY", "16")
    release = threading.Event()

    def slow_for_one_case(r):
        if shown(r.prompt, "USER INPUT") == "What is 5 + 5?":
            release.wait(30)
        return checking_judge(r)

    server.set_reply(slow_for_one_case)
    with start_viewer(None, a.parent) as handle:
        token = handle.server.RequestHandlerClass.token
        status, answer = request(handle, "POST", "/compare/judge",
                                 {"a": a.name, "b": b.name, "criterion": "The sum is correct."},
                                 {"X-Referee-Token": token})
        assert status == 202, answer
        job = json.loads(answer)["job"]
        deadline = time.monotonic() + 30
        while json.loads(request(handle, "GET", f"/compare/status?job={job}")[1])["done"] < 5:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        # The judge holds the last pair: the job runs, and every page still answers.
        started = time.monotonic()
        assert request(handle, "GET", "/")[0] == 200
        assert request(handle, "GET", f"/run/{quote(a.name)}")[0] == 200
        page = request(handle, "GET", f"/compare?a={quote(a.name)}&b={quote(b.name)}")[1]
        assert time.monotonic() - started < 5
        assert re.search(r'data-job="[^"]+"', page)  # a reopened page resumes the poll
        state = json.loads(request(handle, "GET", f"/compare/status?job={job}")[1])
        assert (state["state"], state["done"], state["total"]) == ("running", 5, 6)
        # A second judging of the same runs is refused while the first runs.
        status, answer = request(handle, "POST", "/compare/judge",
                                 {"a": a.name, "b": b.name, "criterion": "Other."},
                                 {"X-Referee-Token": token})
        assert status == 400 and "being judged already" in json.loads(answer)["error"]
        release.set()
        while (state := json.loads(request(handle, "GET", f"/compare/status?job={job}")[1])
               )["state"] == "running":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert state["state"] == "done" and state["done"] == 6
        assert f"c={state['result']}" in state["href"]
        assert request(handle, "GET", "/compare/status?job=nosuch")[0] == 404


@pytest.mark.parametrize("case", ["no token", "wrong token", "foreign origin", "cross-site",
                                  "foreign host"])
def test_a_judging_request_without_the_token_or_from_elsewhere_asks_nothing(runs, server, case):
    a, b = runs
    body = {"a": a.name, "b": b.name, "criterion": "The sum is correct."}
    with start_viewer(None, a.parent) as handle:
        token = handle.server.RequestHandlerClass.token
        port = handle.server.server_address[1]
        headers = {"no token": {},
                   "wrong token": {"X-Referee-Token": token[:-1] + ("A" if token[-1] != "A"
                                                                     else "B")},
                   "foreign origin": {"X-Referee-Token": token, "Origin": "http://evil.example"},
                   "cross-site": {"X-Referee-Token": token, "Sec-Fetch-Site": "cross-site"},
                   "foreign host": {"X-Referee-Token": token, "Host": f"evil.example:{port}"},
                   }[case]
        status, _ = request(handle, "POST", "/compare/judge", body, headers)
        assert status == 403
        time.sleep(0.3)
        assert server.request_count == 0 and not (b / COMPARISONS_DIR).exists()
        # The same request with the token, from the viewer's own origin, starts the judging.
        status, answer = request(handle, "POST", "/compare/judge", body,
                                 {"X-Referee-Token": token,
                                  "Origin": f"http://127.0.0.1:{port}"})
        assert status == 202, answer
        job = json.loads(answer)["job"]
        deadline = time.monotonic() + 30
        while json.loads(request(handle, "GET", f"/compare/status?job={job}")[1])[
                "state"] == "running":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert server.request_count == 8


def test_hostile_outputs_are_shown_as_text_on_the_judged_page(tmp_path, server):
    base = tmp_path / "runs"
    a = stored_run(base, "wrong", wrong)
    b = stored_run(base, "hostile", lambda q: right(q) + PAYLOAD)
    with start_viewer(None, base) as handle, Browser(tmp_path) as page:
        page.goto(compare_url(handle, a, b))
        page.evaluate("document.querySelector('#judge-form button').click()")
        settle(page, "document.querySelector('#pairwise') !== null")
        assert page.evaluate("document.body.getAttribute('data-pwned')") is None
        assert page.evaluate("document.getElementById('injected')") is None
        assert "pwned" not in page.evaluate("document.title")
        assert "onerror" in page.evaluate(
            "document.querySelector('#pair-1 .output-b').textContent")
