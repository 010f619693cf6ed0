"""Issue 10, section 4: the run store under damage, rivalry and a full disk, and resume safety.

* a torn last line that cuts a multi-byte character, a garbled line in the middle, a run
  directory whose meta.json is garbage: handled line by line and run by run;
* two processes resuming one run: the second refuses at once, naming the first; a lock left
  by a dead process is taken over;
* a write failure of the store (the file-size limit of the process, a real EFBIG from the
  kernel, stands in for a full disk): one line, exit 130, and --resume completes the run;
* resuming with other criteria is refused, naming the difference, unless --rescore.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from referee import EvalCase, EvalSuite
from referee.cli import main
from referee.errors import InputError
from referee.evaluators.deterministic import Contains
from referee.report.model import CaseStatus
from referee.report.store import DAMAGED_LINES_FILE, LOCK_FILE, RunStore, list_runs, load_run
from referee.report.viewer import start_viewer

ANSWER = "Les remboursements sont acceptés sous 30 jours — 日本語の説明"


def _suite(name: str, n: int, needle: str = "30 jours") -> EvalSuite:
    suite = EvalSuite(name)
    suite.add_cases([EvalCase(input=f"question {i}", name=f"case {i}") for i in range(n)])
    suite.add_evaluator(Contains([needle]))
    return suite


class CountingModel:
    def __init__(self) -> None:
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        return ANSWER


def _stored_run(runs: Path, name: str, n: int) -> Path:
    report = _suite(name, n).run(CountingModel(), verbose=False, runs_dir=runs)
    return Path(report.metadata["run_dir"])


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode("utf-8")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8")


def test_damaged_runs_are_shown_as_damaged_and_resume_reruns_only_their_cases(tmp_path, capsys):
    runs = tmp_path / "runs"
    damaged = _stored_run(runs, "damaged", 6)
    broken = _stored_run(runs, "broken", 2)
    whole = _stored_run(runs, "whole", 3)

    # The damaged run was killed: no report.json, a garbled line 3 and a torn last line that
    # stops inside a multi-byte character (the bytes of 日 are e6 97 a5).
    (damaged / "report.json").unlink()
    lines = (damaged / "cases.jsonl").read_bytes().split(b"\n")[:-1]
    assert len(lines) == 6
    lines[2] = lines[2][:40] + b"\xff\xfe garbage" + lines[2][60:]
    cut = lines[5].index("日".encode()) + 1
    (damaged / "cases.jsonl").write_bytes(b"\n".join(lines[:5]) + b"\n" + lines[5][:cut])
    names = [json.loads(line)["name"] for line in lines[:2] + lines[3:5]]
    # The broken run's meta.json and report.json are both garbage.
    (broken / "meta.json").write_bytes(b"\x00{ not json")
    (broken / "report.json").write_text("[1, 2", encoding="utf-8")

    # referee list: every run listed, the two bad ones as damaged, the whole one as usual.
    assert main(["list", "--dir", str(runs)]) == 0
    out = capsys.readouterr().out.splitlines()
    line_of = {run.name: next(line for line in out if line.startswith(run.name))
               for run in (damaged, broken, whole)}
    assert "(damaged: cases.jsonl line 3: unreadable" in line_of[damaged.name]
    assert "(+1 more)" in line_of[damaged.name]
    assert "damaged: unreadable" in line_of[broken.name] and "meta.json" in line_of[broken.name]
    assert "damaged" not in line_of[whole.name] and "3/3" in line_of[whole.name]

    info = {run.path.name: run for run in list_runs(runs)}
    assert info[damaged.name].damaged[1].startswith("cases.jsonl line 6: torn")
    assert info[damaged.name].passed == 4 and info[damaged.name].total == 6
    report = load_run(damaged)
    assert [c.name for c in report.cases] == names

    # referee view: the index shows both as damaged; each readable run opens.
    with start_viewer(None, runs) as viewer:
        status, index = _get(viewer.base_url + "/")
        assert status == 200 and index.count("damaged:") == 2
        status, page = _get(f"{viewer.base_url}/run/{damaged.name}")
        assert status == 200 and "cases.jsonl line 3: unreadable" in page
        assert _get(f"{viewer.base_url}/run/{whole.name}")[0] == 200
        status, page = _get(f"{viewer.base_url}/run/{broken.name}")
        assert status == 500 and "this run cannot be read" in page

    # Resume runs exactly the two damaged cases again, and the run is whole afterwards.
    model = CountingModel()
    resumed = _suite("damaged", 6).run(model, verbose=False, resume=damaged)
    assert sorted(model.prompts) == ["question 2", "question 5"]
    assert resumed.passed == 6 and "damaged" not in resumed.metadata
    assert len((damaged / "cases.jsonl").read_text(encoding="utf-8").splitlines()) == 6
    assert (damaged / DAMAGED_LINES_FILE).read_bytes().count(b"\n") == 2
    assert not (damaged / LOCK_FILE).exists()
    assert not load_run(damaged).warnings


SLOW_SUITE = textwrap.dedent("""
    import os, time
    from referee import EvalCase, EvalSuite
    from referee.evaluators.deterministic import Contains

    suite = EvalSuite("slow")
    suite.add_cases([EvalCase(input=f"question {i}", name=f"case {i}") for i in range(int(os.environ["N_CASES"]))])
    suite.add_evaluator(Contains(["30 days"]))

    def model(prompt):
        # Held until the test lets go (RELEASE_FILE appears), so the run is surely still going.
        release = os.environ.get("RELEASE_FILE")
        deadline = time.monotonic() + 60
        while release and not os.path.exists(release) and time.monotonic() < deadline:
            time.sleep(0.02)
        return "Refunds within 30 days. " + "padding " * 40
""")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "REFEREE_DEBUG"}
    env.update(REFEREE_CACHE="0", PYTHONDONTWRITEBYTECODE="1", **extra)
    return env


def _cli(*argv: str, env: dict[str, str], **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "referee.cli", *argv], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def _interrupted_run(tmp_path: Path, n: int, monkeypatch) -> tuple[Path, Path]:
    """A stored run of ``n`` cases with none finished: its report and case lines removed."""
    suite_file = tmp_path / "slow_suite.py"
    suite_file.write_text(SLOW_SUITE)
    runs = tmp_path / "runs"
    monkeypatch.setenv("N_CASES", str(n))
    assert main(["run", str(suite_file), "--out", str(runs), "-q", "--format", "json"]) == 0
    [run_dir] = list(runs.iterdir())
    (run_dir / "report.json").unlink()
    (run_dir / "cases.jsonl").write_text("")
    return suite_file, run_dir


def test_a_second_writer_is_refused_at_once_naming_the_first(tmp_path: Path, monkeypatch) -> None:
    suite_file, run_dir = _interrupted_run(tmp_path, 8, monkeypatch)
    release = tmp_path / "release"
    env = _env(N_CASES="8", RELEASE_FILE=str(release))
    first = _cli("run", str(suite_file), "--resume", str(run_dir), "--concurrency", "1", "-q",
                 "--format", "json", env=env)
    try:
        deadline = time.monotonic() + 60
        while not (run_dir / LOCK_FILE).exists():
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.02)
        second = _cli("run", str(suite_file), "--resume", str(run_dir), "-q", "--format",
                      "json", env=env)
        out, err = second.communicate(timeout=60)
        assert second.returncode == 2, err
        assert first.poll() is None
        [line] = err.strip().splitlines()
        assert f"being written by process {first.pid}" in line and str(run_dir) in line
        assert (run_dir / "cases.jsonl").read_text() == ""  # the refused one wrote nothing
        release.write_text("go")
        out, err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert first.returncode == 0, err
    assert out.startswith("8 passed")
    assert not (run_dir / LOCK_FILE).exists()  # released on exit


def test_a_lock_left_by_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_dir = _stored_run(runs, "stale", 3)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    import socket

    (run_dir / LOCK_FILE).write_text(f"{dead.pid} {socket.gethostname()}\n")
    (run_dir / "report.json").unlink()
    report = _suite("stale", 3).run(CountingModel(), verbose=False, resume=run_dir)
    assert report.passed == 3
    assert not (run_dir / LOCK_FILE).exists()
    # A live holder (a writer in this test process) is not taken over.
    holder = RunStore(run_dir)
    holder.lock()
    try:
        with pytest.raises(InputError, match=f"being written by process {os.getpid()}"):
            _suite("stale", 3).run(CountingModel(), verbose=False, resume=run_dir)
    finally:
        holder.unlock()
    assert (run_dir / "report.json").is_file()  # the refused resume changed nothing


def _file_size_limit(limit: int):
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_a_store_write_failure_ends_the_run_as_interrupted_and_resume_completes_it(
        tmp_path: Path) -> None:
    suite_file = tmp_path / "slow_suite.py"
    suite_file.write_text(SLOW_SUITE)
    runs = tmp_path / "runs"
    env = _env(N_CASES="40")
    proc = _cli("run", str(suite_file), "--out", str(runs), "-q", "--format", "json",
                env=env, preexec_fn=_file_size_limit(16_000))
    out, err = proc.communicate(timeout=120)
    [run_dir] = list(runs.iterdir())
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err
    [line] = err.strip().splitlines()
    assert line.startswith(f"referee: error: cannot write the run store in {run_dir}")
    assert "File too large" in line and f"--resume {run_dir}" in line
    assert not (run_dir / "report.json").exists() and not (run_dir / LOCK_FILE).exists()
    kept = load_run(run_dir)
    assert 0 < len(kept.cases) < 40

    resumed = _cli("run", str(suite_file), "--resume", str(run_dir), "-q", "--format", "json",
                   env=env)
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    assert out.startswith("40 passed, 0 failed, 0 errors")
    assert [c.name for c in load_run(run_dir).cases] == [f"case {i}" for i in range(40)]


def test_resume_refuses_changed_criteria_unless_rescore(tmp_path: Path, capsys) -> None:
    runs = tmp_path / "runs"
    run_dir = _stored_run(runs, "rescore-me", 4)
    before = (run_dir / "report.json").read_bytes()

    model = CountingModel()
    with pytest.raises(InputError) as refused:
        _suite("rescore-me", 4, needle="60 jours").run(model, verbose=False, resume=run_dir)
    message = str(refused.value)
    assert "criteria differ from the stored run's" in message and "\n" not in message
    assert """criterion 'contains' substrings: ["30 jours"] -> ["60 jours"]""" in message
    assert (run_dir / "report.json").read_bytes() == before and model.prompts == []
    # Other thresholds and added criteria are named too.
    more = _suite("rescore-me", 4)
    more.add_evaluator(Contains(["日本語"]))
    with pytest.raises(InputError, match=r"the stored run has 1 criteria \(contains\), this one "
                                         r"has 2 \(contains, contains\)"):
        more.run(model, verbose=False, resume=run_dir)

    # --rescore: the stored outputs are scored with the new criterion; the model is not called.
    rescored = _suite("rescore-me", 4, needle="60 jours").run(
        model, verbose=False, resume=run_dir, rescore=True)
    assert model.prompts == []
    assert [c.status for c in rescored.cases] == [CaseStatus.FAILED] * 4
    assert rescored.metadata["rescored"] is True
    assert all(c.actual_response == ANSWER for c in load_run(run_dir).cases)
    # The stored run now belongs to the new criteria: resuming with them is accepted...
    _suite("rescore-me", 4, needle="60 jours").run(model, verbose=False, resume=run_dir)
    assert model.prompts == []
    # ...and through the CLI, the old ones are refused in one line, then re-scored on request.
    suite_file = tmp_path / "suite.py"
    suite_file.write_text(textwrap.dedent("""
        from referee import EvalCase, EvalSuite
        from referee.evaluators.deterministic import Contains
        suite = EvalSuite("rescore-me")
        suite.add_cases([EvalCase(input=f"question {i}", name=f"case {i}") for i in range(4)])
        suite.add_evaluator(Contains(["30 jours"]))
        def model(prompt):
            raise AssertionError("the model must not be called when re-scoring")
    """))
    assert main(["run", str(suite_file), "--resume", str(run_dir), "-q"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--rescore" in err
    assert main(["run", str(suite_file), "--resume", str(run_dir), "--rescore", "-q",
                 "--format", "json"]) == 0
    assert capsys.readouterr().out.startswith("4 passed, 0 failed, 0 errors")


def test_what_counts_as_changed_criteria() -> None:
    from pydantic import SecretStr

    from referee.evaluators import CustomRubric, GEval
    from referee.judge import JudgeConfig
    from referee.run.session import criteria_difference, describe_criteria

    def rubric(**judge: object) -> CustomRubric:
        settings = {"provider": "openai", "model": "gpt-4o-mini", "api_key": SecretStr("sk-x1"),
                    "base_url": "http://user:hunter2@127.0.0.1:8001/v1", **judge}
        config = JudgeConfig(**settings)
        return CustomRubric([("Is it polite?", True)], judge=config)

    stored = describe_criteria([rubric(max_retries=1), GEval("concise")])
    assert "hunter2" not in json.dumps(stored) and "sk-x1" not in json.dumps(stored)
    # How the judge is reached and paced may change on resume...
    same = describe_criteria([rubric(max_retries=5, timeout=9.0), GEval("concise")])
    assert criteria_difference(stored, same) is None
    # ...what it judges, and how, may not.
    other_model = describe_criteria([rubric(model="gpt-4o", max_retries=1), GEval("concise")])
    assert criteria_difference(stored, other_model) == \
        'criterion \'custom_rubric\' judge.model: "gpt-4o-mini" -> "gpt-4o"'
    other_runs = describe_criteria([rubric(max_retries=1), GEval("concise", runs=3)])
    assert criteria_difference(stored, other_runs) == "criterion 'g_eval' runs: 2 -> 3"
    swapped = criteria_difference(stored, describe_criteria([GEval("concise"), rubric()]))
    assert swapped.startswith("the stored run has 2 criteria")
