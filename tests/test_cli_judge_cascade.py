"""`referee run --judge-cascade CHEAP,STRONG --cascade-margin M` (issue 32, item 2, the CLI form):
every judged criterion that names no judge of its own is judged by the cascade; the strong judge
is asked only where the cheap one is unsure.

One scripted judge server serves both judges through the real OpenAI SDK, told apart by model:
the cheap one scores a case by the word its input starts with, the strong one fails every case,
so which judge answered shows in each verdict and in the server's requests.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from referee.cli import main
from referee.judge.cascade import CASCADE_ENV, CASCADE_MARGIN_ENV
from referee.testing import Reply

CHEAP_SCORES = {"sure-pass": 0.95, "sure-fail": 0.05, "near": 0.55}
STRONG_SCORE = 0.2
WORDS = ["sure-pass", "near", "sure-fail", "near", "sure-pass"]
CASCADE = "openai/cheap-judge,openai/strong-judge"

SUITE_FILE = f"""
    from referee import CriterionConfig, EvalCase, EvalSuite
    from referee.criteria.llm import ResponseMatchCriterion
    from referee.evaluators import GEval

    words = {WORDS!r}
    suite = EvalSuite("cli-cascade").add_cases(
        [EvalCase(input=f"{{w}} question {{i}}", expected_output="the answer", eval_id=f"c{{i}}")
         for i, w in enumerate(words)])
    suite.add_evaluators(
        ResponseMatchCriterion(CriterionConfig(threshold=0.5, num_samples=1, api_style="chat")),
        GEval("Is it right?", runs=1, threshold=0.5))

    def model(question):
        return "the answer"
"""


def _by_model(request) -> Reply:
    if '"score"' not in request.prompt:
        return Reply("Yes")
    if request.model == "strong-judge":
        score = STRONG_SCORE
    else:
        score = next(s for word, s in CHEAP_SCORES.items() if word in request.prompt)
    return Reply(json.dumps({"score": score, "reasoning": "scripted"}))


@pytest.fixture
def cascade_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The run sets the cascade's variables for the process; put back as they were after."""
    for name in (CASCADE_ENV, CASCADE_MARGIN_ENV):
        monkeypatch.setenv(name, "")


def _run(tmp_path: Path, *options: str) -> tuple[int, dict]:
    target = tmp_path / "evals.py"
    target.write_text(textwrap.dedent(SUITE_FILE))
    runs = tmp_path / "runs"
    code = main(["run", str(target), "--out", str(runs), "--format", "json", "-q", *options])
    [run_dir] = [p for p in runs.iterdir() if p.is_dir()]
    report = json.loads((run_dir / "results.json").read_text())  # the JSON report
    report["cases"] = [json.loads(line) for line in
                       (run_dir / "cases.jsonl").read_text().splitlines() if line.strip()]
    return code, report


def _by_case(report: dict, criterion: str) -> list[dict]:
    rows = []
    for case in sorted(report["cases"], key=lambda c: c["eval_id"]):
        [result] = [r for r in case["criterion_results"] if r["criterion"] == criterion]
        rows.append(result)
    return rows


def test_the_strong_judge_is_asked_only_where_the_cheap_one_is_unsure(
        openai_judge_server, cascade_env, tmp_path: Path) -> None:
    server = openai_judge_server(_by_model)
    code, report = _run(tmp_path, "--judge-cascade", CASCADE, "--cascade-margin", "0.1")
    assert code in (0, 1)
    for criterion in ("response_match_score", "g_eval"):
        results = _by_case(report, criterion)
        escalated = [r["details"]["cascade"]["escalated"] for r in results]
        assert escalated == [w == "near" for w in WORDS], criterion
        assert [r["score"] for r in results] == [
            STRONG_SCORE if w == "near" else CHEAP_SCORES[w] for w in WORDS], criterion
        assert all(r["details"]["cascade"]["reasons"] == ["margin"]
                   for r, up in zip(results, escalated) if up)
    strong = [r for r in server.requests if r.model == "strong-judge"]
    cheap = [r for r in server.requests if r.model == "cheap-judge"]
    # Each criterion asks the cheap judge about every case, the strong one about the near ones.
    assert len(cheap) == 2 * len(WORDS)
    assert len(strong) == 2 * WORDS.count("near")
    assert all("near" in r.prompt for r in strong)
    assert {r.model for r in server.requests} == {"cheap-judge", "strong-judge"}
    # The stored report shows each criterion's escalations, as for a cascade set in Python.
    assert set(report["judge_cascade"]) == {"response_match_score", "g_eval"}


def test_the_margin_decides_which_cases_escalate(openai_judge_server, cascade_env,
                                                 tmp_path: Path) -> None:
    server = openai_judge_server(_by_model)
    # Every cheap score lies within 0.5 of the 0.5 threshold: each case goes to the strong judge.
    _, report = _run(tmp_path, "--judge-cascade", CASCADE, "--cascade-margin", "0.5")
    results = _by_case(report, "response_match_score")
    assert all(r["details"]["cascade"]["escalated"] for r in results)
    assert all(r["score"] == STRONG_SCORE for r in results)
    assert len([r for r in server.requests if r.model == "strong-judge"]) == 2 * len(WORDS)


def test_without_the_option_the_run_judges_as_before(openai_judge_server, cascade_env,
                                                      tmp_path: Path) -> None:
    server = openai_judge_server(_by_model)
    _, report = _run(tmp_path)
    assert all("cascade" not in r["details"]
               for r in _by_case(report, "response_match_score"))
    assert not {"cheap-judge", "strong-judge"} & {r.model for r in server.requests}
    assert os.environ.get(CASCADE_ENV) == ""


@pytest.mark.parametrize(("options", "message"), [
    (["--judge-cascade", "openai/cheap-judge"], "--judge-cascade: expected two or more"),
    (["--judge-cascade", "openai/a,strong"], "--judge-cascade: 'strong' is not PROVIDER/MODEL"),
    (["--cascade-margin", "0.2"], "--cascade-margin goes with --judge-cascade"),
])
def test_a_bad_cascade_option_is_named_before_any_case(options, message, cascade_env,
                                                       tmp_path: Path, capsys) -> None:
    target = tmp_path / "evals.py"
    target.write_text(textwrap.dedent(SUITE_FILE))
    code = main(["run", str(target), "--out", str(tmp_path / "runs"), *options])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_a_bad_margin_is_refused(cascade_env, tmp_path: Path, capsys) -> None:
    assert main(["run", str(tmp_path / "evals.py"), "--judge-cascade", CASCADE,
                 "--cascade-margin", "2"]) == 2
    assert "expected a number between 0 and 1, got '2'" in capsys.readouterr().err


def test_a_criterion_with_a_judge_of_its_own_keeps_it(openai_judge_server,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from referee import CriterionConfig, EvalCase, EvalSuite
    from referee.criteria.llm import ResponseMatchCriterion
    from referee.evaluators import GEval

    server = openai_judge_server(_by_model)
    monkeypatch.setenv(CASCADE_ENV, CASCADE)
    own = server.judge_config(model="own-judge")
    suite = EvalSuite("own").add_cases([EvalCase(input="near question", expected_output="x")])
    suite.add_evaluators(
        ResponseMatchCriterion(CriterionConfig(threshold=0.5, num_samples=1), judge=own),
        GEval("Is it right?", runs=1, threshold=0.5, judge=own),
        GEval("Is it clear?", name="clarity", runs=1, threshold=0.5))
    report = suite.run(lambda question: "x", verbose=False, save=False)
    results = {r.criterion: r for r in report.cases[0].criterion_results}
    assert "cascade" not in results["response_match_score"].details
    assert "cascade" not in results["g_eval"].details
    # The one without a judge of its own is the cascade's.
    assert results["clarity"].details["cascade"]["escalated"]
    assert sorted(r.model for r in server.requests) == [
        "cheap-judge", "own-judge", "own-judge", "strong-judge"]


def test_a_bad_judge_cascade_variable_errors_each_case_naming_it(
        openai_judge_server, monkeypatch: pytest.MonkeyPatch) -> None:
    from referee import CriterionConfig, EvalCase, EvalSuite
    from referee.criteria.llm import ResponseMatchCriterion
    from referee.evaluators import GEval

    server = openai_judge_server(_by_model)
    monkeypatch.setenv(CASCADE_ENV, "openai/cheap-judge")
    suite = EvalSuite("bad").add_cases([EvalCase(input="near question", expected_output="x")])
    suite.add_evaluators(ResponseMatchCriterion(CriterionConfig(num_samples=1)),
                         GEval("Is it right?", runs=1))
    report = suite.run(lambda question: "x", verbose=False, save=False)
    errors = [r.error or "" for r in report.cases[0].criterion_results]
    assert len(errors) == 2 and all("JUDGE_CASCADE: expected two or more" in e for e in errors)
    assert server.requests == []
