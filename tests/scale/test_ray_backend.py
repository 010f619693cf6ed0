"""The Ray backend on a local cluster: same report as the local engine, nothing lost or run twice.

Shards go to Ray tasks over 2 CPUs with half a CPU per task, so four workers run at once.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import ray
from scale_models import Logged, answer, suite

from referee import EvalSuite
from referee.evaluators.deterministic import Contains
from referee.report.store import load_run
from referee.scale import RayBackend

HERE = Path(__file__).resolve().parent


def _comparable(report) -> list[dict]:
    out = []
    for case in report.cases:
        data = case.model_dump(mode="json", exclude={"duration_seconds", "scoring_seconds"})
        data["execution"].pop("latency_s", None)
        out.append(data)
    return out


def _recorded_indices(run_dir: Path) -> list[int]:
    lines = (run_dir / "cases.jsonl").read_text().splitlines()
    return [json.loads(line)["index"] for line in lines if line.strip()]


def test_a_sharded_run_gives_the_local_report(ray_cluster: str, tmp_path: Path) -> None:
    backend = RayBackend(shard_size=50, task_cpus=0.5)
    log = tmp_path / "calls.log"
    on_ray = suite(2000).run(Logged(log), verbose=False, runs_dir=tmp_path / "ray",
                             backend=backend)
    local = suite(2000).run(answer, verbose=False, runs_dir=tmp_path / "local")
    assert (on_ray.total, on_ray.passed, on_ray.failed) == (2000, 1714, 286)
    assert _comparable(on_ray) == _comparable(local)
    assert on_ray.summary.criterion_stats == local.summary.criterion_stats
    assert backend.tasks_started == 40 and backend.tasks_failed == 0
    workers = {line.split()[1] for line in log.read_text().splitlines()}
    assert len(workers) >= 4  # the shards really ran on several worker processes
    assert sorted(_recorded_indices(Path(on_ray.metadata["run_dir"]))) == list(range(2000))


def test_a_lost_worker_loses_no_case_and_runs_none_twice(ray_cluster: str,
                                                         tmp_path: Path) -> None:
    backend = RayBackend(shard_size=10, task_cpus=0.5)
    log = tmp_path / "calls.log"
    report = suite(120).run(Logged(log, kill_at=45), verbose=False, runs_dir=tmp_path,
                            concurrency=1, backend=backend)
    assert backend.tasks_failed == 1
    assert report.total == 120 and report.errors == 0
    assert sorted(_recorded_indices(Path(report.metadata["run_dir"]))) == list(range(120))
    calls = collections.Counter(int(line.split()[0]) for line in log.read_text().splitlines())
    # Cases 40-44 of the lost shard were recorded before its worker died: not run again.
    assert {n for n, k in calls.items() if k > 1} == {45}
    assert set(calls) == set(range(120))


# The test's own bounds (240 s for the driver, then the resumed run) exceed the suite's
# 120 s hang guard, which cut it off on a loaded machine before its own deadline could speak.
@pytest.mark.timeout(420)
def test_a_killed_driver_resumes_to_a_complete_run(ray_cluster: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parents[1]), str(HERE)])}
    driver = subprocess.Popen(
        [sys.executable, str(HERE / "ray_driver.py"), ray_cluster, str(tmp_path), "300"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 240
        cases_file = None
        while time.monotonic() < deadline and driver.poll() is None:
            found = list(tmp_path.glob("*/cases.jsonl"))
            if found and len(found[0].read_text().splitlines()) >= 40:
                cases_file = found[0]
                break
            time.sleep(0.2)
        assert cases_file is not None, driver.stderr.read().decode()[-2000:] if driver.poll() else "no cases"
        driver.send_signal(signal.SIGKILL)
        driver.wait(30)
    finally:
        if driver.poll() is None:
            driver.kill()
    run_dir = cases_file.parent
    before = len(set(_recorded_indices(run_dir)))
    assert 40 <= before < 300 and not (run_dir / "report.json").exists()
    resumed = suite(300).run(Logged(tmp_path / "resume.log"), verbose=False, resume=run_dir,
                             backend=RayBackend(shard_size=10, task_cpus=0.5))
    assert resumed.total == 300 and resumed.errors == 0
    assert sorted(set(_recorded_indices(run_dir))) == list(range(300))
    assert load_run(run_dir).summary == resumed.summary
    rerun = {int(line.split()[0]) for line in (tmp_path / "resume.log").read_text().splitlines()}
    assert len(rerun) <= 300 - before + 10  # only what was not recorded (and in flight) ran again


def test_a_rescore_on_ray_scores_the_stored_outputs_without_calling_the_model(
        ray_cluster: str, tmp_path: Path) -> None:
    first = suite(40).run(Logged(tmp_path / "first.log"), verbose=False, runs_dir=tmp_path,
                          backend=RayBackend(shard_size=10, task_cpus=0.5))
    assert (first.total, first.passed) == (40, 34)
    # The resume plan's stored outputs reach the workers through the engine it was built with.
    other = EvalSuite("sharded").add_cases(suite(40).cases).add_evaluator(Contains(["for"]))
    rescored = other.run(Logged(tmp_path / "again.log"), verbose=False,
                         resume=first.metadata["run_dir"], rescore=True,
                         backend=RayBackend(shard_size=10, task_cpus=0.5))
    assert not (tmp_path / "again.log").exists()
    assert (rescored.total, rescored.passed) == (40, 6)  # "nothing for n", every seventh
    assert rescored.metadata["rescored"] is True


def test_a_model_that_cannot_be_pickled_is_built_on_each_worker(ray_cluster: str,
                                                                tmp_path: Path) -> None:
    report = suite(40).run(model_factory="scale_models:make_answerer", verbose=False,
                           runs_dir=tmp_path, backend=RayBackend(shard_size=10, task_cpus=0.5))
    assert (report.total, report.passed) == (40, 34)
    # The run used the connection it found (the test's cluster) and left it to its owner.
    assert ray.is_initialized() and ray.get_runtime_context().gcs_address == ray_cluster


def test_bad_backend_names_are_one_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown backend 'spark'; expected one of: local, ray"):
        suite(1).run(answer, verbose=False, save=False, backend="spark")


@pytest.mark.timeout(300)  # above the subprocess's own 240 s bound, so that one reports
def test_referee_run_ray_runs_on_the_cluster_at_address(ray_cluster: str, tmp_path: Path) -> None:
    target = tmp_path / "evals.py"
    # Nothing here is importable on the workers: the model travels by value, as a user's would.
    target.write_text(
        "from referee import EvalCase, EvalSuite\n"
        "from referee.evaluators.deterministic import Contains\n"
        "suite = EvalSuite('cli').add_cases([EvalCase(input=f'question {i}') for i in range(30)])\n"
        "suite.add_evaluator(Contains(['answer']))\n"
        "def model(question):\n"
        "    n = int(question.split()[1])\n"
        "    return f'answer {n}' if n % 7 else f'nothing for {n}'\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parents[1]), str(HERE)])}
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from referee.cli import main; sys.exit(main())",
         "run", str(target), "--ray", ray_cluster,
         "--out", str(tmp_path / "runs"), "-q"],
        env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("25 passed, 5 failed, 0 errors, 0 skipped of 30")


def _referee(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parents[1]), str(HERE)])}
    return subprocess.run(
        [sys.executable, "-c", "import sys; from referee.cli import main; sys.exit(main())",
         *args], env=env, capture_output=True, text=True, timeout=240)


@pytest.mark.timeout(400)  # above the two subprocesses' own bounds, so those report
def test_the_targets_folder_travels_to_the_workers(ray_cluster: str, tmp_path: Path) -> None:
    """The quickstart imports its agent from its own folder (``from shop_agent import ...``):
    on the workers as here, with the same verdicts (issue 22)."""
    target = str(HERE.parents[1] / "examples" / "quickstart" / "eval_shop.py")
    local = _referee("run", target, "--out", str(tmp_path / "local"), "-q")
    on_ray = _referee("run", target, "--ray", ray_cluster, "--out", str(tmp_path / "ray"), "-q")
    assert on_ray.returncode == local.returncode == 0, on_ray.stdout[-2000:] + on_ray.stderr[-2000:]
    assert on_ray.stdout.startswith("10 passed, 0 failed, 0 errors, 0 skipped of 10")
    runs = [load_run(next((tmp_path / name).iterdir())) for name in ("local", "ray")]
    assert _comparable(runs[1]) == _comparable(runs[0])


def test_a_working_dir_that_cannot_travel_is_one_clear_error(ray_cluster: str,
                                                              tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="working_dir '.*missing' is not a folder"):
        RayBackend(working_dir=tmp_path / "missing")
    # Ray ships a folder only with a whole job: a process that called ray.init() itself says so.
    with pytest.raises(ValueError, match=r"only ray.init\(\) can ship a folder; pass runtime_env="):
        suite(2).run(answer, verbose=False, runs_dir=tmp_path,
                     backend=RayBackend(working_dir=tmp_path))


def test_importing_referee_never_imports_ray() -> None:
    code = ("import sys, referee, referee.run.backends, referee.scale, referee.report.store\n"
            "from referee import EvalSuite, AgentEvaluator\n"
            "assert 'ray' not in sys.modules, 'ray was imported'\n")
    env = {**os.environ, "PYTHONPATH": str(HERE.parents[1])}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_repeated_runs_travel_to_the_workers(ray_cluster: str, tmp_path: Path) -> None:
    def shape(report) -> list[tuple]:
        return [(c.eval_id, c.status, c.runs, c.all_scores, [r.status for r in c.run_results])
                for c in report.cases]

    on_ray = suite(20).run(answer, verbose=False, runs_dir=tmp_path / "ray", runs=10,
                           early_stop=True, backend=RayBackend(shard_size=5, task_cpus=0.5))
    local = suite(20).run(answer, verbose=False, runs_dir=tmp_path / "local", runs=10,
                          early_stop=True)
    # A steady answer settles each case after six runs, on the workers as here.
    assert {c.runs for c in on_ray.cases} == {6}
    assert shape(on_ray) == shape(local) and on_ray.runs == 10


def test_rays_own_log_lines_stay_out_of_referees_output(ray_cluster: str,
                                                        tmp_path: Path) -> None:
    """Issue 31: under --ray, stderr holds referee's lines only (Ray's INFO/WARNING lines,
    such as 'Connecting to existing Ray cluster' or 'SIGTERM handler is not set', do not)."""
    target = tmp_path / "tiny.py"
    target.write_text(
        "from referee import EvalCase, EvalSuite\n"
        "from referee.evaluators.deterministic import Contains\n"
        "suite = EvalSuite('tiny').add_cases([EvalCase(input='q')])\n"
        "suite.add_evaluator(Contains(['a']))\n"
        "def model(question):\n"
        "    return 'a'\n")
    proc = _referee("run", str(target), "--ray", ray_cluster, "--out", str(tmp_path / "runs"),
                    "-q")
    assert proc.returncode == 0, proc.stderr[-2000:]
    foreign = [line for line in proc.stderr.splitlines()
               if line.strip() and not line.startswith("referee")]
    assert foreign == [], foreign
