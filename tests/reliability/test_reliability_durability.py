"""Durability trust hunt: run directories whose metadata lies about its own shape, and resumes
that would mix results the stored run never produced (another judge, other cases, a half-done
re-score). Each test failed before its fix."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from referee import EvalCase, EvalSuite
from referee.cli import main
from referee.errors import InputError
from referee.evaluators.deterministic import Contains
from referee.report.html import render_html
from referee.report.store import list_runs, load_run


def _suite(name: str, n: int, needle: str = "yes") -> EvalSuite:
    suite = EvalSuite(name)
    suite.add_cases([EvalCase(input=f"question {i}", eval_id=f"q{i}") for i in range(n)])
    suite.add_evaluator(Contains([needle]))
    return suite


def _stored_run(runs: Path, name: str, n: int) -> Path:
    report = _suite(name, n).run(lambda prompt: "yes", verbose=False, runs_dir=runs)
    return Path(report.metadata["run_dir"])


def _interrupt(run_dir: Path, keep: int) -> None:
    """What a kill leaves: no report.json, and only the first ``keep`` case lines."""
    (run_dir / "report.json").unlink()
    lines = (run_dir / "cases.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (run_dir / "cases.jsonl").write_text("".join(lines[:keep]), encoding="utf-8")


@pytest.mark.parametrize(("field", "value", "expected"), [
    ("metadata", [1], "a JSON object"),
    ("case_ids", 5, "a list of case ids"),
    ("case_ids", [[1]], "a list of case ids"),
    ("started_at", "yesterday", "a number"),
    ("judge", "gpt", "a JSON object"),
    ("run_id", 5, "a string"),
])
def test_a_meta_json_field_of_the_wrong_type_is_one_line_and_hides_no_other_run(
        tmp_path: Path, capsys, field: str, value: object, expected: str) -> None:
    runs = tmp_path / "runs"
    whole = _stored_run(runs, "whole", 2)
    broken = _stored_run(runs, "broken", 2)
    _interrupt(broken, keep=1)
    meta = json.loads((broken / "meta.json").read_text(encoding="utf-8"))
    meta[field] = value
    (broken / "meta.json").write_text(json.dumps(meta), encoding="utf-8")

    assert main(["list", "--dir", str(runs)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2, out  # one line per run, the damaged one's reason on its own line
    [broken_line] = [line for line in out if line.startswith(broken.name)]
    assert "damaged" in broken_line and "meta.json" in broken_line
    assert f"field '{field}'" in broken_line and expected in broken_line
    assert any(line.startswith(whole.name) and "2/2" in line for line in out)

    with pytest.raises(InputError, match=rf"meta\.json: field '{field}'.*expected {expected}"):
        load_run(broken)
    assert main(["compare", str(whole), str(broken)]) == 2
    [err] = capsys.readouterr().err.strip().splitlines()
    assert "meta.json" in err and f"field '{field}'" in err
    assert [run.path for run in list_runs(runs) if run.damaged] == [broken]


def _judged_suite(n: int) -> EvalSuite:
    from referee.evaluators import CustomRubric

    suite = EvalSuite("judged")
    suite.add_cases([EvalCase(input=f"question {i}", eval_id=f"q{i}") for i in range(n)])
    suite.add_evaluator(CustomRubric([("Is the answer polite?", True)]))  # the configured judge
    return suite


def test_resume_refuses_a_judge_changed_outside_the_criteria_unless_rescore(
        tmp_path: Path, judge_server, isolated_judge) -> None:
    from referee.judge import configure

    judge_server.set_reply("Yes")
    configure(judge_server.judge_config(model="judge-a"))
    first = _judged_suite(3).run(lambda prompt: "Thank you!", verbose=False,
                                 runs_dir=tmp_path / "runs", concurrency=1)
    run_dir = Path(first.metadata["run_dir"])
    _interrupt(run_dir, keep=1)

    # Another judge model, set where the criteria do not record it (configure(), or the
    # JUDGE_MODEL environment): case q0 was judged by judge-a, the rest would be by judge-b.
    configure(judge_server.judge_config(model="judge-b"))
    judge_server.reset_record()
    with pytest.raises(InputError) as refused:
        _judged_suite(3).run(lambda prompt: "Thank you!", verbose=False, resume=run_dir)
    message = str(refused.value)
    assert "\n" not in message and str(run_dir) in message
    assert 'judge model: "judge-a" -> "judge-b"' in message and "--rescore" in message
    assert judge_server.requests == [] and not (run_dir / "report.json").exists()

    # How the judge is reached may change (a restarted local server); what it is may not.
    configure(judge_server.judge_config(model="judge-a", base_url=judge_server.url + "/v1"))
    resumed = _judged_suite(3).run(lambda prompt: "Thank you!", verbose=False, resume=run_dir)
    assert resumed.passed == 3 and {r.model for r in judge_server.requests} == {"judge-a"}

    # --rescore: every stored output judged again by judge-b, and the run is judge-b's now.
    configure(judge_server.judge_config(model="judge-b"))
    judge_server.reset_record()
    rescored = _judged_suite(3).run(lambda prompt: "Thank you!", verbose=False, resume=run_dir,
                                    rescore=True)
    assert rescored.passed == 3 and [r.model for r in judge_server.requests] == ["judge-b"] * 3
    assert load_run(run_dir).judge["model"] == "judge-b"
    _judged_suite(3).run(lambda prompt: "Thank you!", verbose=False, resume=run_dir)


RESCORED_SUITE = '''
import os, time
from referee import EvalCase, EvalSuite, Evaluator

class Mentions(Evaluator):
    name = "mentions"

    def __init__(self, word, threshold=1.0):
        super().__init__(threshold=threshold)
        self.word = word

    def evaluate(self, case, output, latency_ms=None):
        stall = os.environ.get("STALL_FILE")
        if stall and case.eval_id != "q0":  # held here until the test kills the process
            open(stall, "w").close()
            time.sleep(120)
        return self._result(1.0 if self.word in output else 0.0, f"looked for {self.word}")

suite = EvalSuite("rescore-kill")
suite.add_cases([EvalCase(input=f"question {i}", eval_id=f"q{i}") for i in range(3)])
suite.add_evaluator(Mentions(os.environ["WORD"]))

def model(prompt):
    if os.environ.get("NO_MODEL"):
        raise AssertionError("a re-score must not call the model")
    return "yes"
'''


def test_a_rescore_killed_half_way_is_finished_only_by_rescore(tmp_path: Path) -> None:
    suite_file = tmp_path / "rescored_suite.py"
    suite_file.write_text(RESCORED_SUITE, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "REFEREE_DEBUG"}
    env.update(REFEREE_CACHE="0", PYTHONDONTWRITEBYTECODE="1")

    def cli(*argv: str, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "referee.cli", "run", str(suite_file), *argv,
                               "-q", "--format", "json"], env={**env, **extra},
                              capture_output=True, text=True, timeout=120)

    runs = tmp_path / "runs"
    assert cli("--out", str(runs), WORD="yes").returncode == 0
    [run_dir] = list(runs.iterdir())
    cases = run_dir / "cases.jsonl"

    # Re-score with another word, killed once q0's new score is written and q1's is under way.
    stall = tmp_path / "stalled"
    rescore = subprocess.Popen(
        [sys.executable, "-m", "referee.cli", "run", str(suite_file), "--resume", str(run_dir),
         "--rescore", "--concurrency", "1", "-q", "--format", "json"],
        env={**env, "WORD": "no", "NO_MODEL": "1", "STALL_FILE": str(stall)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not (stall.exists() and len(cases.read_text(encoding="utf-8").splitlines()) == 4):
            assert rescore.poll() is None and time.monotonic() < deadline, rescore.communicate()
            time.sleep(0.02)
        rescore.send_signal(signal.SIGKILL)
    finally:
        rescore.communicate(timeout=60)
    assert not (run_dir / "report.json").exists()

    # cases.jsonl now holds q0 scored for "no" and q1, q2 scored for "yes": a plain resume with
    # either criterion would call that mixture one finished run. Both are refused in one line.
    for word in ("yes", "no"):
        refused = cli("--resume", str(run_dir), WORD=word, NO_MODEL="1")
        assert refused.returncode == 2, refused.stderr
        [line] = refused.stderr.strip().splitlines()
        assert "re-score" in line and "--rescore" in line and str(run_dir) in line
        assert not (run_dir / "report.json").exists()

    finished = cli("--resume", str(run_dir), "--rescore", WORD="no", NO_MODEL="1")
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.startswith("0 passed, 3 failed, 0 errors")
    report = load_run(run_dir)
    assert [c.criterion_results[0].reason for c in report.cases] == ["looked for no"] * 3
    # Finished, the run is the new criteria's: a plain resume with them is accepted again.
    assert cli("--resume", str(run_dir), WORD="no", NO_MODEL="1").returncode == 0


def _exact_suite(expected: list[str]) -> EvalSuite:
    from referee.evaluators.deterministic import ExactMatch

    suite = EvalSuite("exact")
    suite.add_cases([EvalCase(input=f"question {i}", expected_output=answer, eval_id=f"q{i}")
                     for i, answer in enumerate(expected)])
    suite.add_evaluator(ExactMatch())
    return suite


def test_resume_refuses_a_finished_case_whose_content_changed_under_its_id(
        tmp_path: Path, capsys) -> None:
    first = _exact_suite(["yes", "yes", "yes"]).run(lambda prompt: "yes", verbose=False,
                                                    runs_dir=tmp_path / "runs")
    run_dir = Path(first.metadata["run_dir"])
    _interrupt(run_dir, keep=2)
    cases_before = (run_dir / "cases.jsonl").read_bytes()

    # q1 was scored against "yes"; its expectation is "no" now, under the same id. Kept, its
    # stored PASSED would be reported as a pass against "no".
    model_calls: list[str] = []
    with pytest.raises(InputError) as refused:
        _exact_suite(["yes", "no", "yes"]).run(lambda p: model_calls.append(p) or "yes",
                                               verbose=False, resume=run_dir)
    message = str(refused.value)
    assert "\n" not in message and str(run_dir) in message
    assert "case 'q1'" in message and "expected_output" in message and '"yes" -> "no"' in message
    assert "--rescore" in message and model_calls == []
    assert (run_dir / "cases.jsonl").read_bytes() == cases_before

    # A case that has not run yet may change: nothing stored speaks for it.
    resumed = _exact_suite(["yes", "yes", "no"]).run(lambda p: "yes", verbose=False,
                                                     resume=run_dir)
    assert [c.status.value for c in resumed.cases] == ["PASSED", "PASSED", "FAILED"]

    # --rescore scores the stored outputs against the cases given now.
    rescored = _exact_suite(["yes", "no", "no"]).run(lambda p: model_calls.append(p) or "yes",
                                                     verbose=False, resume=run_dir, rescore=True)
    assert [c.status.value for c in rescored.cases] == ["PASSED", "FAILED", "FAILED"]
    assert model_calls == []


@pytest.mark.parametrize("loss", ["truncated", "emptied", "deleted"])
def test_a_finished_run_whose_case_lines_were_lost_is_not_compared_as_whole(
        tmp_path: Path, capsys, loss: str) -> None:
    runs = tmp_path / "runs"
    baseline = _stored_run(runs, "baseline", 4)
    candidate = _stored_run(runs, "candidate", 4)
    cases = candidate / "cases.jsonl"
    lines = cases.read_text(encoding="utf-8").splitlines(keepends=True)
    if loss == "deleted":
        cases.unlink()
    else:
        cases.write_text("".join(lines[:2] if loss == "truncated" else []), encoding="utf-8")
    kept = 2 if loss == "truncated" else 0

    # report.json still counts 4 cases; compare read the 2 (or 0) left and exited 0.
    assert main(["compare", str(baseline), str(candidate)]) == 2
    [err] = capsys.readouterr().err.strip().splitlines()
    assert "cases.jsonl" in err and f"holds {kept} case(s)" in err and "recorded 4" in err
    assert f"--resume {candidate}" in err
    with pytest.raises(InputError, match="holds"):
        list(load_run(candidate).cases)

    # As the message says, a resume runs the lost cases again, and the run is whole.
    model_calls: list[str] = []
    resumed = _suite("candidate", 4).run(lambda p: model_calls.append(p) or "yes",
                                         verbose=False, resume=candidate)
    assert sorted(model_calls) == [f"question {i}" for i in range(kept, 4)]
    assert resumed.passed == 4
    assert main(["compare", str(baseline), str(candidate)]) == 0


HELD_SUITE = '''
import os, time
from referee import EvalCase, EvalSuite
from referee.evaluators.deterministic import Contains

suite = EvalSuite("held")
suite.add_cases([EvalCase(input=f"question {i}", eval_id=f"q{i}") for i in range(3)])
suite.add_evaluator(Contains(["yes"]))

def model(prompt):
    if prompt != "question 0":  # held until the test lets go, so the run is surely going on
        deadline = time.monotonic() + 60
        while not os.path.exists(os.environ["RELEASE_FILE"]) and time.monotonic() < deadline:
            time.sleep(0.02)
    return "yes"
'''


def test_a_run_being_written_is_listed_as_running_not_interrupted(tmp_path: Path, capsys) -> None:
    suite_file = tmp_path / "held_suite.py"
    suite_file.write_text(HELD_SUITE, encoding="utf-8")
    runs, release = tmp_path / "runs", tmp_path / "release"
    env = {k: v for k, v in os.environ.items() if k != "REFEREE_DEBUG"}
    env.update(REFEREE_CACHE="0", PYTHONDONTWRITEBYTECODE="1", RELEASE_FILE=str(release))
    argv = [sys.executable, "-m", "referee.cli", "run", str(suite_file), "--out", str(runs),
            "--concurrency", "1", "-q", "--format", "json"]

    def held_run() -> tuple[subprocess.Popen, Path]:
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while True:
            started = [d for d in runs.glob("*") if (d / "cases.jsonl").is_file()]
            if started and (started[0] / "cases.jsonl").read_bytes().count(b"\n") == 1:
                return proc, started[0]
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.02)

    proc, run_dir = held_run()
    try:
        # "interrupted" (and the viewer's "finish it with --resume", which a live writer's
        # lock refuses) was said of a run that is going on.
        assert main(["list", "--dir", str(runs)]) == 0
        [line] = capsys.readouterr().out.splitlines()
        assert "(running)" in line and "interrupted" not in line
        report = load_run(run_dir)
        assert report.metadata["running"] is True
        page = render_html(report)
        assert "still running" in page and "--resume" not in page
        release.write_text("go")
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert main(["list", "--dir", str(runs)]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert "running" not in line and "interrupted" not in line and "3/3" in line

    # Killed, the writer leaves its lock file behind: the run is interrupted, not running.
    release.unlink()
    for done in list(runs.iterdir()):
        shutil.rmtree(done)
    proc, run_dir = held_run()
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert (run_dir / ".lock").exists()
    assert main(["list", "--dir", str(runs)]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert "(interrupted)" in line and "running" not in line
    assert "--resume" in render_html(load_run(run_dir))


def test_a_run_directory_that_cannot_be_created_is_bad_input_not_an_interrupted_run(
        tmp_path: Path, capsys) -> None:
    suite_file = tmp_path / "suite.py"
    suite_file.write_text(
        "from referee import EvalCase, EvalSuite\n"
        "from referee.evaluators.deterministic import Contains\n"
        "suite = EvalSuite('s')\n"
        "suite.add_cases([EvalCase(input='question', eval_id='q0')])\n"
        "suite.add_evaluator(Contains(['yes']))\n"
        "def model(prompt):\n"
        "    raise AssertionError('nothing may run without a run directory')\n",
        encoding="utf-8")
    not_a_dir = tmp_path / "runs.txt"
    not_a_dir.write_text("a file where the runs directory should be", encoding="utf-8")
    # It exited 130 ("interrupted ... rerun with --resume DIR") for a run that never started,
    # naming a directory that does not exist.
    for out in (not_a_dir, not_a_dir / "nested"):
        assert main(["run", str(suite_file), "--out", str(out), "-q"]) == 2
        [err] = capsys.readouterr().err.strip().splitlines()
        assert str(not_a_dir) in err and "Not a directory" in err and "--resume" not in err
    with pytest.raises(InputError, match="cannot create the run directory"):
        _suite("s", 1).run(lambda p: "yes", verbose=False, runs_dir=not_a_dir)
    assert not_a_dir.read_text(encoding="utf-8").startswith("a file")


def test_retry_errors_follows_each_cases_last_record(tmp_path: Path) -> None:
    run_dir = _stored_run(tmp_path / "runs", "retry", 2)
    lines = (run_dir / "cases.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    # q1 passed, then was recorded again ending in an error (a re-score whose judge failed).
    errored = json.loads(lines[1])
    errored.update(status="MODEL_ERROR", error="boom")
    (run_dir / "cases.jsonl").write_text("".join(lines) + json.dumps(errored) + "\n",
                                         encoding="utf-8")
    (run_dir / "report.json").unlink()
    model_calls: list[str] = []
    resumed = _suite("retry", 2).run(lambda p: model_calls.append(p) or "yes", verbose=False,
                                     resume=run_dir, retry_errors=True)
    assert model_calls == ["question 1"] and resumed.passed == 2


def test_a_listing_probing_the_lock_does_not_refuse_a_starting_writer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # has_live_writer holds a shared lock for an instant; a resume that starts in that instant
    # must wait it out, not report the run as taken by another writer.
    import fcntl

    from referee.report import store as store_module
    from referee.report.store import RunStore

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    store = RunStore(run_dir)
    store.lock_path.write_text("")
    probe = os.open(store.lock_path, os.O_RDONLY)
    fcntl.flock(probe, fcntl.LOCK_SH | fcntl.LOCK_NB)
    real_sleep = time.sleep

    def probe_ends_while_the_writer_waits(seconds: float) -> None:
        nonlocal probe
        if probe >= 0:
            os.close(probe)  # closing ends the probe's shared lock
            probe = -1
        real_sleep(seconds)

    monkeypatch.setattr(store_module.time, "sleep", probe_ends_while_the_writer_waits)
    store.lock()  # refused with RunInUse before
    assert probe == -1  # it did meet the probe, and waited
    assert store.lock_path.read_text().split()[0] == str(os.getpid())
    store.unlock()
