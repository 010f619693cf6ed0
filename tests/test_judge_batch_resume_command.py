"""Issue 30, item 3: ``referee resume RUN_DIR [--wait]`` resumes a stored run with the command
that started it (recorded in meta.json). Without --wait, judge batches still running at the
provider are reported (state, counts, age) and the command ends; with --wait, they are polled
to the end, nothing is sent again, and the run finishes with the verdicts of an uninterrupted
run."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys

import pytest

from referee.cli import main
from referee.testing import DUMMY_API_KEY
from referee.testing.batch_service import ScriptedBatchService
from tests.test_judge_batch_resume import (
    N_CASES,
    SUITE,
    _env,
    assert_verdicts_of_an_uninterrupted_run,
    start_batch_run,
)

KEY_VARIABLE = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY",
                "google": "GEMINI_API_KEY"}


@pytest.mark.parametrize(("provider", "model"), [("openai", "gpt-4o-mini"),
                                                 ("anthropic", "claude-haiku-4-5"),
                                                 ("google", "gemini-2.5-flash")])
def test_resume_reports_running_batches_then_waits_for_them(provider, model, tmp_path):
    (tmp_path / "suite.py").write_text(SUITE)
    with ScriptedBatchService(processing_s=12.0) as service:
        service.add_rule(lambda r: "polite" in r.prompt and "rude" in r.prompt, "No")
        # The key for asking about the batches comes from the environment, as for any judge.
        env = {**_env(service, provider, model, tmp_path), KEY_VARIABLE[provider]: DUMMY_API_KEY}
        # A relative target and --out: the resume runs in the run's own working directory.
        child, run_dir = start_batch_run(
            [sys.executable, "-m", "referee.cli", "run", "suite.py", "--out", "runs",
             "--judge-batch-api", "-q"], env, tmp_path, tmp_path / "runs")
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        meta = json.loads((run_dir / "meta.json").read_text())
        assert meta["command"]["argv"][:2] == ["run", "suite.py"]
        [batch_id] = service.batch_states()

        resume = [sys.executable, "-m", "referee.cli", "resume", str(run_dir)]
        waiting = subprocess.run(resume, env=env, cwd=tmp_path / "runs", capture_output=True,
                                 text=True, timeout=60)
        assert waiting.returncode == 0, waiting.stderr
        assert re.search(rf"{provider} (batches/)?{batch_id} \({2 * N_CASES} request\(s\)\): ",
                         waiting.stdout), waiting.stdout
        assert f"0 of {2 * N_CASES} completed, 0 failed, submitted " in waiting.stdout
        assert "1 judge batch(es) still running" in waiting.stdout
        assert "--wait" in waiting.stdout
        assert not (run_dir / "report.json").exists()
        assert service.calls.get("batches.cancel", 0) == 0

        done = subprocess.run([*resume, "--wait"], env=env, cwd=tmp_path / "runs",
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert service.batches_created == 1
        assert service.items_received == 2 * N_CASES
        assert len(service.requests) == 2 * N_CASES
    assert_verdicts_of_an_uninterrupted_run(run_dir)
    assert json.loads((run_dir / "meta.json").read_text())["command"] == meta["command"]
    # A finished run has nothing to resume.
    again = subprocess.run(resume, env=env, cwd=tmp_path, capture_output=True, text=True,
                           timeout=60)
    assert again.returncode == 0 and "is finished; nothing to resume" in again.stdout


def test_resume_without_a_recorded_command_says_how_to_resume(tmp_path, capsys):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "meta.json").write_text(json.dumps({"run_id": "run", "case_ids": []}))
    assert main(["resume", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert f"{run_dir / 'meta.json'}: no recorded command" in err
    assert f"referee run TARGET --resume {run_dir}" in err


def test_resume_of_a_directory_that_is_no_run(tmp_path, capsys):
    assert main(["resume", str(tmp_path)]) == 2
    assert "not a stored run (expected a run directory with meta.json)" in capsys.readouterr().err
