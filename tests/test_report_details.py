"""Issue 22: details of the HTML case view, read in headless Chromium. The word diff keeps
words apart ("days weeks", not "daysweeks"), and a QAG question row says "(cached)" when its
reply came from the cache instead of a {"cached": false} box on every row."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_report_samples import chromium_dom

from referee import CustomRubric, EvalCase, EvalSuite
from referee.report.diff import word_diff
from referee.report.html import render_html
from referee.testing.server import ScriptedJudgeServer


def _diffs(dom: str) -> list[str]:
    """The text a reader sees in each word-diff block."""
    blocks = re.findall(r'<pre class="diff">(.*?)</pre>', dom, re.S)
    return [re.sub(r"<[^>]+>", "", block) for block in blocks]


def test_the_word_diff_keeps_words_apart(tmp_path: Path) -> None:
    pieces = word_diff("Refunds within 30 days.", "Refunds within 30 days")
    assert [(p.op, p.text) for p in pieces] == [("same", "Refunds within 30 days"),
                                                ("removed", ".")]
    suite = EvalSuite("diff")
    suite.add_cases([EvalCase(input="q", expected_output="Refunds within 30 days, by card.")])
    from referee.evaluators.deterministic import Contains

    suite.add_evaluator(Contains(["weeks"]))
    report = suite.run(lambda p: "Refunds within 30 weeks, by card!", verbose=False, save=False)
    path = tmp_path / "report.html"
    path.write_text(render_html(report), encoding="utf-8")
    (seen,) = _diffs(chromium_dom(path.as_uri(), tmp_path))
    assert seen == "Refunds within 30 days weeks, by card. !", seen
    assert "daysweeks" not in seen


@pytest.mark.usefixtures("isolated_judge")
def test_question_rows_mark_cached_replies_and_show_no_cached_false_box(
        tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("REFEREE_CACHE", "1")
    monkeypatch.setenv("REFEREE_CACHE_DIR", str(tmp_path / "cache"))
    with ScriptedJudgeServer(reply="Yes") as server:
        judge = server.judge_config(cache=True)

        def run() -> str:
            suite = EvalSuite("qag")
            suite.add_cases([EvalCase(input="Where is my parcel?")])
            suite.add_evaluator(CustomRubric([("Is it polite?", True), ("Is it short?", True)],
                                             judge=judge))
            report = suite.run(lambda p: "It ships today.", verbose=False, save=False)
            path = tmp_path / f"report{server.request_count}.html"
            path.write_text(render_html(report), encoding="utf-8")
            return chromium_dom(path.as_uri(), tmp_path)

        first = run()
        asked = server.request_count
        second = run()
        assert server.request_count == asked  # the second run's replies came from the cache
    for dom in (first, second):
        assert "cached&quot;: false" not in dom and '"cached": false' not in dom
        assert len(re.findall(r"Is it (?:polite|short)\?", dom)) >= 2
    assert "(cached)" not in first
    assert second.count("(cached)</span>") == 2
