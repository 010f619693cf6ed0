"""No process outlives the run that started it (issue 22).

A driver with no cluster to connect to runs ``suite.run(..., backend="ray")``, so referee starts
a local Ray cluster itself. Every process of that cluster inherits the driver's environment, so
a marker variable finds them in /proc whatever Ray names them (raylet, gcs_server,
ray::DashboardAgent, ray::RuntimeEnvAgent, ray::IDLE workers).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
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
    env = {**os.environ, "PYTHONPATH": str(HERE.parents[1]), "REFEREE_TEST_MARKER": marker,
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
