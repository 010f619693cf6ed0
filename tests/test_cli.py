"""The referee command: run, resume, compare, view, list; --help; one-line errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path

import pytest

from referee.cli import main

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "examples" / "quickstart"


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def only_run_dir(runs: Path) -> Path:
    [run_dir] = [p for p in runs.iterdir() if p.is_dir()]
    return run_dir


def test_quickstart_runs_offline_and_writes_every_report(tmp_path, capsys):
    code, out, err = run_cli(capsys, "run", str(QUICKSTART / "eval_shop.py"), "--out",
                             str(tmp_path))
    assert code == 0, err
    run_dir = only_run_dir(tmp_path)
    for name in ("meta.json", "cases.jsonl", "report.json", "results.json", "junit.xml",
                 "report.html"):
        assert (run_dir / name).is_file(), name
    report = json.loads((run_dir / "report.json").read_text())
    assert report["totals"]["total"] == 10 and report["totals"]["passed"] == 10
    assert "shop-agent quickstart" in out


def test_case_file_with_agent_and_config(tmp_path, capsys):
    code, out, err = run_cli(
        capsys, "run", str(QUICKSTART / "shop.evalset.yaml"),
        "--agent", f"{QUICKSTART / 'shop_agent.py'}:shop_agent_turn",
        "--config", str(QUICKSTART / "eval_config.json"), "--out", str(tmp_path), "-q")
    assert code == 0, err
    assert out.startswith("3 passed, 0 failed, 0 errors")


SUITE_FILE = textwrap.dedent("""
    import os
    from referee import EvalCase, EvalSuite
    from referee.evaluators.deterministic import Contains

    suite = EvalSuite("cli-suite")
    suite.add_cases([EvalCase(input=f"q{i}", name=f"case {i}") for i in range(10)])
    suite.add_evaluator(Contains(["good"]))
    BAD = {int(x) for x in os.environ.get("BAD_CASES", "").split(",") if x}
    DOWN = {int(x) for x in os.environ.get("DOWN_CASES", "").split(",") if x}

    def model(prompt):
        if int(prompt[1:]) in DOWN:
            raise ConnectionError("model endpoint down")
        return "bad" if int(prompt[1:]) in BAD else "good"
""")


@pytest.fixture
def suite_file(tmp_path):
    path = tmp_path / "suite_def.py"
    path.write_text(SUITE_FILE)
    return path


def test_gate_failure_exits_1_with_the_gate_message(tmp_path, capsys, suite_file, monkeypatch):
    monkeypatch.setenv("BAD_CASES", "0,1,2")
    code, out, err = run_cli(capsys, "run", str(suite_file), "--out", str(tmp_path / "runs"),
                             "--fail-threshold", "0.9", "-q", "--format", "json")
    assert code == 1
    assert "Eval gate FAILED: pass rate 70.0% < threshold 90.0%" in err
    assert "the run is stored in" in err
    assert (only_run_dir(tmp_path / "runs") / "results.json").is_file()


def test_resume_through_the_cli_finishes_an_interrupted_run(tmp_path, capsys, suite_file):
    runs = tmp_path / "runs"
    assert run_cli(capsys, "run", str(suite_file), "--out", str(runs), "-q")[0] == 0
    run_dir = only_run_dir(runs)
    # Make it look interrupted after four cases.
    (run_dir / "report.json").unlink()
    lines = (run_dir / "cases.jsonl").read_text().splitlines()[:4]
    (run_dir / "cases.jsonl").write_text("\n".join(lines) + "\n")
    code, out, err = run_cli(capsys, "run", str(suite_file), "--resume", str(run_dir), "-q",
                             "--format", "json")
    assert code == 0, err
    assert out.startswith("10 passed")
    assert len((run_dir / "cases.jsonl").read_text().splitlines()) == 10
    assert list(runs.iterdir()) == [run_dir]


def test_retry_errors_through_the_cli_reruns_only_errored_cases(tmp_path, capsys, suite_file,
                                                               monkeypatch):
    runs = tmp_path / "runs"
    monkeypatch.setenv("DOWN_CASES", "2,5")
    code, out, err = run_cli(capsys, "run", str(suite_file), "--out", str(runs), "-q")
    assert out.startswith("8 passed, 0 failed, 2 errors"), out
    run_dir = only_run_dir(runs)
    monkeypatch.delenv("DOWN_CASES")
    code, out, err = run_cli(capsys, "run", str(suite_file), "--resume", str(run_dir), "-q",
                             "--retry-errors", "--format", "json")
    assert code == 0, err
    assert out.startswith("10 passed, 0 failed, 0 errors")
    # One line per case; the errored first scoring is kept whole in versions/1.
    assert len((run_dir / "cases.jsonl").read_text().splitlines()) == 10
    assert len((run_dir / "versions" / "1" / "cases.jsonl").read_text().splitlines()) == 10


def test_compare_detects_a_regression(tmp_path, capsys, suite_file, monkeypatch):
    base, cand = tmp_path / "base", tmp_path / "cand"
    assert run_cli(capsys, "run", str(suite_file), "--out", str(base), "-q")[0] == 0
    monkeypatch.setenv("BAD_CASES", "3")
    assert run_cli(capsys, "run", str(suite_file), "--out", str(cand), "-q")[0] == 0
    a, b = only_run_dir(base), only_run_dir(cand)

    code, out, _ = run_cli(capsys, "compare", str(a), str(b))
    assert code == 1
    assert "1 regression(s)" in out and "case 3" in out
    code, out, _ = run_cli(capsys, "compare", str(b), str(a), "--json")
    assert code == 0 and json.loads(out)["has_regressions"] is False
    code, out, _ = run_cli(capsys, "compare", str(a), str(a / "report.json"))
    assert code == 0
    # An interrupted candidate is no verdict: CI must not pass it.
    (a / "report.json").unlink()
    lines = (a / "cases.jsonl").read_text().splitlines()[:6]
    (a / "cases.jsonl").write_text("\n".join(lines) + "\n")
    code, out, _ = run_cli(capsys, "compare", str(b), str(a))
    assert code == 1 and "B is unfinished: 6 of 10 case(s) ran" in out


def test_list_shows_runs_newest_first(tmp_path, capsys, suite_file, monkeypatch):
    runs = tmp_path / "runs"
    monkeypatch.setenv("BAD_CASES", "0,1")
    run_cli(capsys, "run", str(suite_file), "--out", str(runs), "-q")
    code, out, _ = run_cli(capsys, "list", "--dir", str(runs))
    assert code == 0
    assert "cli-suite" in out and "pass 80.0%" in out


@pytest.mark.parametrize("argv", [
    [], ["run"], ["view"], ["compare"], ["list"],
])
def test_help_everywhere(capsys, argv):
    with pytest.raises(SystemExit) as info:
        main([*argv, "--help"])
    assert info.value.code == 0
    assert "usage: referee" in capsys.readouterr().out


@pytest.mark.parametrize(("command", "words"), [
    ("run", ("TARGET is either", "`suite` (an EvalSuite) and `model`", "`evaluator`",
             "a case file (.evalset.json, .json, .jsonl, .yaml, .csv)", "--agent FILE.py:FUNCTION",
             "130 interrupted", "--resume RUN_DIR")),
    ("view", ("127.0.0.1", "error rate >= 10% flagged", "two runs side by side")),
    ("compare", ("baseline", "candidate", "Exit code 1 when any case regressed")),
    ("list", ("newest first", "error rate >= 10% flagged", "interrupted")),
])
def test_each_command_help_says_what_it_does(capsys, command, words):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())  # argparse re-wraps descriptions
    for word in words:
        assert word in text, word


def _one_line_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("referee: error: ")
    assert "Traceback" not in err
    return lines[0]


def test_errors_are_one_line_with_a_nonzero_exit(tmp_path, capsys):
    (tmp_path / "empty.py").write_text("x = 1\n")
    (tmp_path / "crash.py").write_text("raise RuntimeError('no API key configured')\n")
    (tmp_path / "syntax.py").write_text("def broken(:\n")
    (tmp_path / "notes.txt").write_text("hi")
    (tmp_path / "cases.jsonl").write_text('{"input": "q"}\n')
    (tmp_path / "suite_only.py").write_text(
        "from referee import EvalSuite\nsuite = EvalSuite('x')\n")
    (tmp_path / "other.json").write_text('{"name": "not a run"}')
    cases = [
        (["run", str(tmp_path / "missing.py")], "missing.py: no such file"),
        (["run", str(tmp_path / "notes.txt")], "expected a Python file"),
        (["run", str(tmp_path / "empty.py")], "defines neither `suite` + `model`"),
        (["run", str(tmp_path / "suite_only.py")], "no callable `model`"),
        (["run", str(tmp_path / "crash.py")], "raised RuntimeError while loading: no API key"),
        (["run", str(tmp_path / "syntax.py")], "syntax.py:1: syntax error"),
        (["run", str(tmp_path / "cases.jsonl")], "needs --agent FILE.py:FUNCTION"),
        (["run", str(tmp_path / "cases.jsonl"), "--agent", "nocolon"], "expected FILE.py:FUNCTION"),
        (["run", str(QUICKSTART / "eval_shop.py"), "--format", "pdf"], "unknown report format 'pdf'"),
        (["run", str(QUICKSTART / "eval_shop.py"), "--fail-threshold", "2"],
         "expected a number between 0 and 1"),
        (["run", str(QUICKSTART / "eval_shop.py"), "--resume", str(tmp_path)],
         "not a referee run directory"),
        (["run", str(QUICKSTART / "eval_shop.py"), "--retry-errors"],
         "--retry-errors goes with --resume RUN_DIR"),
        (["compare", str(tmp_path / "a"), str(tmp_path / "b")], "no such run directory"),
        (["compare", str(tmp_path / "other.json"), str(tmp_path / "other.json")],
         "other.json: not a referee report"),
        (["view", str(tmp_path / "other.json")], "other.json: not a referee report"),
        (["view", str(tmp_path / "nothing")], "no such run directory or report file"),
        (["view", "--dir", str(tmp_path / "nothing")], "no such directory"),
        (["list", "--dir", str(tmp_path / "nothing")], "--dir " + str(tmp_path / "nothing")
         + ": no such directory"),
        (["frobnicate"], "invalid choice"),
        # Each of these gave a bare OS or socket error naming no option, or (--out) exit 130
        # with advice to resume a run that could never be made.
        (["run", str(QUICKSTART / "eval_shop.py"), "--out", str(tmp_path / "notes.txt")],
         str(tmp_path / "notes.txt") + "/"),
        (["run", str(tmp_path / "cases.jsonl"), "--agent", "x.py:f", "--config", str(tmp_path)],
         str(tmp_path) + ": cannot read file: Is a directory"),
        (["run", str(tmp_path / "cases.jsonl"), "--agent", "x.py:f", "--config",
          str(tmp_path / "missing.json")], "missing.json: file not found"),
        (["view", "--port", "70000"], "argument --port: expected a port from 0"),
        (["view", "--port", "-1"], "argument --port: expected a port from 0"),
        (["cache", "merge", str(tmp_path / "notes.txt"), "--into", str(tmp_path)],
         str(tmp_path) + ": cannot open as a judge cache"),
    ]
    for argv, expected in cases:
        code = main(argv)
        line = _one_line_error(capsys.readouterr().err)
        assert code == 2, argv
        assert expected in line, (argv, line)


def test_view_of_a_directory_of_runs_indexes_it(tmp_path, capsys, suite_file, monkeypatch):
    import referee.report.viewer as viewer

    runs = tmp_path / "runs"
    assert run_cli(capsys, "run", str(suite_file), "--out", str(runs), "-q")[0] == 0
    monkeypatch.delenv("REFEREE_RUNS_DIR", raising=False)
    served: list[tuple] = []
    monkeypatch.setattr(viewer, "serve", lambda target, runs_dir, port=0, labeller=None:
                        served.append((target, runs_dir, labeller)))
    assert main(["view", str(runs)]) == 0  # what --dir does, not a broken "run" page
    assert main(["view", str(only_run_dir(runs)), "--labeller", "ana"]) == 0
    assert served == [(None, runs, None), (only_run_dir(runs), Path(".referee/runs"), "ana")]


def test_bad_config_file_names_the_field(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"criteria": {"exact_match": {}}}))
    code = main(["run", str(QUICKSTART / "shop.evalset.yaml"), "--agent",
                 f"{QUICKSTART / 'shop_agent.py'}:shop_agent_turn", "--config", str(config)])
    line = _one_line_error(capsys.readouterr().err)
    assert code == 2 and "config.json" in line and "criteria.exact_match" in line


def test_the_installed_command_and_the_viewer_serve_the_index(tmp_path):
    runs = tmp_path / "runs"
    env = {**os.environ, "REFEREE_RUNS_DIR": str(runs)}
    done = subprocess.run([sys.executable, "-m", "referee.cli", "run",
                           str(QUICKSTART / "eval_shop.py"), "-q"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    run_id = only_run_dir(runs).name

    viewer = subprocess.Popen([sys.executable, "-m", "referee.cli", "view", "--dir", str(runs)],
                              stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = viewer.stderr.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/\S*", line)
        assert url, line
        with urllib.request.urlopen(url.group(0), timeout=30) as response:
            body = response.read().decode()
        assert response.status == 200 and run_id in body
        with urllib.request.urlopen(f"{url.group(0).rstrip('/')}/run/{run_id}", timeout=30) as r:
            assert "shop-agent quickstart" in r.read().decode()
    finally:
        viewer.terminate()
        viewer.wait(30)
        viewer.stderr.close()


def test_label_is_stored_and_shown(tmp_path, capsys, suite_file):
    runs = tmp_path / "runs"
    code, out, err = run_cli(capsys, "run", str(suite_file), "--out", str(runs),
                             "--label", "variant-b", "--format", "console,html,junit")
    assert code == 0, err
    run_dir = only_run_dir(runs)
    assert json.loads((run_dir / "meta.json").read_text())["model_id"] == "variant-b"
    assert json.loads((run_dir / "report.json").read_text())["model_id"] == "variant-b"
    assert "model: variant-b" in out
    assert "variant-b" in (run_dir / "report.html").read_text()
    assert '<property name="model_id" value="variant-b"' in (run_dir / "junit.xml").read_text()
    assert run_cli(capsys, "list", "--dir", str(runs))[1].count("[variant-b]") == 1


def test_format_decides_what_is_printed(tmp_path, capsys, suite_file):
    runs = tmp_path / "runs"
    code, out, err = run_cli(capsys, "run", str(suite_file), "--out", str(runs), "--format", "json")
    assert code == 0, err
    assert out == ""  # no console summary: only the file that was asked for
    run_dir = only_run_dir(runs)
    assert f"json report(s) written to {run_dir}" in err
    assert (run_dir / "results.json").is_file() and not (run_dir / "report.html").exists()


def test_piped_output_is_not_folded_and_names_cases_alike(tmp_path):
    """In a CI log (stdout not a terminal) a long failure line stays one line, and the progress
    lines name a case the way the failure list does: its name, else its input, else its id."""
    long_input = "Where is the order that I placed last Tuesday for the blue ceramic teapot " * 2
    suite = tmp_path / "long_suite.py"
    suite.write_text(textwrap.dedent(f"""
        from referee import EvalCase, EvalSuite
        from referee.evaluators.deterministic import Contains
        suite = EvalSuite("long-names")
        suite.add_cases([EvalCase(input={long_input.strip()!r})])
        suite.add_evaluator(Contains([f"keyword-number-{{i}}" for i in range(12)]))
        def model(prompt):
            return "not yet"
    """))
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-m", "referee.cli", "run", str(suite), "--out", str(tmp_path / "runs"),
         "--format", "console"],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    label = long_input.strip()[:50]
    failure_lines = [line for line in proc.stdout.splitlines() if "FAILED" in line]
    assert failure_lines and label in failure_lines[0], proc.stdout
    progress = [line for line in proc.stderr.splitlines() if "FAILED" in line]
    assert progress and label in progress[0], proc.stderr
    reason = [line for line in proc.stdout.splitlines() if "contains (0.00 < 1.00)" in line]
    assert reason and len(reason[0]) > 100, proc.stdout  # one line, not folded at 80 columns


@pytest.mark.parametrize("argv,code", [
    (["list"], 141), (["compare", "A", "B"], 141), (["cache", "stats"], 141),
    (["run", "--help"], 0),  # argparse drops what it cannot print and exits as usual
])
def test_output_to_a_closed_pipe_ends_quietly(tmp_path, capsys, suite_file, argv, code):
    """`referee list | head -1`: once the reader is gone, no BrokenPipeError and no traceback,
    only the exit status of a process ended by SIGPIPE."""
    runs = tmp_path / "runs"
    run_cli(capsys, "run", str(suite_file), "--out", str(runs), "-q")
    run_cli(capsys, "run", str(suite_file), "--out", str(runs), "-q")
    first, second = sorted(str(p) for p in runs.iterdir())
    argv = [{"A": first, "B": second}.get(a, a) for a in argv]
    if argv == ["list"]:
        argv += ["--dir", str(runs)]
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone before referee writes a byte
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path, REFEREE_CACHE_DIR=str(tmp_path / "cache"))
    try:
        done = subprocess.run([sys.executable, "-m", "referee.cli", *argv], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120, env=env,
                              cwd=tmp_path)
    finally:
        os.close(write_end)
    assert done.stderr == "" and done.returncode == code, done.stderr


def test_a_run_with_no_reachable_judge_says_so_before_the_first_case(tmp_path, capsys,
                                                                     monkeypatch):
    """`referee run cases.yaml --agent ...` with the default EvalConfig and no key: the judged
    criterion cannot be judged. Said once, before any case, with how to pick a judge or go
    without; the run itself keeps the documented 0.5 placeholder, counted as JUDGE_ERROR."""
    for name in ("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "JUDGE_MODEL",
                 "JUDGE_PROVIDER", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    code, _, err = run_cli(capsys, "run", str(QUICKSTART / "shop.evalset.yaml"),
                           "--agent", f"{QUICKSTART / 'shop_agent.py'}:shop_agent",
                           "--out", str(tmp_path))
    lines = err.splitlines()
    first_case = next(i for i, line in enumerate(lines) if line.startswith("referee: [1/"))
    [problem] = [i for i, line in enumerate(lines) if "no judge is reachable" in line]
    assert problem < first_case
    assert "gemini-2.5-flash: a Google model, and GOOGLE_API_KEY (or GEMINI_API_KEY) is not set" \
        in lines[problem]
    advice = lines[problem + 1]
    for hint in ("--config EVAL_CONFIG.json", "judge_model", "OPENAI_BASE_URL=",
                 "deterministic criteria only"):
        assert hint in advice
    assert code == 3  # nothing evaluated: every case a JUDGE_ERROR, as documented
    report = json.loads((only_run_dir(tmp_path) / "report.json").read_text())
    assert report["totals"]["errors_by_kind"] == {"judge_error": 3}
