"""Issue 22: what `referee run` prints. A missing judge provider is said once per failing case
(not twice), and -q keeps referee's warnings (per-sample judge failures) out of the output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from referee.cli import main
from referee.testing import Fault, ScriptedJudgeServer

KEYS = ("GOOGLE_API_KEY", "GEMINI_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN", "JUDGE_PROVIDER", "JUDGE_MODEL", "OPENAI_BASE_URL")


def test_a_missing_judge_provider_is_said_once_per_case(tmp_path: Path, monkeypatch,
                                                        capsys) -> None:
    for name in KEYS:
        monkeypatch.delenv(name, raising=False)
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join(json.dumps({"input": f"q{i}", "expected_output": "30 days"})
                               for i in range(2)) + "\n")
    (tmp_path / "agent.py").write_text("def agent(prompt):\n    return '30 days'\n")
    code = main(["run", str(cases), "--agent", f"{tmp_path / 'agent.py'}:agent",
                 "--out", str(tmp_path / "runs")])
    assert code == 3  # nothing evaluated
    out = capsys.readouterr().out
    listed = out.split("Failures and errors (2):", 1)[1]
    assert listed.count("No LLM provider available") == 2, listed  # one line per case
    assert "(0.50 < 0.80)" not in listed  # the placeholder is no score that failed


SUITE = """
    import os
    from referee import CriterionConfig, EvalCase, EvalSuite
    from referee.criteria import ResponseMatchCriterion

    suite = EvalSuite("quiet")
    suite.add_cases([EvalCase(input=f"q{i}", expected_output="30 days") for i in range(2)])
    suite.add_evaluator(ResponseMatchCriterion(CriterionConfig(
        judge_model="openai/gpt-4o-mini", base_url=os.environ["QUIET_JUDGE_URL"],
        num_samples=2, api_style="chat")))

    def model(prompt):
        return "30 days"
"""


def test_quiet_keeps_per_sample_judge_failures_out_of_the_output(tmp_path: Path) -> None:
    suite = tmp_path / "suite_quiet.py"
    suite.write_text(textwrap.dedent(SUITE))
    with ScriptedJudgeServer(Fault.http(400)) as server:
        env = {k: v for k, v in os.environ.items() if k not in KEYS}
        env.update(QUIET_JUDGE_URL=server.base_url(), OPENAI_API_KEY="test-key-quiet",
                   REFEREE_CACHE="0", PYTHONPATH=str(Path.cwd()))

        def run(*flags: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "referee.cli", "run", str(suite),
                                   "--out", str(tmp_path / "runs"), *flags],
                                  env=env, capture_output=True, text=True, timeout=120)

        loud, quiet = run(), run("-q")
    assert "judge sample 1 of 2 failed" in loud.stderr  # the warning this test is about
    assert quiet.returncode == loud.returncode == 3, quiet.stderr
    assert "judge sample" not in quiet.stderr and "judge sample" not in quiet.stdout
    assert quiet.stdout.startswith("0 passed, 0 failed, 2 errors")
    assert quiet.stderr.strip().splitlines() == [
        line for line in quiet.stderr.strip().splitlines() if line.startswith("referee: ")]

