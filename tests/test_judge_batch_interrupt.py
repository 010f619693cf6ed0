"""Issue 30, item 6: Ctrl-C (SIGINT) during a ``referee run --judge-batch-api`` leaves the
batches already submitted running at the provider (nothing is cancelled), and prints the
command that resumes the run; that command then polls them and sends nothing again."""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
import sys
import urllib.request

import pytest

from referee.report.viewer import start_viewer
from referee.testing.batch_service import ScriptedBatchService
from tests.test_judge_batch_resume import (
    N_CASES,
    SUITE,
    _env,
    assert_verdicts_of_an_uninterrupted_run,
    start_batch_run,
)


@pytest.mark.parametrize(("provider", "model"), [("openai", "gpt-4o-mini"),
                                                 ("anthropic", "claude-haiku-4-5")])
def test_sigint_leaves_batches_running_and_prints_the_resume_command(provider, model,
                                                                     tmp_path):
    (tmp_path / "suite.py").write_text(SUITE)
    runs = tmp_path / "runs"
    with ScriptedBatchService(processing_s=3.0) as service:
        service.add_rule(lambda r: "polite" in r.prompt and "rude" in r.prompt, "No")
        env = _env(service, provider, model, tmp_path)
        argv = [sys.executable, "-m", "referee.cli", "run", str(tmp_path / "suite.py"),
                "--out", str(runs), "--judge-batch-api", "-q"]
        child, run_dir = start_batch_run(argv, env, tmp_path, runs)
        child.send_signal(signal.SIGINT)
        _, stderr = child.communicate(timeout=30)
        assert child.returncode == 130, stderr

        # Left running: not cancelled, and still at work when the process is gone.
        assert service.calls.get("batches.cancel", 0) == 0
        [state] = service.batch_states().values()
        assert state == "in_progress"
        assert "1 judge batch(es) left running at the provider" in stderr, stderr
        [line] = [x for x in stderr.splitlines() if "to resume: " in x]
        command = shlex.split(line.split("to resume: ", 1)[1])
        # The viewer's index shows the run waiting on its batch (id, requests, age).
        with start_viewer(None, runs) as viewer:
            index = urllib.request.urlopen(viewer.base_url + "/", timeout=10).read().decode()
        [batch_id] = service.batch_states()
        assert re.search(rf"waiting on 1 judge batch\(es\) submitted, {2 * N_CASES} "
                         rf"request\(s\), newest \d+s ago: {provider} {batch_id}", index), index
        assert command[:2] == ["referee", "run"]
        assert command[-2:] == ["--resume", str(run_dir)]
        assert command[2:-2] == argv[4:]  # the same target and flags

        resumed = subprocess.run([sys.executable, "-m", "referee.cli", *command[1:]], env=env,
                                 cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert resumed.returncode == 0, resumed.stderr
        assert service.batches_created == 1
        assert service.items_received == 2 * N_CASES
    assert_verdicts_of_an_uninterrupted_run(run_dir)
