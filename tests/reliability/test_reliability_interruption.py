"""Issue 7, item 3: SIGINT and SIGKILL of a ``referee run`` half-way, then ``--resume``.

The suite's judge is a scripted server in this process with some latency, so the run is slow
enough to interrupt; its URL reaches the child through the environment. Requests are counted
per case at the server, which proves that resuming asks the judge nothing about finished cases.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from reliability_support import requests_per_case

from referee.report.model import CaseResult, CaseStatus
from referee.report.store import list_runs, load_run
from referee.testing import DUMMY_API_KEY, Reply, ScriptedJudgeServer

N_CASES = 24
QUESTIONS = 2  # judge requests per case
LATENCY_S = 0.1

SUITE = textwrap.dedent(f"""
    import os
    from pydantic import SecretStr
    from referee import EvalCase, EvalSuite
    from referee.evaluators import CustomRubric
    from referee.judge import JudgeConfig

    judge = JudgeConfig(provider="openai", model="gpt-4o-mini",
                        base_url=os.environ["RELIABILITY_JUDGE_URL"] + "/v1",
                        api_key=SecretStr({DUMMY_API_KEY!r}), cache=False, max_retries=1)
    suite = EvalSuite("interrupt-me")
    suite.add_cases([EvalCase(input=f"[case-{{i}}] refund window?", name=f"case {{i}}")
                     for i in range({N_CASES})])
    suite.add_evaluator(CustomRubric([("Does it state the window?", True),
                                      ("Is it polite?", True)], judge=judge))

    def model(prompt):
        return "Refunds are accepted within 30 days. " + prompt
""")


@pytest.fixture
def slow_judge():
    with ScriptedJudgeServer(Reply("Yes", latency_s=LATENCY_S)) as server:
        yield server


def _env(server: ScriptedJudgeServer, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("JUDGE_PROVIDER", "JUDGE_MODEL", "OPENAI_BASE_URL", "REFEREE_DEBUG")}
    env.update(RELIABILITY_JUDGE_URL=server.url, REFEREE_CACHE="0",
               REFEREE_CACHE_DIR=str(tmp_path / "cache"))
    return env


def _cli(*argv: str, env: dict[str, str], **kwargs) -> subprocess.Popen:
    # SIGINT back to its default, so the child's Python installs KeyboardInterrupt even when
    # this test runs under a supervisor that started us with SIGINT ignored.
    return subprocess.Popen([sys.executable, "-m", "referee.cli", *argv], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                            **kwargs)


def _finished_lines(path: Path) -> int:
    if not path.is_file():
        return 0
    return path.read_bytes().count(b"\n")


def _interrupt_half_way(proc: subprocess.Popen, runs: Path, sig: int) -> Path:
    deadline = time.monotonic() + 90
    run_dir = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the run ended before it was interrupted: {proc.stderr.read()}")
        dirs = [p for p in runs.iterdir() if p.is_dir()] if runs.is_dir() else []
        if dirs:
            run_dir = dirs[0]
            if _finished_lines(run_dir / "cases.jsonl") >= N_CASES // 2:
                proc.send_signal(sig)
                proc.wait(60)
                return run_dir
        time.sleep(0.01)
    raise AssertionError("the run never reached half-way")


def _whole_records(run_dir: Path) -> list[CaseResult]:
    """Every record in cases.jsonl; all must be whole lines, except a torn tail after SIGKILL."""
    data = (run_dir / "cases.jsonl").read_text(encoding="utf-8")
    whole = data.split("\n")[:-1]  # what follows the last newline is a torn tail, or nothing
    records = [CaseResult.model_validate_json(line) for line in whole]
    assert all(r.status is CaseStatus.PASSED for r in records)
    return records


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL],
                         ids=["SIGINT", "SIGTERM", "SIGKILL"])
def test_interrupted_run_keeps_its_cases_and_resume_asks_nothing_twice(
        tmp_path: Path, slow_judge: ScriptedJudgeServer, sig: int) -> None:
    suite = tmp_path / "suite_under_test.py"
    suite.write_text(SUITE)
    runs = tmp_path / "runs"
    env = _env(slow_judge, tmp_path)

    proc = _cli("run", str(suite), "--out", str(runs), "--concurrency", "2", "-q",
                "--format", "json", env=env)
    try:
        run_dir = _interrupt_half_way(proc, runs, sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)

    if sig in (signal.SIGINT, signal.SIGTERM):  # SIGTERM ends a run as Ctrl-C does
        assert proc.returncode == 130, err
        assert "Traceback" not in err
        assert "interrupted; finished cases are kept" in err
        assert f"--resume {run_dir}" in err  # names the directory to resume, not a placeholder
    else:
        assert proc.returncode == -signal.SIGKILL
        # A kill in the middle of a write leaves a torn last line: simulate the worst case.
        with open(run_dir / "cases.jsonl", "a", encoding="utf-8") as fh:
            fh.write('{"index": 99, "eval_id": "torn", "status": "PAS')

    finished = _whole_records(run_dir)
    done_ids = {r.eval_id for r in finished}
    assert N_CASES // 2 <= len(finished) < N_CASES and len(done_ids) == len(finished)
    assert not (run_dir / "report.json").exists()
    interrupted = load_run(run_dir)
    assert interrupted.metadata["interrupted"] is True
    assert {c.eval_id for c in interrupted.cases} == done_ids
    [info] = list_runs(runs)
    assert info.finished is False and info.total == N_CASES

    finished_cases = {int(r.case.input.split("]")[0].removeprefix("[case-")) for r in finished}
    slow_judge.reset_record()
    resumed = _cli("run", str(suite), "--resume", str(run_dir), "--concurrency", "2", "-q",
                   "--format", "json,html", env=env)
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    assert "Traceback" not in err
    assert out.startswith(f"{N_CASES} passed, 0 failed, 0 errors")

    per_case = requests_per_case(slow_judge)
    assert all(per_case[i] == 0 for i in finished_cases), "a finished case was judged again"
    assert sum(per_case.values()) == QUESTIONS * (N_CASES - len(finished_cases))
    lines = (run_dir / "cases.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == N_CASES and len({json.loads(line)["eval_id"] for line in lines}) == N_CASES
    report = load_run(run_dir)
    assert report.passed == N_CASES and "interrupted" not in report.metadata
    assert [c.name for c in report.cases] == [f"case {i}" for i in range(N_CASES)]
    assert [p.name for p in runs.iterdir()] == [run_dir.name]
    assert (run_dir / "report.html").is_file() and (run_dir / "results.json").is_file()
