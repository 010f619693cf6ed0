"""Small things a user trips on (issue 31's papercuts): messages that say what is wrong in one
line, and options that every judging command spells alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from referee import EvalCase, EvalSuite
from referee.cli import main
from referee.evaluators.deterministic import Contains
from referee.testing import Fault


def _err(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.strip()]


@pytest.fixture
def labels_file(tmp_path: Path) -> Path:
    path = tmp_path / "labels.jsonl"
    path.write_text('{"input": "q", "output": "a", "label": "pass"}\n'
                    '{"input": "q2", "output": "b", "label": "fail"}\n')
    return path


def test_an_unknown_judge_provider_is_named_with_the_known_ones(labels_file, capsys) -> None:
    base = ["calibrate", str(labels_file), "--evaluator", "faithfulness"]
    assert main([*base, "--judge", "foo/bar"]) == 2
    [line] = _err(capsys)
    assert "unknown provider 'foo'" in line and "anthropic" in line and "google, openai" in line
    assert "is not PROVIDER/MODEL" not in line
    assert main([*base, "--judge", "opnai/some-model"]) == 2
    assert "did you mean 'openai'?" in _err(capsys)[0]
    assert main([*base, "--judge", "openai"]) == 2  # no model at all: the shape is wrong
    assert "is not PROVIDER/MODEL" in _err(capsys)[0]


def test_a_misspelt_evaluator_gets_a_suggestion(labels_file, capsys) -> None:
    assert main(["calibrate", str(labels_file), "--evaluator", "faithfulnes"]) == 2
    [line] = _err(capsys)
    assert "unknown evaluator 'faithfulnes'; did you mean 'faithfulness'?" in line


def _stored_run(runs: Path) -> Path:
    suite = EvalSuite("labelled").add_cases([EvalCase(eval_id=f"c{i}", input=f"q{i}")
                                             for i in range(12)])
    suite.add_evaluator(Contains(["answer"]))
    report = suite.run(lambda prompt: "answer", verbose=False, runs_dir=runs, formats=())
    return Path(report.metadata["run_dir"])


def test_another_runs_labels_are_refused_in_one_line(tmp_path: Path, capsys) -> None:
    first, second = _stored_run(tmp_path / "a"), _stored_run(tmp_path / "b")
    other_run = json.loads((first / "meta.json").read_text())["run_id"]
    labels = tmp_path / "first.jsonl"
    labels.write_text("".join(json.dumps({"label": "pass", "metadata": {
        "run_id": other_run, "case_id": f"c{i}", "criterion": "contains"}}) + "\n"
        for i in range(12)))
    assert main(["labels", "import", str(second), str(labels)]) == 2
    [line] = _err(capsys)
    assert f"lines 1-12: field 'metadata.run_id': labels of run {other_run!r}" in line
    assert "all 12 lines" in line and line.endswith("nothing was imported")


def test_a_missing_run_directory_reads_plainly(tmp_path: Path, capsys) -> None:
    labels = tmp_path / "labels.jsonl"
    labels.write_text("{}\n")
    assert main(["labels", "import", str(tmp_path / "nope"), str(labels)]) == 2
    [line] = _err(capsys)
    assert line == (f"referee: error: {tmp_path / 'nope'}: no such directory (expected a "
                    "stored run's directory, as `referee list` shows it)")


# compare --judge -------------------------------------------------------------------------

CASES = [EvalCase(input=f"What is {i} + {i}?", eval_id=f"sum-{i}") for i in range(4)]


def _run_of(tmp_path: Path, name: str, model) -> Path:
    report = EvalSuite(name).add_cases(CASES).run(model, verbose=False,
                                                  runs_dir=tmp_path / name, formats=())
    return Path(report.metadata["run_dir"])


def _answer(question: str) -> str:
    return str(2 * int(question.split()[2]))


def _off_by_one_sometimes(question: str) -> str:
    n = int(question.split()[2])
    return str(2 * n + (n % 2))  # the odd cases differ, the even ones are identical


def test_compare_without_a_key_says_so_once_before_any_pair(tmp_path, capsys,
                                                           monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    a, b = _run_of(tmp_path, "a", _answer), _run_of(tmp_path, "b", _off_by_one_sometimes)
    code = main(["compare", str(a), str(b), "--judge", "openai/gpt-4o-mini"])
    out, err = capsys.readouterr()
    assert code == 3 and out == ""
    assert err.count("no OpenAI API key") == 1 and "no pair was judged" in err
    assert "tied" not in err


def test_compare_says_identical_pairs_were_not_judged_and_takes_request_options(
        tmp_path, capsys, openai_judge_server) -> None:
    server = openai_judge_server(lambda request: Fault.http(500))
    a, b = _run_of(tmp_path, "a", _answer), _run_of(tmp_path, "b", _off_by_one_sometimes)
    code = main(["compare", str(a), str(b), "--judge", "openai/judge-a", "--judge-timeout",
                 "5", "--judge-max-tokens", "64", "--judge-max-retries", "0", "--one-order"])
    out, _ = capsys.readouterr()
    assert code == 3
    # Two pairs differ, each asked once (one order), with no retry of the failed request.
    assert server.request_count == 2
    assert "tied 2, lost 0 of 2 judged pair(s) (2 of the ties: identical outputs, tied " \
        "without asking the judge)" in out


def test_compare_html_without_a_judge_says_where_it_wrote(tmp_path, capsys) -> None:
    a, b = _run_of(tmp_path, "a", _answer), _run_of(tmp_path, "b", _answer)
    page = tmp_path / "compare.html"
    assert main(["compare", str(a), str(b), "--html", str(page), "--json"]) == 0
    out, err = capsys.readouterr()
    json.loads(out)  # stdout stays the JSON alone
    assert f"comparison page written to {page}" in err and page.is_file()
    assert main(["compare", str(a), str(b), "--judge-max-retries", "1"]) == 2
    assert "need --judge" in capsys.readouterr().err


# list, meta.json, the run's own lines ---------------------------------------------------------

def test_list_tells_runs_apart_by_when_label_suite_cases_and_pass_rate(tmp_path, capsys) -> None:
    import time

    run = _stored_run(tmp_path / "runs")
    meta = json.loads((run / "meta.json").read_text())
    capsys.readouterr()
    assert main(["list", "--dir", str(tmp_path / "runs")]) == 0
    [line] = capsys.readouterr().out.splitlines()
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(meta["started_at"]))
    assert line.startswith(f"{run.name}  {when}  labelled  [<lambda>]  pass 100.0%")
    assert "12/12 case(s) passed" in line


def test_a_deterministic_criterion_records_no_judge_and_old_runs_still_resume(
        tmp_path) -> None:
    from referee.evaluators.deterministic import NotEmpty

    suite = EvalSuite("plain").add_cases([EvalCase(eval_id="c1", input="q")])
    suite.add_evaluator(NotEmpty())
    report = suite.run(lambda prompt: "x", verbose=False, runs_dir=tmp_path, formats=())
    meta_path = Path(report.metadata["run_dir"]) / "meta.json"
    meta = json.loads(meta_path.read_text())
    [criterion] = meta["criteria"]
    assert "judge_model" not in json.dumps(criterion) and meta["judge"] == {}
    # A run stored before recorded the judge defaults in the config: it resumes all the same.
    criterion["settings"]["config"]["judge_model"] = "gemini-2.5-flash"
    meta_path.write_text(json.dumps(meta))
    again = suite.run(lambda prompt: "x", verbose=False, resume=meta_path.parent, formats=())
    assert again.passed == 1


def test_a_threshold_taken_from_the_judge_table_is_said_before_the_run(capsys) -> None:
    from referee.evaluators import Faithfulness
    from referee.judge import JudgeConfig

    suite = EvalSuite("t").add_cases([EvalCase(input="q", context="c")])
    suite.add_evaluators(Faithfulness(judge=JudgeConfig(provider="openai", model="gpt-4o")),
                         Faithfulness(judge=JudgeConfig(provider="openai", model="gpt-4o"),
                                      threshold=0.5))
    suite.run(lambda prompt: "x", save=False)
    err = capsys.readouterr().err
    expected = Faithfulness(judge=JudgeConfig(provider="openai", model="gpt-4o")).threshold
    assert (f"referee: threshold for faithfulness: {expected:g}, the built-in default for judge "
            "gpt-4o") in err
    assert "threshold for faithfulness#2" not in err  # given: nothing to say


def test_run_judge_max_retries_0_asks_a_dead_judge_once(tmp_path, capsys,
                                                        openai_judge_server,
                                                        monkeypatch) -> None:
    monkeypatch.setenv("REFEREE_JUDGE_MAX_RETRIES", "4")  # restored after the test
    server = openai_judge_server(lambda request: Fault.http(503))
    judge = server.judge_config(model="dead")
    suite_file = tmp_path / "suite.py"
    suite_file.write_text(
        "from referee import EvalCase, EvalSuite\n"
        "from referee.evaluators import CustomRubric\n"
        "from referee.judge import JudgeConfig\n"
        "suite = EvalSuite('s').add_cases([EvalCase(input='q')])\n"
        f"judge = JudgeConfig(provider='openai', model='dead', base_url={judge.base_url!r}, "
        "api_key='test-key', cache=False)\n"
        "suite.add_evaluator(CustomRubric([('Is it polite?', True)], judge=judge))\n"
        "def model(prompt):\n"
        "    return 'x'\n")
    assert main(["run", str(suite_file), "--out", str(tmp_path / "runs"), "-q",
                 "--judge-max-retries", "0"]) == 3
    assert server.request_count == 1
    assert main(["run", str(suite_file), "--judge-max-retries", "-1"]) == 2


def test_case_results_is_a_list_where_the_run_keeps_its_cases_anyway(tmp_path) -> None:
    from array import array

    from referee.store import StoredCases, load_run
    from referee.store._case_file import CACHED_CASES_UP_TO

    run = _stored_run(tmp_path / "runs")
    report = load_run(run)
    assert isinstance(report.cases, StoredCases)  # referee's own readers stay lazy
    assert isinstance(report.case_results, list) and isinstance(report.results, list)
    assert report.case_results == list(report.cases) and len(report.case_results) == 12
    assert report.case_results[0] is report.cases[0]  # the parsed cases, not a second copy
    # Past what a run keeps parsed, nothing is read whole unasked.
    big = StoredCases(run / "cases.jsonl")
    big._offsets = array("q", [0] * (CACHED_CASES_UP_TO + 1))
    assert big.kept_list() is None
