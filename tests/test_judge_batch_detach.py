"""Issue 30, item 3: ``referee run --judge-batch-api --detach`` submits the run's judge batches,
records them, and exits with the run id, leaving them at the provider; ``referee resume
RUN_DIR --wait`` collects them without sending anything again."""

from __future__ import annotations

import subprocess
import sys

from referee.cli import main
from referee.judge.batch import BatchJournal
from referee.testing import DUMMY_API_KEY
from referee.testing.batch_service import ScriptedBatchService
from tests.test_judge_batch_resume import (
    N_CASES,
    SUITE,
    _env,
    assert_verdicts_of_an_uninterrupted_run,
)


def test_detach_submits_the_batches_and_exits_then_resume_collects_them(tmp_path):
    (tmp_path / "suite.py").write_text(SUITE)
    runs = tmp_path / "runs"
    with ScriptedBatchService(processing_s=8.0) as service:
        service.add_rule(lambda r: "polite" in r.prompt and "rude" in r.prompt, "No")
        env = {**_env(service, "openai", "gpt-4o-mini", tmp_path),
               "OPENAI_API_KEY": DUMMY_API_KEY}
        detached = subprocess.run(
            [sys.executable, "-m", "referee.cli", "run", "suite.py", "--out", "runs",
             "--judge-batch-api", "--detach", "-q"], env=env, cwd=tmp_path,
            capture_output=True, text=True, timeout=60)
        assert detached.returncode == 0, detached.stderr
        [run_dir] = runs.iterdir()
        assert f"detached: run {run_dir.name} waits on 1 judge batch(es)" in detached.stdout
        assert f"referee resume {run_dir.relative_to(tmp_path)}" in detached.stdout
        # Submitted, recorded, left running: nothing answered or cancelled yet.
        [batch] = BatchJournal(run_dir).batches
        assert batch.requests == 2 * N_CASES
        assert service.batch_states() == {batch.batch_id: "in_progress"}
        assert service.calls.get("batches.cancel", 0) == 0
        assert not (run_dir / "report.json").exists()

        done = subprocess.run([sys.executable, "-m", "referee.cli", "resume", str(run_dir),
                               "--wait"], env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert service.batches_created == 1
        assert service.items_received == 2 * N_CASES
    assert_verdicts_of_an_uninterrupted_run(run_dir)


def test_detach_needs_the_batch_api(tmp_path, capsys, monkeypatch):
    (tmp_path / "suite.py").write_text(SUITE)
    monkeypatch.delenv("REFEREE_JUDGE_BATCH_API", raising=False)
    for name, value in (("BATCH_PROVIDER", "openai"), ("BATCH_MODEL", "gpt-4o-mini"),
                        ("BATCH_JUDGE_URL", "http://127.0.0.1:9/v1")):
        monkeypatch.setenv(name, value)
    code = main(["run", str(tmp_path / "suite.py"), "--out", str(tmp_path), "--detach"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "--detach goes with --judge-batch-api" in err
    assert not any(tmp_path.glob("*/meta.json"))  # refused before anything ran
