"""JudgeConfig(reliability_check=True): a finished EvalSuite-style run asks the judge again on a
seeded sample of its cases and reports how often the pass/fail repeated (judge_reliability).

The judge is the scripted server behind the real OpenAI SDK; GEval with one run asks one
request per case, so every count below is exact.
"""

from __future__ import annotations

import html
import json
import random
import threading
from collections import Counter

import pytest
from test_report_samples import chromium_dom

from referee import Contains, EvalCase, EvalSuite, GEval
from referee.judge import configure
from referee.report.console import render_text
from referee.report.html import render_html
from referee.store import load_run
from referee.testing import Fault, ScriptedJudgeServer

pytestmark = pytest.mark.usefixtures("isolated_judge")

PASS, FAIL = '{"score": 1.0, "reason": "good"}', '{"score": 0.0, "reason": "bad"}'


@pytest.fixture
def server():
    with ScriptedJudgeServer(reply=PASS) as srv:
        yield srv


def flip_on_second_ask(server: ScriptedJudgeServer, *, fault_on: str = "") -> None:
    """A judge that passes every case the first time and, asked again about a case whose
    input has "flip", fails it (about one with ``fault_on``, answers a 400)."""
    asked: Counter[str] = Counter()
    lock = threading.Lock()

    def answer(request):
        case = request.prompt.split("question ", 1)[1].split("\n", 1)[0].split()[0]
        with lock:
            asked[case] += 1
            again = asked[case] > 1
        if again and fault_on and fault_on in request.prompt:
            return Fault.http(400)
        return FAIL if again and "flip" in request.prompt else PASS
    server.set_reply(answer)


def suite_of(names: list[str], **geval) -> EvalSuite:
    suite = EvalSuite("reliability").add_cases(
        [EvalCase(input=f"question {name}") for name in names])
    return suite.add_evaluators(GEval(criteria="The answer is helpful.", runs=1, **geval))


def answer(prompt: str) -> str:
    return f"An answer to {prompt}."


def test_an_inconsistent_judge_reports_the_share_of_repeated_verdicts(server, tmp_path):
    flip_on_second_ask(server)
    configure(server.judge_config(reliability_check=True, reliability_sample=5))
    names = ["a", "b-flip", "c", "d-flip", "e"]
    report = suite_of(names).run(answer, verbose=False, runs_dir=tmp_path)

    assert report.judge_reliability == 0.6  # 3 of the 5 re-asked verdicts repeated
    check = report.judge_reliability_check
    assert sorted(check.sampled_cases) == sorted(c.eval_id for c in report.cases)
    assert (check.compared, check.agreed, check.left_out) == (5, 3, 0)
    assert check.criteria["g_eval"].agreement == 0.6
    # Each sampled case was asked once more, and the bill says so.
    assert server.request_count == 5 + 5
    assert check.token_usage.requests == 5
    assert report.token_usage.requests == 10
    assert report.summary.total_token_usage.requests == 10
    assert report.summary.criterion_stats["g_eval"].token_usage.requests == 10
    stored = json.loads((tmp_path / report.run_id / "report.json").read_text())
    assert stored["judge_reliability"] == 0.6
    assert stored["judge_reliability_check"]["criteria"]["g_eval"]["agreement"] == 0.6
    assert stored["spend"]["judge"]["requests"] == 10
    # The pass rate is the first verdicts'; the re-asks only measure the judge.
    assert report.pass_rate == 1.0


def test_the_value_survives_load_run_and_is_printed(server, tmp_path):
    flip_on_second_ask(server)
    configure(server.judge_config(reliability_check=True, reliability_sample=5))
    report = suite_of(["a", "b-flip", "c", "d-flip", "e"]).run(answer, verbose=False,
                                                               runs_dir=tmp_path)
    loaded = load_run(tmp_path / report.run_id)
    assert loaded.judge_reliability == 0.6
    assert loaded.judge_reliability_check == report.judge_reliability_check
    assert loaded.token_usage.requests == 10

    line = ("Judge consistency: 60% agreement across repeated calls (sampled 5 cases; "
            "3/5 verdicts repeated)")
    assert line in render_text(loaded, soft_wrap=False)
    page = tmp_path / "report.html"
    page.write_text(render_html(loaded), encoding="utf-8")
    assert line in html.unescape(chromium_dom(page.as_uri(), tmp_path))


def test_a_consistent_judge_agrees_fully_though_the_reply_cache_is_on(server, tmp_path):
    configure(server.judge_config(reliability_check=True, cache=True,
                                  cache_path=str(tmp_path / "cache.db")))
    names = ["a", "b", "c", "d"]
    first = suite_of(names).run(answer, verbose=False, runs_dir=tmp_path / "runs")
    assert first.judge_reliability == 1.0
    assert server.request_count == 4 + 4  # the re-asks reached the judge, not the cache

    again = suite_of(names).run(answer, verbose=False, runs_dir=tmp_path / "runs")
    # The run's own verdicts now come from the cache; the re-asks still do not.
    assert server.request_count == 8 + 4
    assert again.judge_reliability == 1.0
    assert again.judge_reliability_check.token_usage.requests == 4
    assert again.judge_reliability_check.token_usage.cached_requests == 0


def test_off_by_default_no_request_is_added(server, tmp_path):
    flip_on_second_ask(server)
    configure(server.judge_config())
    report = suite_of(["a", "b-flip", "c"]).run(answer, verbose=False, runs_dir=tmp_path)
    assert server.request_count == 3
    assert report.judge_reliability is None and report.judge_reliability_check is None
    assert "Judge consistency" not in render_text(report, soft_wrap=False)
    assert json.loads((tmp_path / report.run_id / "report.json").read_text())[
        "judge_reliability"] is None


def test_the_seeded_sample_is_drawn_again_by_a_rescore(server, tmp_path):
    flip_on_second_ask(server)
    configure(server.judge_config(reliability_check=True, reliability_sample=3))
    names = ["a", "b-flip", "c", "d-flip", "e", "f-flip", "g"]
    report = suite_of(names).run(answer, verbose=False, runs_dir=tmp_path)
    check = report.judge_reliability_check
    keys = [c.eval_id for c in report.cases]
    drawn = sorted(random.Random(report.run_id).sample(range(len(keys)), 3))
    assert check.sampled_cases == [keys[i] for i in drawn]
    assert check.seed == report.run_id and check.sample_size == 3
    flips = sum("flip" in report.cases[i].case.input for i in drawn)
    assert report.judge_reliability == round((3 - flips) / 3, 4)
    assert server.request_count == 7 + 3

    # A rescore of the stored outputs asks the same cases again: 7 verdicts and 3 re-asks.
    server.reset_record()
    server.set_reply(PASS)
    rescored = suite_of(names).run(answer, verbose=False, runs_dir=tmp_path,
                                   resume=tmp_path / report.run_id, rescore=True)
    assert server.request_count == 7 + 3
    assert rescored.judge_reliability_check.sampled_cases == check.sampled_cases
    assert rescored.judge_reliability == 1.0


def test_only_judged_criteria_are_asked_again_and_a_failed_re_ask_is_left_out(server, tmp_path):
    flip_on_second_ask(server, fault_on="question c")
    suite = suite_of(["a", "b-flip", "c"], judge=server.judge_config(
        reliability_check=True, max_retries=0))
    suite.add_evaluators(Contains("answer"))
    report = suite.run(answer, verbose=False, runs_dir=tmp_path)

    check = report.judge_reliability_check
    assert list(check.criteria) == ["g_eval"]  # Contains always repeats itself: not asked
    assert (check.compared, check.agreed, check.left_out) == (2, 1, 1)
    assert report.judge_reliability == 0.5
    assert server.request_count == 3 + 3


def test_a_run_with_no_judged_criterion_makes_no_check(tmp_path):
    from referee.judge import JudgeConfig
    configure(JudgeConfig(reliability_check=True))
    suite = EvalSuite("deterministic").add_cases([EvalCase(input="q")])
    report = suite.add_evaluators(Contains("q")).run(answer, verbose=False, runs_dir=tmp_path)
    assert report.judge_reliability is None and report.judge_reliability_check is None


def test_a_case_run_several_times_is_compared_with_its_first_run(server, tmp_path):
    flip_on_second_ask(server)
    configure(server.judge_config(reliability_check=True))
    report = suite_of(["a", "b-flip", "c"]).run(answer, verbose=False, runs_dir=tmp_path,
                                                runs=2)
    assert server.request_count == 3 * 2 + 3
    check = report.judge_reliability_check
    assert check.sample_size == 5 and len(check.sampled_cases) == 3  # the effective default
    # b-flip passed its first run and fails when asked again; a and c repeat.
    assert report.judge_reliability == round(2 / 3, 4) == 0.6667


def test_a_panel_is_asked_again_member_by_member(server, tmp_path):
    from referee import JudgePanel

    asked: Counter[tuple[str, str]] = Counter()
    lock = threading.Lock()

    def answer_by_member(request):
        case = request.prompt.split("question ", 1)[1].split()[0]
        with lock:
            asked[request.model, case] += 1
            again = asked[request.model, case] > 1
        return FAIL if again and "flip" in case and request.model == "judge-b" else PASS
    server.set_reply(answer_by_member)
    panel = JudgePanel(members=[server.judge_config(model="judge-a", reliability_check=True),
                                server.judge_config(model="judge-b")])
    report = suite_of(["a", "b-flip", "c"], judge=panel).run(answer, verbose=False,
                                                            runs_dir=tmp_path)
    assert server.request_count == 3 * 2 + 3 * 2  # each member of each sampled case, again
    assert report.judge_reliability_check.token_usage.requests == 6
    first = {c.case.input: c.passed for c in report.cases}
    assert first == {"question a": True, "question b-flip": True, "question c": True}
    # judge-b's second verdict on b-flip pulls the panel's under the threshold.
    assert report.judge_reliability == round(2 / 3, 4)
