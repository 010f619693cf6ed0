"""Clusters of their own (issue 22): no process outlives the run that started it, and a cluster
another process started with token authentication is refused with what to set.

Every process of a cluster inherits the environment of the process that started it, so a marker
variable finds them in /proc whatever Ray names them (raylet, gcs_server, ray::DashboardAgent,
ray::RuntimeEnvAgent, ray::IDLE workers).
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DRIVER = """
import os, sys
from referee import EvalCase, EvalSuite
from referee.evaluators.deterministic import Contains
suite = EvalSuite("own-cluster").add_cases([EvalCase(input=f"question {i}") for i in range(8)])
suite.add_evaluator(Contains(["answer"]))
report = suite.run(lambda question: "answer", verbose=False, runs_dir=sys.argv[1], backend="ray")
print(os.getpid(), report.total, report.passed, flush=True)
sys.stdin.readline()  # the run is over; the driver lives on until the test has looked
"""


def _marked_processes(marker: str, besides: int) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == besides:
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            if f"REFEREE_TEST_MARKER={marker}".encode() in environ:
                found.append(f"{entry.name} {(entry / 'cmdline').read_bytes()[:60]!r}")
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def _settled(marker: str, besides: int, within_s: float) -> list[str]:
    deadline = time.monotonic() + within_s
    while (left := _marked_processes(marker, besides)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


@pytest.mark.timeout(300)
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")
def test_a_cluster_the_run_started_ends_with_the_run(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REFEREE_TEST_MARKER": marker,
           "RAY_ADDRESS": "local"}  # a cluster of its own, never one another test started
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path)], env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        line = driver.stdout.readline()
        assert line, driver.stderr.read()[-2000:] if driver.wait(240) is not None else "no output"
        pid, total, passed = (int(x) for x in line.split())
        assert (total, passed) == (8, 8)
        # The run has returned: what it started is gone while its driver still lives.
        assert _settled(marker, besides=pid, within_s=10) == []
        driver.communicate("\n", timeout=60)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait(30)
        leftovers = _marked_processes(marker, besides=-1)
        for entry in leftovers:  # never leave them to the next test
            os.kill(int(entry.split()[0]), 9)
    assert leftovers == []


def _cases(run_dir: Path) -> list[tuple]:
    from referee.report.store import load_run

    return [(c.eval_id, c.status, [(r.criterion, r.score) for r in c.criterion_results])
            for c in load_run(run_dir).cases]


@pytest.mark.timeout(300)
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")
def test_the_quickstart_on_a_cluster_of_its_own(tmp_path: Path) -> None:
    """Issue 22's acceptance as written: ``referee run examples/quickstart/eval_shop.py --ray``
    gives the verdicts of the run without --ray, and no process outlives it."""
    marker = uuid.uuid4().hex
    target = str(ROOT / "examples" / "quickstart" / "eval_shop.py")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REFEREE_TEST_MARKER": marker,
           "RAY_ADDRESS": "local"}
    runs = {}
    try:
        for name, extra in (("local", []), ("ray", ["--ray"])):
            proc = subprocess.run([sys.executable, "-m", "referee", "run", target, *extra,
                                   "--out", str(tmp_path / name), "-q"],
                                  env=env, capture_output=True, text=True, timeout=240)
            assert proc.returncode == 0, proc.stdout[-1000:] + proc.stderr[-2000:]
            runs[name] = _cases(next((tmp_path / name).iterdir()))
        leftovers = _settled(marker, besides=-1, within_s=10)
    finally:
        for entry in _marked_processes(marker, besides=-1):  # never leave them to the next test
            os.kill(int(entry.split()[0]), 9)
    assert len(runs["ray"]) == 10 and runs["ray"] == runs["local"]
    assert leftovers == []


TOKEN_CLUSTER = """
import sys, ray
ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
print(ray.get_runtime_context().gcs_address, flush=True)
sys.stdin.readline()
ray.shutdown()
"""
TARGET = """
from referee import EvalCase, EvalSuite
from referee.evaluators.deterministic import Contains
suite = EvalSuite("token").add_cases([EvalCase(input="question 1")]).add_evaluator(Contains(["a"]))
def model(question):
    return "an answer"
"""
RAY_AUTH = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS")


def _without_ray_auth(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in RAY_AUTH}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


@pytest.mark.timeout(300)
def test_a_cluster_that_wants_a_token_says_what_to_set(tmp_path: Path) -> None:
    marker, token = uuid.uuid4().hex, secrets.token_hex(32)
    (tmp_path / "home").mkdir()  # no ~/.ray/auth_token for the client to find
    (tmp_path / "evals.py").write_text(TARGET)
    cluster = subprocess.Popen(
        [sys.executable, "-c", TOKEN_CLUSTER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True,
        env=_without_ray_auth(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token, RAY_ADDRESS="local",
                              REFEREE_TEST_MARKER=marker))
    try:
        address = cluster.stdout.readline().strip()
        assert address, "the token cluster did not start"

        def referee_run(**auth: str) -> subprocess.CompletedProcess:
            return subprocess.run(
                [sys.executable, "-m", "referee", "run", str(tmp_path / "evals.py"), "--ray",
                 address, "--out", str(tmp_path / "runs"), "-q"],
                env=_without_ray_auth(HOME=str(tmp_path / "home"), **auth),
                capture_output=True, text=True, timeout=200)

        refused = referee_run()
        assert refused.returncode != 0
        error = refused.stderr.strip().splitlines()[-1]
        assert error.startswith(f"referee: error: ConnectionError: Failed to connect to Ray "
                                f"cluster at {address}. If the cluster uses token authentication, "
                                "set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN to its token"), error
        # What the line says to set is what it takes.
        accepted = referee_run(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
        assert accepted.returncode == 0, accepted.stderr[-2000:]
        assert accepted.stdout.startswith("1 passed, 0 failed")
        cluster.communicate("\n", timeout=60)
    finally:
        if cluster.poll() is None:
            cluster.kill()
            cluster.wait(30)
        for entry in _settled(marker, besides=-1, within_s=10):
            os.kill(int(entry.split()[0]), 9)


@pytest.mark.parametrize("auth,says", [
    ({}, "here RAY_AUTH_MODE and RAY_AUTH_TOKEN are unset"),
    # Ray 2.60 sends no token unless RAY_AUTH_MODE=token, even one given in RAY_AUTH_TOKEN.
    ({"RAY_AUTH_TOKEN": "t" * 64}, "here RAY_AUTH_TOKEN is set but RAY_AUTH_MODE is not 'token', "
                                   "so Ray does not send it"),
    ({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": "/etc/ray-token"},
     "here RAY_AUTH_MODE=token and the token comes from RAY_AUTH_TOKEN_PATH: check it is the "
     "cluster's"),
])
def test_the_token_hint_says_what_this_process_has(auth: dict, says: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from referee.scale._ray import token_auth_hint

    for name in RAY_AUTH:
        monkeypatch.delenv(name, raising=False)
    for name, value in auth.items():
        monkeypatch.setenv(name, value)
    hint = token_auth_hint()
    assert hint.endswith(says) and "t" * 64 not in hint
