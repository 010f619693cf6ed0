"""Issue 30, item 3: a ``referee run --judge-batch-api`` killed with SIGKILL after its batch was
submitted, then ``--resume``: the batch already submitted is polled, nothing is sent again
(the scripted batch service counts), and the verdicts are those of an uninterrupted run."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import referee
from referee.cli import main
from referee.judge.batch import JOURNAL_FILE
from referee.report.store import load_run
from referee.testing import DUMMY_API_KEY
from referee.testing.batch_service import ScriptedBatchService

N_CASES = 6
SUITE = textwrap.dedent(f"""
    import os
    from pydantic import SecretStr
    from referee import EvalCase, EvalSuite
    from referee.evaluators import CustomRubric
    from referee.judge import JudgeConfig

    judge = JudgeConfig(provider=os.environ["BATCH_PROVIDER"], model=os.environ["BATCH_MODEL"],
                        base_url=os.environ["BATCH_JUDGE_URL"],
                        api_key=SecretStr({DUMMY_API_KEY!r}), cache=False)
    suite = EvalSuite("batch-kill")
    suite.add_cases([EvalCase(input=f"[case-{{i}}] refund window?", name=f"case {{i}}")
                     for i in range({N_CASES})])
    suite.add_evaluator(CustomRubric([("Does it state the window?", True),
                                      ("Is it polite?", True)], judge=judge))

    def model(prompt):
        tone = "rude" if "case-1" in prompt else "kind"
        return f"Refunds within 30 days ({{tone}}). " + prompt
""")


def _env(service: ScriptedBatchService, provider: str, model: str,
         tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("JUDGE_", "REFEREE_", "GOOGLE_", "GEMINI_"))
           and k not in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")}
    env.update(BATCH_PROVIDER=provider, BATCH_MODEL=model,
               BATCH_JUDGE_URL=service.base_url(provider), REFEREE_CACHE="0",
               REFEREE_CACHE_DIR=str(tmp_path / "cache"), REFEREE_BATCH_QUIET_S="0.1",
               REFEREE_BATCH_FIRST_POLL_S="0.05", REFEREE_BATCH_MAX_POLL_S="0.1",
               # the child imports this checkout's referee, not another install
               PYTHONPATH=str(Path(referee.__file__).resolve().parents[1]))
    return env


def _journal_submitted(runs: Path) -> Path | None:
    for journal in runs.glob(f"*/{JOURNAL_FILE}"):
        if any(json.loads(line).get("event") == "submitted"
               for line in journal.read_text().splitlines() if line.endswith("}")):
            return journal.parent
    return None


def start_batch_run(argv: list[str], env: dict[str, str], cwd: Path,
                    runs: Path) -> tuple[subprocess.Popen[str], Path]:
    """``referee run`` started in a child process, once its first batch is submitted (the
    journal says so): the child, still running, and its run directory."""
    child = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    run_dir = None
    while run_dir is None and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.05)
        run_dir = _journal_submitted(runs)
    assert run_dir is not None, child.communicate(timeout=5)
    return child, run_dir


def assert_verdicts_of_an_uninterrupted_run(run_dir: Path) -> None:
    statuses = {c.case.name: c.status.value for c in load_run(run_dir).cases}
    assert statuses == {f"case {i}": ("FAILED" if i == 1 else "PASSED") for i in range(N_CASES)}


@pytest.mark.parametrize(("provider", "model"), [("openai", "gpt-4o-mini"),
                                                 ("anthropic", "claude-haiku-4-5"),
                                                 ("google", "gemini-2.5-flash")])
def test_sigkill_after_submission_then_resume_resubmits_nothing(provider, model, tmp_path,
                                                               capsys):
    (tmp_path / "suite.py").write_text(SUITE)
    runs = tmp_path / "runs"
    with ScriptedBatchService(processing_s=2.0) as service:
        service.add_rule(lambda r: "polite" in r.prompt and "rude" in r.prompt, "No")
        env = _env(service, provider, model, tmp_path)
        argv = [sys.executable, "-m", "referee.cli", "run", str(tmp_path / "suite.py"),
                "--out", str(runs), "--judge-batch-api", "-q"]
        child, run_dir = start_batch_run(argv, env, tmp_path, runs)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        assert child.returncode == -signal.SIGKILL
        assert service.batches_created == 1
        submitted = service.items_received
        assert submitted == 2 * N_CASES
        assert not (run_dir / "report.json").exists()
        # referee list shows what the killed run left at the provider.
        assert main(["list", "--dir", str(runs)]) == 0
        [batch_id] = service.batch_states()
        listed = capsys.readouterr().out
        assert re.search(rf"1 judge batch\(es\) submitted, {2 * N_CASES} request\(s\), "
                         rf"newest \d+s ago: {provider} (batches/)?{batch_id}; --resume follows",
                         listed), listed

        resumed = subprocess.run([*argv, "--resume", str(run_dir)], env=env, cwd=tmp_path,
                                 capture_output=True, text=True, timeout=120)
        assert resumed.returncode == 0, resumed.stderr

        # Polled, not sent again.
        assert service.batches_created == 1
        assert service.items_received == submitted
        assert service.calls["batches.create"] == 1
        assert len(service.requests) == 2 * N_CASES  # each item answered once
    report = load_run(run_dir)
    statuses = {c.case.name: c.status.value for c in report.cases}
    assert statuses == {f"case {i}": ("FAILED" if i == 1 else "PASSED") for i in range(N_CASES)}
    usage = report.summary.total_token_usage
    assert usage.batch_requests == usage.requests == 2 * N_CASES
