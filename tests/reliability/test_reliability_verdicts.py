"""Issue 10, section 1: a judge outage never hides a known failure, and a run with nothing
evaluated never reads as a verdict.

Faults are injected at the scripted judge server (HTTP 503 for the faulty cases' requests,
no retries), through the real OpenAI SDK.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from reliability_support import CaseJudge, FaultPlan, case_input
from rich.console import Console

from referee import EvalCase, EvalSuite
from referee.errors import EvalGateFailure
from referee.evaluators import Contains, CustomRubric
from referee.report.console import render_console
from referee.report.html import render_html
from referee.report.junit import render_junit
from referee.report.model import CaseStatus
from referee.testing import DUMMY_API_KEY, Fault, ScriptedJudgeServer

pytestmark = pytest.mark.usefixtures("isolated_judge")

ZERO_PERCENT = re.compile(r"(?<![\d.])0\.0%")
FAULTY = 1  # its output also misses "30 days", so its deterministic check fails


def _suite(cfg) -> EvalSuite:
    suite = EvalSuite("verdicts")
    suite.add_cases([EvalCase(input=case_input(i), name=f"case {i}") for i in range(3)])
    suite.add_evaluators(Contains(["30 days"]),
                         CustomRubric([("Does the answer state the refund window?", True)],
                                      judge=cfg))
    return suite


async def _model(prompt: str) -> str:
    if f"[case-{FAULTY}]" in prompt:
        return "I do not know."
    return "Refunds are accepted within 30 days."


async def test_a_failed_check_beats_a_judge_outage_on_the_same_case(
        judge_server: ScriptedJudgeServer) -> None:
    judge_server.set_reply(CaseJudge(faulty=FAULTY, plan=FaultPlan(Fault.http(503))))
    cfg = judge_server.judge_config(max_retries=0)

    report = await _suite(cfg).run_async(_model, verbose=False, save=False)

    faulty = report.cases[FAULTY]
    assert faulty.status == CaseStatus.FAILED  # known failure, not JUDGE_ERROR
    contains, rubric = faulty.criterion_results
    assert contains.is_scored and not contains.passed
    assert rubric.error_kind == "judge" and "HTTP 503" in (rubric.error or "")
    assert (report.passed, report.failed, report.errors, report.evaluated) == (2, 1, 0, 3)

    # The outage is still counted and shown, although no case ended JUDGE_ERROR.
    stats = report.summary.criterion_stats
    assert (stats["custom_rubric"].errors, stats["custom_rubric"].scored) == (1, 2)
    assert stats["custom_rubric"].avg_score == 1.0  # the error is not a 0.0
    assert report.criterion_errors == 1
    console = Console(record=True, width=120, force_terminal=False)
    render_console(report, console)
    text = console.export_text()
    assert "1 criterion errors (1 on cases that FAILED on another criterion)" in text
    assert "custom_rubric: " in text and "HTTP 503" in text
    assert "1 criterion errors" in render_html(report)
    suite = ET.fromstring(render_junit(report).split("\n", 1)[1]).find("testsuite")
    faulty_tests = [tc for tc in suite.iter("testcase") if tc.get("classname").endswith("case 1")]
    assert [(tc.get("name"), [child.tag for child in tc]) for tc in faulty_tests] == [
        ("contains", ["failure"]), ("custom_rubric", ["error"])]

    # A gate at 0.99 now sees the failure (it passed when the case hid behind JUDGE_ERROR).
    with pytest.raises(EvalGateFailure, match="2 of 3 evaluated"):
        await _suite(cfg).run_async(_model, False, 0.99, save=False)


SUITE = textwrap.dedent(f"""
    import os
    from pydantic import SecretStr
    from referee import EvalCase, EvalSuite
    from referee.evaluators import CustomRubric
    from referee.judge import JudgeConfig

    judge = JudgeConfig(provider="openai", model="gpt-4o-mini",
                        base_url=os.environ["VERDICTS_JUDGE_URL"] + "/v1",
                        api_key=SecretStr({DUMMY_API_KEY!r}), cache=False, max_retries=0)
    suite = EvalSuite("all-errors")
    suite.add_cases([EvalCase(input=f"[case-{{i}}] refund window?", name=f"case {{i}}")
                     for i in range(3)])
    suite.add_evaluator(CustomRubric([("Does it state the window?", True)], judge=judge))

    def model(prompt):
        return "Refunds are accepted within 30 days."
""")


@pytest.mark.parametrize("gate", [[], ["--fail-threshold", "0.5"]], ids=["no-gate", "gate"])
def test_a_run_where_every_case_errored_exits_3_with_one_line(tmp_path: Path, gate) -> None:
    suite_file = tmp_path / "suite.py"
    suite_file.write_text(SUITE, encoding="utf-8")
    runs = tmp_path / "runs"
    with ScriptedJudgeServer(Fault.http(503)) as server:
        env = {k: v for k, v in os.environ.items()
               if k not in ("JUDGE_PROVIDER", "JUDGE_MODEL", "OPENAI_BASE_URL", "REFEREE_DEBUG")}
        env.update(VERDICTS_JUDGE_URL=server.url, REFEREE_CACHE="0")
        done = subprocess.run([sys.executable, "-m", "referee", "run", str(suite_file), "--out",
                               str(runs), "--format", "console,junit,html", *gate],
                              env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    # Progress lines go to stderr too; the verdict is one line, the last.
    lines = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr
    assert [line for line in lines if "nothing evaluated" in line] == lines[-1:]
    assert lines[-1].startswith("referee: nothing evaluated: none of the 3 case(s) could be "
                               "evaluated: 3 errored (judge_error=3); the run is stored in ")
    assert not ZERO_PERCENT.search(done.stderr)  # no "0.0% < threshold" for a run without a verdict
    assert "Pass rate n/a: none of the 3 case(s) could be evaluated" in done.stdout
    assert not ZERO_PERCENT.search(done.stdout)  # (the error rate is 100.0%)
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    report = json.loads((run_dir / "report.json").read_text(encoding="utf-8"))
    assert report["totals"]["evaluated"] == 0 and report["totals"]["pass_rate"] == 0.0
    junit = ET.parse(run_dir / "junit.xml").getroot()
    props = {p.get("name"): p.get("value") for p in junit.iter("property")}
    assert props["pass_rate"] == "n/a" and props["evaluated"] == "0"
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "<b>n/a</b>" in html and not ZERO_PERCENT.search(html)
    if not gate:
        listed = subprocess.run([sys.executable, "-m", "referee", "list", "--dir", str(runs)],
                                env=env, capture_output=True, text=True, timeout=60)
        assert "  pass n/a  errors 100.0%  0/3" in listed.stdout, listed.stdout
