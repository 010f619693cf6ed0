"""Stored runs: a run killed mid-way keeps its finished cases, and resume finishes it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from referee import EvalCase, EvalSuite
from referee.errors import InputError
from referee.evaluators.deterministic import Contains
from referee.report.json_report import render_json
from referee.report.model import CaseResult, CaseStatus, EvalReport
from referee.report.store import LOCK_FILE, RunInUse, RunStore, list_runs, load_run

CHILD = textwrap.dedent("""
    import sys, time
    from referee import EvalCase, EvalSuite
    from referee.evaluators.deterministic import Contains

    suite = EvalSuite("killed")
    suite.add_cases([EvalCase(input=f"q{i}") for i in range(10)])
    suite.add_evaluator(Contains(["answer"]))

    def model(prompt):
        if int(prompt[1:]) >= 3:
            time.sleep(600)  # the parent kills us while this case is running
        return "answer to " + prompt

    suite.run(model, verbose=False, runs_dir=sys.argv[1], concurrency=1)
""")


def _wait_for_lines(path, n, proc, deadline_s=60.0):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if path.is_file() and len(path.read_text().splitlines()) >= n:
            return
        if proc.poll() is not None:
            raise AssertionError(f"child exited early: {proc.stderr.read()}")
        time.sleep(0.05)
    raise AssertionError("child never finished its first cases")


def killed_run(tmp_path):
    """The directory of CHILD's run, killed (SIGKILL) after its first three cases."""
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    runs = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, str(script), str(runs)], stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 60
        while not runs.is_dir() or not any(runs.iterdir()):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        run_dir = next(runs.iterdir())
        _wait_for_lines(run_dir / "cases.jsonl", 3, proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        proc.stderr.close()
    return run_dir


def test_killed_run_keeps_finished_cases_and_resume_finishes_it(tmp_path):
    run_dir = killed_run(tmp_path)
    runs = run_dir.parent

    # A kill in the middle of a write leaves a torn last line; it must not cost anything.
    with open(run_dir / "cases.jsonl", "a") as fh:
        fh.write('{"index": 3, "eval_id": "case-')

    interrupted = load_run(run_dir)
    assert [c.case.input for c in interrupted.cases] == ["q0", "q1", "q2"]
    assert all(c.status == CaseStatus.PASSED for c in interrupted.cases)
    assert interrupted.metadata["interrupted"] is True
    assert not (run_dir / "report.json").exists()
    [info] = list_runs(runs)
    assert info.finished is False and info.total == 10 and info.passed == 3

    called: list[str] = []
    suite = EvalSuite("killed").add_cases([EvalCase(input=f"q{i}") for i in range(10)])
    suite.add_evaluator(Contains(["answer"]))

    def model(prompt):
        called.append(prompt)
        return "answer to " + prompt

    report = suite.run(model, verbose=False, resume=run_dir)
    assert sorted(called) == [f"q{i}" for i in range(3, 10)]
    assert report.run_id == run_dir.name and report.passed == 10
    assert [c.case.input for c in report.cases] == [f"q{i}" for i in range(10)]
    lines = (run_dir / "cases.jsonl").read_text().splitlines()
    assert len(lines) == 10 and all(json.loads(line) for line in lines)
    assert load_run(run_dir).passed == 10
    [info] = list_runs(runs)
    assert info.finished is True


def test_resume_refuses_different_cases(tmp_path):
    suite = EvalSuite("s").add_cases([EvalCase(input="a"), EvalCase(input="b")])
    suite.add_evaluator(Contains(["a"]))
    report = suite.run(lambda p: p, verbose=False, runs_dir=tmp_path)
    run_dir = tmp_path / report.run_id
    before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
    other = EvalSuite("s").add_cases([EvalCase(input="a"), EvalCase(input="c")])
    other.add_evaluator(Contains(["a"]))
    called: list[str] = []
    # The stored run finished: the refusal must not call it interrupted.
    with pytest.raises(InputError, match="not the ones the finished run was started with"):
        other.run(called.append, verbose=False, resume=run_dir)
    # A refused resume runs nothing and leaves the stored run exactly as it was: its
    # report.json in particular, which a resume that goes ahead replaces.
    assert called == []
    assert {p.name: p.read_bytes() for p in run_dir.iterdir()} == before
    assert "report.json" in before and load_run(run_dir).passed == 1


def test_a_bad_setting_leaves_no_half_made_run_directory(tmp_path, monkeypatch):
    suite = EvalSuite("s").add_cases([EvalCase(input="a")]).add_evaluator(Contains(["a"]))
    monkeypatch.setenv("REFEREE_CACHE", "maybe")
    with pytest.raises(ValueError, match="REFEREE_CACHE='maybe' is not a boolean"):
        suite.run(lambda p: p, verbose=False, runs_dir=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()
    # Nor does it unfinish a stored run it was asked to resume.
    monkeypatch.delenv("REFEREE_CACHE")
    report = suite.run(lambda p: p, verbose=False, runs_dir=tmp_path / "runs")
    run_dir = tmp_path / "runs" / report.run_id
    monkeypatch.setenv("REFEREE_CACHE", "maybe")
    with pytest.raises(ValueError, match="REFEREE_CACHE"):
        suite.run(lambda p: p, verbose=False, resume=run_dir)
    assert (run_dir / "report.json").is_file() and list_runs(tmp_path / "runs")[0].finished


def test_corruption_before_the_last_line_is_damage_naming_the_line(tmp_path):
    report = EvalReport(name="x")
    store = RunStore.create(tmp_path, report, case_ids=["a", "b"])
    store.append_case(CaseResult(eval_id="a", status=CaseStatus.PASSED))
    with open(store.cases_path, "a") as fh:
        fh.write("not json\n")
    store.append_case(CaseResult(eval_id="b", status=CaseStatus.PASSED))
    loaded = load_run(store.run_dir)
    assert [c.eval_id for c in loaded.cases] == ["a", "b"]
    [damage] = loaded.metadata["damaged"]
    assert damage.startswith("cases.jsonl line 2: unreadable: ")


def test_list_runs_is_newest_first_skips_junk_and_shows_broken_runs(tmp_path):
    for name, started in (("old", 100.0), ("new", 200.0)):
        report = EvalReport(run_id=name, name=name, started_at=started)
        store = RunStore.create(tmp_path, report, case_ids=[])
        store.write_report(report)
    (tmp_path / "junk").mkdir()
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "meta.json").write_text("{")
    runs = list_runs(tmp_path)
    assert [r.run_id for r in runs if not r.damaged] == ["new", "old"]
    [broken] = [r for r in runs if r.damaged]
    assert broken.run_id == "broken" and "meta.json" in broken.damaged[0]
    assert list_runs(tmp_path / "missing") == []


def test_load_run_errors_are_clear(tmp_path):
    with pytest.raises(InputError, match="no such run directory or report file"):
        load_run(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="meta.json is missing"):
        load_run(tmp_path / "empty")
    bad = tmp_path / "bad.json"
    bad.write_text("{\n  oops")
    with pytest.raises(InputError, match="bad.json:2"):
        load_run(bad)
    # Any JSON object would validate as an empty report; `compare` would then report every
    # case of the other run as removed and exit 0.
    for name, text in (("other.json", '{"a": 1}'), ("list.json", "[1, 2]"),
                       ("nocases.json", '{"run_id": "r", "cases": {}}')):
        (tmp_path / name).write_text(text)
        with pytest.raises(InputError, match=rf"{name}: not a referee report .*expected a "
                                             r"report.json or results.json written by referee"):
            load_run(tmp_path / name)
    # A directory of runs is not a run: say so, and name one.
    runs = tmp_path / "runs"
    for run_id in ("20260101-000000-aaaaaa", "20260102-000000-bbbbbb"):
        RunStore.create(runs, EvalReport(run_id=run_id), case_ids=[]).write_report(
            EvalReport(run_id=run_id))
    with pytest.raises(InputError, match=r"directory of 2 run\(s\), not one run \(expected one "
                                         r"run directory inside it, e\.g\. .*20260102-000000-bbbbbb"):
        load_run(runs)
    # The reports referee writes still load.
    report = EvalReport(run_id="x", cases=[CaseResult(eval_id="a", status=CaseStatus.PASSED)])
    (tmp_path / "results.json").write_text(render_json(report))
    assert load_run(tmp_path / "results.json").passed == 1


def test_create_refuses_an_existing_run_directory(tmp_path):
    report = EvalReport(run_id="same")
    RunStore.create(tmp_path, report, case_ids=[])
    with pytest.raises(InputError, match="already exists"):
        RunStore.create(tmp_path, report, case_ids=[])


def test_each_case_is_readable_at_once_and_fsync_is_grouped(tmp_path, monkeypatch):
    """Every appended case is flushed (a kill keeps it); fsync runs per interval and on close."""
    import referee.report.store as store_module

    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(store_module.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    clock = [1000.0]
    monkeypatch.setattr(store_module.time, "monotonic", lambda: clock[0])

    store = RunStore.create(tmp_path, EvalReport(name="x"), case_ids=[str(i) for i in range(50)])
    synced.clear()  # meta.json's own fsync
    for i in range(50):
        store.append_case(CaseResult(eval_id=str(i), status=CaseStatus.PASSED))
        assert len(store.cases_path.read_text().splitlines()) == i + 1
    assert synced == []  # all within one interval
    clock[0] += store_module.FSYNC_INTERVAL_S
    store.append_case(CaseResult(eval_id="late", status=CaseStatus.PASSED))
    assert len(synced) == 1
    store.close()
    assert len(synced) == 2
    store.close()  # idempotent
    store.append_case(CaseResult(eval_id="after-close", status=CaseStatus.PASSED))
    store.close()
    assert [c.eval_id for c in store.read_cases()][-2:] == ["late", "after-close"]


def test_a_run_that_raises_still_closes_its_case_file(tmp_path, monkeypatch):
    closed: list[RunStore] = []
    real_close = RunStore.close
    monkeypatch.setattr(RunStore, "close", lambda self: (closed.append(self), real_close(self)))
    suite = EvalSuite("s").add_cases([EvalCase(input="a")])
    suite.add_evaluator(Contains(["a"]))

    async def model(prompt):
        # Ctrl-C arrives on the event loop's thread (a sync model's own KeyboardInterrupt, on
        # its worker thread, is only that case's MODEL_ERROR).
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        suite.run(model, verbose=False, runs_dir=tmp_path)
    [run_dir] = list(tmp_path.iterdir())
    assert not (run_dir / "report.json").exists()
    assert [store.run_dir for store in closed] == [run_dir]
    assert not (run_dir / ".lock").exists()


def test_resume_with_retry_errors_runs_only_the_errored_cases_again(tmp_path):
    suite = EvalSuite("flaky").add_cases([EvalCase(input=f"q{i}") for i in range(6)])
    suite.add_evaluator(Contains(["answer"]))
    calls: list[str] = []

    def outage(prompt):
        calls.append(prompt)
        if prompt in ("q1", "q4"):
            raise ConnectionError("model endpoint down")
        return "answer " + prompt

    first = suite.run(outage, verbose=False, runs_dir=tmp_path)
    assert (first.passed, first.errors) == (4, 2)
    run_dir = tmp_path / first.run_id

    calls.clear()
    again = suite.run(outage, verbose=False, resume=run_dir)  # plain resume: errors are final
    assert calls == [] and again.errors == 2

    calls.clear()
    healed = suite.run(lambda p: (calls.append(p), "answer " + p)[1], verbose=False,
                       resume=run_dir, retry_errors=True)
    assert sorted(calls) == ["q1", "q4"]
    assert (healed.passed, healed.errors, healed.total) == (6, 0, 6)
    # One line per case; the errored attempts stay in the earlier scoring, versions/1.
    assert len((run_dir / "cases.jsonl").read_text().splitlines()) == 6
    assert load_run(run_dir).passed == 6
    assert load_run(f"{run_dir}@1").errors == 2
    with pytest.raises(ValueError, match="retry_errors=True goes with resume"):
        suite.run(outage, verbose=False, runs_dir=tmp_path, retry_errors=True)


def test_many_takers_of_a_dead_writers_lock_leave_exactly_one_writer(tmp_path):
    report = EvalReport(name="x")
    store = RunStore.create(tmp_path, report, case_ids=["a"])
    store.release()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (store.run_dir / LOCK_FILE).write_text(f"{dead.pid} {socket.gethostname()}\n")
    start = threading.Barrier(8)
    outcomes: list[str] = []

    def take() -> None:
        start.wait()
        try:
            RunStore(store.run_dir).lock()
            outcomes.append("writer")
        except RunInUse as exc:
            outcomes.append(str(exc))

    threads = [threading.Thread(target=take) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert outcomes.count("writer") == 1, outcomes
    assert all(f"process {os.getpid()}" in o or "another process" in o
               for o in outcomes if o != "writer"), outcomes
    assert [p.name for p in store.run_dir.iterdir() if p.name.startswith(LOCK_FILE)] == [LOCK_FILE]
