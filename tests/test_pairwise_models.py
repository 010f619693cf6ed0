"""Model functions compared from Python: two (compare_models) or N (rank_models, a round robin
ranked by Bradley-Terry), through the real SDK against the scripted judge server."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_pairwise import shown

from referee import EvalCase, EvalSuite, compare_models, rank_models
from referee.evaluators.deterministic import ExactMatch
from referee.pairwise import COMPARISONS_DIR, bradley_terry, rank
from referee.testing import Fault, ScriptedJudgeServer

pytestmark = pytest.mark.usefixtures("isolated_judge")

CASES = [EvalCase(input=f"What is {n} + {n}?", expected_output=str(2 * n), eval_id=f"sum-{n}")
         for n in range(12)]


def number(question: str) -> int:
    return int(question.split()[2])


def right(question: str) -> str:
    return str(2 * number(question))


def wrong(question: str) -> str:
    return str(2 * number(question) + 1)


def half(question: str) -> str:
    return right(question) if number(question) % 2 == 0 else wrong(question)


def checking_judge(request) -> str:
    """Prefers the correct sum wherever it is shown: a judge without position bias."""
    question = shown(request.prompt, "USER INPUT")
    first = shown(request.prompt, "RESPONSE 1")
    return json.dumps({"reason": f"{right(question)} is the correct sum",
                       "winner": "1" if first == right(question) else "2"})


@pytest.fixture
def server():
    with ScriptedJudgeServer(reply=checking_judge) as srv:
        yield srv


def test_two_model_functions_are_run_and_judged_in_one_call(server, tmp_path):
    suite = EvalSuite("sums").add_cases(CASES).add_evaluator(ExactMatch())
    result = compare_models(suite, half, right, "The sum is correct.",
                            judge=server.judge_config(), save=True, runs_dir=tmp_path / "runs")

    rate = result.win_rate
    assert (rate.wins, rate.ties, rate.losses) == (6, 6, 0)
    assert (result.label_a, result.label_b) == ("half", "right")
    assert server.request_count == 12  # 6 differing pairs x 2 orders
    # Each model's run is an ordinary run, scored by the suite's evaluators and stored.
    assert result.report_a.passed == 6 and result.report_b.passed == 12
    assert len(list((tmp_path / "runs").iterdir())) == 2
    assert rate.p_value == pytest.approx(2 / 64)


def test_a_list_of_cases_is_enough(server):
    result = compare_models(CASES[:3], wrong, right, "The sum is correct.",
                            judge=server.judge_config())
    assert result.win_rate.wins == 3 and result.report_a.name == "compare_models"


def test_round_robin_ranks_variants_with_intervals(server):
    ranking = rank_models(CASES, {"wrong": wrong, "half": half, "right": right},
                          "The sum is correct.", judge=server.judge_config())

    assert [v.name for v in ranking.variants] == ["right", "half", "wrong"]
    best, middle, worst = ranking.variants
    assert (best.wins, best.ties, best.losses) == (18, 6, 0)
    assert (worst.wins, worst.ties, worst.losses) == (0, 6, 18)
    assert best.ci_low > worst.ci_high
    assert all(v.ci_low <= v.rating <= v.ci_high for v in ranking.variants)
    assert middle.rating == pytest.approx(1000, abs=1e-6)  # symmetric: the middle is centred
    assert len(ranking.comparisons) == 3 and set(ranking.reports) == {"wrong", "half", "right"}
    # right-wrong differ on 12 cases, right-half and half-wrong on 6 each; 2 orders each.
    assert server.request_count == 2 * (12 + 6 + 6)
    assert "1. right" in ranking.render_text()


def test_bradley_terry_recovers_known_odds():
    # 3 wins in 4 games: odds 3:1 without the prior's virtual tie.
    strengths = bradley_terry([(0, 1, 1.0)] * 3 + [(0, 1, 0.0)], 2, prior_ties=0)
    assert math.exp(strengths[0] - strengths[1]) == pytest.approx(3.0)
    # A clean sweep stays finite with the default prior.
    sweep = bradley_terry([(0, 1, 1.0)] * 4, 2)
    assert math.exp(sweep[0] - sweep[1]) == pytest.approx(9.0)


def test_rank_models_refuses_fewer_than_two_models():
    with pytest.raises(ValueError, match="at least two"):
        rank_models(CASES, {"only": right}, "x")
    with pytest.raises(TypeError, match=r"models\['b'\] must be callable"):
        rank_models(CASES, {"a": right, "b": 3}, "x")
    assert rank(["a", "b"], []).variants[0].rating == 1000


_INTERRUPTED_CALL = """
import sys
sys.path.insert(0, sys.argv[3])
from test_pairwise_models import CASES, half, right
from referee import EvalSuite, compare_models
from referee.evaluators.deterministic import ExactMatch
from referee.judge import JudgeConfig
from referee.testing import DUMMY_API_KEY

judge = JudgeConfig(provider="openai", model="gpt-4o-mini", base_url=sys.argv[1],
                    api_key=DUMMY_API_KEY, cache=False)
suite = EvalSuite("sums").add_cases(CASES).add_evaluator(ExactMatch())
compare_models(suite, half, right, "The sum is correct.", judge=judge, save=True,
               runs_dir=sys.argv[2])
"""


def killed_while_judging(server, argv: list[str], ready) -> None:
    """Run ``argv`` with the judge answering every case but two (those hang), and SIGKILL it
    once ``ready()``: a crash or a CI timeout half-way through the judging."""
    def finishes_all_but_two(request):
        if number(shown(request.prompt, "USER INPUT")) in HANGING:
            return Fault.hang()  # until the process is killed
        return checking_judge(request)

    server.set_reply(finishes_all_but_two)
    # A loopback judge's adaptive window starts at 2 requests, which the hanging ones could fill.
    env = {**os.environ, "REFEREE_JUDGE_CONCURRENCY": "16"}
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + 120
        while not ready():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    server.set_reply(checking_judge)


HANGING = {1, 5}  # cases whose outputs differ in both files of tests


def test_an_interrupted_compare_models_resumes_without_running_or_asking_twice(server, tmp_path):
    """Killed while judging (SIGKILL, the reply cache off): resume=(run A, run B) calls neither
    model again and asks only the pairs that had no verdict."""
    runs = tmp_path / "runs"
    script = tmp_path / "call.py"
    script.write_text(_INTERRUPTED_CALL)

    def judged_all_but_two() -> list[Path]:
        stored = list(runs.glob(f"*/{COMPARISONS_DIR}/*.jsonl")) if runs.is_dir() else []
        # Its description, 6 identical pairs (ties unasked) and 4 of the 6 asked pairs.
        return stored if (stored and len(stored[0].read_text().splitlines()) == 11
                          and server.request_count == 12) else []

    killed_while_judging(server, [sys.executable, str(script), server.base_url("openai"),
                                  str(runs), str(Path(__file__).parent)], judged_all_but_two)
    stored = judged_all_but_two()
    run_b = stored[0].parent.parent
    [run_a] = [p for p in runs.iterdir() if p != run_b]

    asked_before = server.request_count
    calls: list[str] = []

    def counted(model):
        def call(question: str) -> str:
            calls.append(question)
            return model(question)
        call.__name__ = model.__name__
        return call

    suite = EvalSuite("sums").add_cases(CASES).add_evaluator(ExactMatch())
    result = compare_models(suite, counted(half), counted(right), "The sum is correct.",
                            judge=server.judge_config(model="gpt-4o-mini"),
                            resume=(run_a, run_b), runs_dir=runs)
    assert calls == []  # both runs were complete: no model is called again
    resumed = server.requests[asked_before:]
    assert len(resumed) == 4
    assert {number(shown(r.prompt, "USER INPUT")) for r in resumed} == HANGING
    assert (result.win_rate.wins, result.win_rate.ties, result.win_rate.losses) == (6, 6, 0)
    assert len(result.resumed) == 10 and result.stored_at == stored[0]
    with pytest.raises(ValueError, match=r"resume must be \(RUN_A_DIR, RUN_B_DIR\)"):
        compare_models(suite, half, right, "x", resume=str(run_a))
