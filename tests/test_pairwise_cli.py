"""`referee compare A B --judge ...`: two stored runs judged pairwise through the real SDK."""

from __future__ import annotations

import html
import json
import re
import sys
from pathlib import Path

import pytest
from test_pairwise import shown
from test_pairwise_models import HANGING, checking_judge, killed_while_judging, number, right
from test_report_samples import PAYLOAD, chromium_dom

from referee import EvalCase, EvalSuite
from referee.cli import main
from referee.judge.panel import JudgePanel
from referee.pairwise import PairwiseComparison, stored_comparisons
from referee.pairwise._html import render_pairwise_html
from referee.pairwise._store import COMPARISONS_DIR
from referee.testing import Fault

CASES = [EvalCase(input=f"What is {i} + {i}?", eval_id=f"sum-{i}") for i in range(6)]


def wrong(question: str) -> str:
    n = number(question)
    return f"{2 * n + 1}" if n % 3 else f"{2 * n}"  # every third case: the same answer


@pytest.fixture
def server(openai_judge_server):
    return openai_judge_server(checking_judge)


def stored_run(tmp_path: Path, name: str, model) -> Path:
    suite = EvalSuite(name).add_cases(CASES)
    runs = tmp_path / name
    suite.run(model, verbose=False, runs_dir=runs)
    [run_dir] = [p for p in runs.iterdir() if p.is_dir()]
    return run_dir


def compare(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["compare", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_compare_with_a_judge_counts_wins_ties_and_losses(tmp_path, capsys, server):
    a, b = stored_run(tmp_path, "wrong", wrong), stored_run(tmp_path, "right", right)
    saved = tmp_path / "pairwise.json"

    code, out, err = compare(capsys, str(a), str(b), "--judge", "openai/gpt-4o-mini",
                             "--criterion", "The sum is correct.", "--save", str(saved))
    assert code == 0, err
    # Cases 0 and 3 have identical outputs (a tie without asking); 4 pairs x 2 orders.
    assert server.request_count == 8
    assert {r.model for r in server.requests} == {"gpt-4o-mini"}
    assert "B won 4, tied 2, lost 0 of 6 judged pair(s)" in out
    assert "Wilson CI" in out and "sign test p = 0.125" in out
    assert "[B] What is 1 + 1? (sum-1)" in out
    assert "[=] What is 0 + 0? (sum-0): identical outputs" in out

    data = json.loads(saved.read_text())
    assert data["summary"]["wins"] == 4 and data["summary"]["sign_test_p"] == pytest.approx(0.125)
    assert data["criterion"] == "The sum is correct."
    by_id = {p["eval_id"]: p for p in data["pairs"]}
    assert by_id["sum-2"]["status"] == "b" and by_id["sum-2"]["verdict"]["position_consistent"]
    assert by_id["sum-2"]["reason"] == "4 is the correct sum"

    # The other way round B loses; --json carries the regressions and the pairwise section.
    code, out, _ = compare(capsys, str(b), str(a), "--judge", "openai/gpt-4o-mini", "--json")
    assert json.loads(out)["pairwise"]["summary"]["losses"] == 4


def test_a_repeated_comparison_is_taken_from_the_stored_pairs_or_the_reply_cache(
        tmp_path, capsys, server, monkeypatch):
    monkeypatch.setenv("REFEREE_CACHE", "1")
    monkeypatch.setenv("REFEREE_CACHE_DIR", str(tmp_path / "cache"))
    a, b = stored_run(tmp_path, "wrong", wrong), stored_run(tmp_path, "right", right)
    argv = (str(a), str(b), "--judge", "openai/gpt-4o-mini", "--criterion", "Correct sum.")
    first = compare(capsys, *argv)[1]
    assert server.request_count == 8
    [stored] = (b / COMPARISONS_DIR).iterdir()
    assert f"stored in {stored}" in first
    again = compare(capsys, *argv)[1]
    assert server.request_count == 8  # every pair came from the stored comparison
    assert "B won 4, tied 2, lost 0" in again and "8 request(s)" in first
    assert "0 request(s)" in again and "6 pair(s) taken from the stored comparison" in again
    # Without the stored comparison, every ordered pair is replayed from the reply cache.
    stored.unlink()
    third = compare(capsys, *argv)[1]
    assert server.request_count == 8
    assert "B won 4, tied 2, lost 0" in third and "8 repl(ies) from the reply cache" in third


def test_an_interrupted_comparison_resumes_without_asking_finished_pairs_again(
        tmp_path, capsys, server):
    """Killed half-way (SIGKILL, the reply cache off): the rerun asks only the unfinished pairs."""
    a, b = stored_run(tmp_path, "wrong", wrong), stored_run(tmp_path, "right", right)
    argv = [str(a), str(b), "--judge", "openai/gpt-4o-mini", "--criterion", "Correct sum."]

    def judged_all_but_two() -> bool:
        files = list((b / COMPARISONS_DIR).glob("*.jsonl"))
        # The description, two identical pairs (ties without asking) and 2 of the 4 asked.
        return bool(files) and len(files[0].read_text().splitlines()) == 5 and (
            server.request_count == 8)

    killed_while_judging(server, [sys.executable, "-m", "referee", "compare", *argv],
                         judged_all_but_two)
    asked_before = server.request_count
    code, out, err = compare(capsys, *argv)
    assert code == 0, err
    resumed = server.requests[asked_before:]
    assert len(resumed) == 4  # the two hanging pairs, both orders; the others were not asked
    assert {number(shown(r.prompt, "USER INPUT")) for r in resumed} == HANGING
    assert "B won 4, tied 2, lost 0 of 6" in out
    assert "4 pair(s) taken from the stored comparison" in out


def test_a_question_set_from_the_command_line(tmp_path, capsys, server):
    a, b = stored_run(tmp_path, "wrong", wrong), stored_run(tmp_path, "right", right)
    code, out, err = compare(capsys, str(a), str(b), "--judge", "openai/gpt-4o-mini",
                             "--question", "Is the sum correct?", "--question",
                             "Is it a number?")
    assert code == 0, err
    assert server.request_count == 4 * 2 * 2  # 4 differing pairs x 2 questions x 2 orders
    assert "B won 4, tied 2, lost 0" in out and "- Is it a number?" in out


def test_a_position_biased_judge_yields_ties_not_wins(tmp_path, capsys, server):
    a, b = stored_run(tmp_path, "wrong", wrong), stored_run(tmp_path, "right", right)
    server.set_reply(json.dumps({"reason": "the first is better", "winner": "1"}))
    code, out, _ = compare(capsys, str(a), str(b), "--judge", "openai/gpt-4o-mini")
    assert code == 0
    assert "B won 0, tied 6, lost 0" in out
    assert "4 position-inconsistent" in out and "No decisive pair" in out


def test_a_judge_that_cannot_answer_is_judge_error_and_exit_3(tmp_path, capsys, server):
    a, b = stored_run(tmp_path, "wrong", wrong), stored_run(tmp_path, "right", right)
    server.set_reply(Fault.http(400))
    code, out, _ = compare(capsys, str(a), str(b), "--judge", "openai/gpt-4o-mini")
    assert code == 3
    assert "4 JUDGE_ERROR" in out and "(sum-1): JUDGE_ERROR" in out


@pytest.mark.parametrize("argv,message", [
    (["--judge", "gpt-4o-mini"], "is not PROVIDER/MODEL"),
    (["--criterion", "x"], "need --judge"),
    (["--judge", "openai/gpt-4o-mini", "--criterion", "x", "--question", "y?"], "not both"),
    (["--judge", "openai/gpt-4o-mini", "--criterion", " "], "non-empty criterion"),
])
def test_bad_pairwise_arguments_are_one_line_errors(tmp_path, capsys, server, argv, message):
    a = stored_run(tmp_path, "wrong", wrong)
    code, _, err = compare(capsys, str(a), str(a), *argv)
    assert code == 2 and message in err


def test_the_html_shows_the_pairs_side_by_side_in_chromium(tmp_path, capsys, server):
    a = stored_run(tmp_path, "wrong", wrong)
    b = stored_run(tmp_path, "hostile", lambda q: right(q) + PAYLOAD)
    page = tmp_path / "pairwise.html"
    code, _, err = compare(capsys, str(a), str(b), "--judge", "openai/gpt-4o-mini",
                           "--html", str(page))
    assert code == 0, err
    assert json.loads(page.with_suffix(".json").read_text())["summary"]["judge_errors"] == 0

    dom = chromium_dom(page.as_uri(), tmp_path)
    # The model's output is shown as text: no payload ran or broke out of its block.
    assert not re.search(r"<body[^>]*data-pwned", dom) and '<b id="injected">' not in dom
    assert "pwned" not in re.search(r"<title>([^<]*)</title>", dom).group(1)
    pairs = re.findall(r'<div class="pair" id="pair-\d+" data-outcome="(\w+)">', dom)
    assert len(pairs) == 6
    first = dom[dom.index('id="pair-1"'):dom.index('id="pair-2"')]
    assert '<pre class="output-a">3</pre>' in first
    assert "onerror" in html.unescape(re.search(r'<pre class="output-b">(.*?)</pre>', first,
                                                re.DOTALL).group(1))
    assert "judge preferred" in first and "B shown first" in first
    assert re.search(r'id="wins"><b>\d+</b>', dom)
    assert "0 regression(s)" in dom


def panel_judge(request) -> str | Fault:
    """By model name: good-* prefer the correct sum; biased prefers whatever is shown first;
    contrarian prefers the wrong sum; down is unreachable."""
    if request.model == "down":
        return Fault.http(400)
    if request.model == "biased":
        return json.dumps({"reason": "the first is better", "winner": "1"})
    reply = json.loads(checking_judge(request))
    if request.model == "contrarian":
        reply = {"reason": "the wrong sum reads better",
                 "winner": "2" if reply["winner"] == "1" else "1"}
    return json.dumps(reply)


def judges(*names: str) -> list[str]:
    return [arg for name in names for arg in ("--judge", f"openai/{name}")]


def test_compare_with_a_panel_takes_the_members_majority(tmp_path, capsys, server):
    server.set_reply(panel_judge)
    a, b = stored_run(tmp_path, "wrong", wrong), stored_run(tmp_path, "right", right)
    page = tmp_path / "pairwise.html"
    code, out, err = compare(capsys, str(a), str(b), *judges("good-1", "good-2", "biased"),
                             "--html", str(page))
    assert code == 0, err
    # Each member judged each of the 4 differing pairs in both orders.
    assert server.request_count == 4 * 2 * 3
    assert {m: sum(1 for r in server.requests if r.model == m)
            for m in ("good-1", "good-2", "biased")} == {"good-1": 8, "good-2": 8, "biased": 8}
    # Two of three prefer B; the biased member's flips are its own ties, outvoted.
    assert "B won 4, tied 2, lost 0 of 6 judged pair(s)" in out
    assert "judge panel of 3 (majority, quorum 2): openai/good-1, openai/good-2, openai/biased" \
        in out
    assert ("openai/good-1: B won 4, tied 0, lost 0; agrees with the panel on 4 of 4; "
            "8 request(s)") in out
    assert ("openai/biased: B won 0, tied 4, lost 0; agrees with the panel on 0 of 4; "
            "4 position-inconsistent; 8 request(s)") in out
    assert "[B] What is 1 + 1? (sum-1): panel: B (votes of all 3 judges: B 2, A 0, tie 1)" in out

    data = json.loads(page.with_suffix(".json").read_text())
    assert data["judge_provider"] == "panel"
    assert [j["judge"] for j in data["judges"]] == ["openai/good-1", "openai/good-2",
                                                    "openai/biased"]
    assert data["judge_agreement"] == pytest.approx(-0.5)  # 2 vs 1 on every pair
    pair = next(p for p in data["pairs"] if p["eval_id"] == "sum-1")
    assert [j["preferred"] for j in pair["verdict"]["judges"]] == ["b", "b", "tie"]
    assert pair["verdict"]["position_consistent"] is False  # the biased member flipped
    assert data["token_usage"]["requests"] == 24

    dom = chromium_dom(page.as_uri(), tmp_path)
    assert "judge panel of 3 (majority, quorum 2)" in html.unescape(dom)
    listed = re.search(r'<ul id="judges">(.*?)</ul>', dom, re.S).group(1)
    assert listed.count("<li>") == 3 and "openai/biased: B won 0, tied 4" in listed
    first = dom[dom.index('id="pair-1"'):dom.index('id="pair-2"')]
    assert "openai/good-2: A shown first: judge preferred B" in first


def test_compare_with_a_split_panel_is_a_tie_and_below_quorum_a_judge_error(
        tmp_path, capsys, server):
    server.set_reply(panel_judge)
    a, b = stored_run(tmp_path, "wrong", wrong), stored_run(tmp_path, "right", right)
    code, out, err = compare(capsys, str(a), str(b), *judges("good-1", "contrarian"))
    assert code == 0, err
    assert "B won 0, tied 6, lost 0" in out  # one vote each way on every pair: ties
    assert "panel: a tie (votes of both judges: B 1, A 1, tie 0)" in out

    # One member down of three: the two others still judge; two down: below the quorum.
    code, out, _ = compare(capsys, str(a), str(b), *judges("good-1", "good-2", "down"))
    assert code == 0 and "B won 4, tied 2, lost 0" in out
    assert "openai/down: B won 0, tied 0, lost 0; agrees with the panel on 0 of 0; no verdict " \
           "on 4" in out
    code, out, _ = compare(capsys, str(a), str(b), *judges("good-1", "down", "down"),
                           "--judge-quorum", "2")
    assert code == 3
    assert "4 JUDGE_ERROR" in out and "below its quorum — 1 of 3 judge(s) answered" in out


def _verdicts_of(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "token_usage"} for r in records]


def test_a_panel_comparison_resumes_from_its_stored_pairs_with_each_members_verdicts(
        tmp_path, capsys, server):
    """The stored pairs keep every member's verdict: resumed or reopened, a panel comparison
    has the same member records, kappa and page, and a finished one asks nothing again."""
    server.set_reply(panel_judge)
    a, b = stored_run(tmp_path, "wrong", wrong), stored_run(tmp_path, "right", right)
    page = tmp_path / "pairwise.html"
    argv = (str(a), str(b), *judges("good-1", "good-2", "biased"), "--judge-quorum", "2")
    code, out, err = compare(capsys, *argv, "--html", str(page))
    assert code == 0, err
    assert server.request_count == 24
    first = json.loads(page.with_suffix(".json").read_text())
    [stored] = (b / COMPARISONS_DIR).iterdir()

    # Interrupted after four pairs: the last two stored lines never written.
    lines = stored.read_text().splitlines(keepends=True)
    lost = [json.loads(line) for line in lines[-2:]]
    stored.write_text("".join(lines[:-2]))
    code, out, err = compare(capsys, *argv, "--json")
    assert code == 0, err
    asked = sum(p["verdict"]["token_usage"]["requests"] for p in lost)
    assert asked and server.request_count == 24 + asked  # only the two lost pairs, each member
    resumed = json.loads(out)["pairwise"]
    assert _verdicts_of(resumed["judges"]) == _verdicts_of(first["judges"])
    assert resumed["judge_agreement"] == pytest.approx(first["judge_agreement"])
    assert [[m["preferred"] for m in (p["verdict"] or {}).get("judges", [])]
            for p in resumed["pairs"]] == [[m["preferred"] for m in (p["verdict"] or {}).get(
                "judges", [])] for p in first["pairs"]]

    # Finished: run again, nothing is asked; each member's spend is this run's (none).
    before = server.request_count
    code, out, err = compare(capsys, *argv)
    assert code == 0, err
    assert server.request_count == before
    assert "6 pair(s) taken from the stored comparison" in out
    assert "judge panel of 3 (majority, quorum 2)" in out
    assert ("openai/biased: B won 0, tied 4, lost 0; agrees with the panel on 0 of 4; "
            "4 position-inconsistent; 0 request(s)") in out

    # Reopened as stored (the viewer's way): the panel, its records, kappa and page as first.
    reopened = PairwiseComparison.from_stored(stored_comparisons(b)[0])
    assert isinstance(reopened.judge, JudgePanel) and reopened.judge.quorum == 2
    assert reopened.judge_label == re.search(r"judge (panel of .*?), both orders", out).group(1)
    assert [r.to_dict() for r in reopened.member_records()] == first["judges"]
    assert reopened.judge_agreement == pytest.approx(first["judge_agreement"])
    again = render_pairwise_html(reopened)
    original = page.read_text()
    for block in (r'<ul id="judges">.*?</ul>', r'<div class="meta">.*?</div>'):
        assert re.search(block, again, re.S).group(0) == re.search(block, original,
                                                                   re.S).group(0)
    assert re.findall(r'<div class="muted order">(.*?)</div>', again) == re.findall(
        r'<div class="muted order">(.*?)</div>', original)
    assert "openai/good-2: A shown first: judge preferred B" in html.unescape(again)

    # Other panel rules are another comparison, asked afresh.
    code, out, err = compare(capsys, *argv[:-1], "3")
    assert code == 0, err
    assert server.request_count == before + 24
    assert len(list((b / COMPARISONS_DIR).iterdir())) == 2


def test_a_stored_panel_that_cannot_be_rebuilt_is_a_one_line_error(tmp_path, capsys, server):
    server.set_reply(panel_judge)
    a, b = stored_run(tmp_path, "wrong", wrong), stored_run(tmp_path, "right", right)
    argv = (str(a), str(b), *judges("good-1", "good-2"))
    assert compare(capsys, *argv)[0] == 0
    [stored] = (b / COMPARISONS_DIR).iterdir()
    header, *rest = stored.read_text().splitlines(keepends=True)
    described = json.loads(header)
    described["panel"]["quorum"] = 5
    stored.write_text(json.dumps(described) + "\n" + "".join(rest))
    code, _, err = compare(capsys, *argv)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"{stored}: field 'judge'" in err and "quorum must be between 1 and" in err
    assert stored_comparisons(b) == []  # left out where comparisons are listed (the viewer)


def test_a_torn_last_pair_is_judged_again_and_a_garbled_file_is_a_one_line_error(
        tmp_path, capsys, server):
    a, b = stored_run(tmp_path, "wrong", wrong), stored_run(tmp_path, "right", right)
    argv = (str(a), str(b), "--judge", "openai/gpt-4o-mini", "--criterion", "Correct sum.")
    assert compare(capsys, *argv)[0] == 0
    [stored] = (b / COMPARISONS_DIR).iterdir()
    lines = stored.read_text().splitlines(keepends=True)
    # Killed while writing the last pair: that pair is asked again, the others are not.
    last = json.loads(lines[-1])
    stored.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    code, out, err = compare(capsys, *argv)
    assert code == 0, err
    assert server.request_count == 8 + (2 if last["status"] != "tie" else 0)
    assert "B won 4, tied 2, lost 0" in out
    # A damaged line in the middle is not skipped silently.
    lines = stored.read_text().splitlines(keepends=True)
    stored.write_text("".join(lines[:2]) + "{not json\n" + "".join(lines[2:]))
    code, _, err = compare(capsys, *argv)
    assert code == 2
    assert f"{stored}:3: not a JSON line" in err and len(err.strip().splitlines()) == 1


def test_replies_that_name_no_winner_are_counted_in_the_judge_spend(tmp_path, capsys, server):
    """Every request a pair made is spend, whether or not its reply named a winner: the
    printed line, the saved JSON (its total and each pair's) and the pairwise page."""
    a, b = stored_run(tmp_path, "wrong", wrong), stored_run(tmp_path, "right", right)
    server.set_reply("I cannot decide between these, sorry.")
    saved, page = tmp_path / "pairwise.json", tmp_path / "pairwise.html"

    code, out, _ = compare(capsys, str(a), str(b), "--judge", "openai/gpt-4o-mini",
                           "--save", str(saved), "--html", str(page))

    assert code == 3 and "4 JUDGE_ERROR" in out
    assert server.request_count == 8  # 4 differing pairs x 2 orders, none named a winner
    spend = re.search(r"judge spend: (\d+) request\(s\), (\d+) input and (\d+) output", out)
    assert spend is not None and int(spend.group(1)) == 8 and int(spend.group(2)) > 0
    data = json.loads(saved.read_text())
    assert data["token_usage"]["requests"] == 8
    assert data["token_usage"]["input_tokens"] == int(spend.group(2))
    errored = [p for p in data["pairs"] if p["status"] == "judge_error"]
    assert [p["token_usage"]["requests"] for p in errored] == [2, 2, 2, 2]
    assert "8 judge request(s)" in page.read_text()
    # Read back, a stored pair without a verdict keeps what it spent.
    (stored,) = stored_comparisons(b)
    comparison = PairwiseComparison.from_stored(stored)
    assert comparison.token_usage.requests == 8


def test_a_failed_request_counts_the_replies_its_pair_did_get(tmp_path, capsys, server):
    """One order's request fails outright: the pair is a judge error, and the other order's
    answered request is still in the spend."""
    a, b = stored_run(tmp_path, "wrong", wrong), stored_run(tmp_path, "right", right)

    def one_order_fails(request):
        # RESPONSE 1 holds B's (right) answer in the swapped order: that order fails.
        if shown(request.prompt, "RESPONSE 1") == right(shown(request.prompt, "USER INPUT")):
            return Fault.http(400)
        return checking_judge(request)

    server.set_reply(one_order_fails)
    code, out, _ = compare(capsys, str(a), str(b), "--judge", "openai/gpt-4o-mini", "--json")

    assert code == 3
    data = json.loads(out)["pairwise"]
    assert data["summary"]["judge_errors"] == 4
    assert data["token_usage"]["requests"] == 4  # the answered order of each pair
