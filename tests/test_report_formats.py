"""Console, JSON and JUnit renderings of one stored run, and writing them to a run directory."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from rich.console import Console
from test_report_samples import PAYLOAD, RAW_HTTP_MARKER, sample_report

from referee.report.console import render_console
from referee.report.json_report import render_json
from referee.report.junit import render_junit
from referee.report.model import CaseResult, CaseStatus, EvalReport
from referee.report.writers import parse_formats, write_reports
from referee.result import CriterionResult

# JSON ------------------------------------------------------------------------------------

def test_json_round_trips_to_the_report() -> None:
    report = sample_report()
    data = json.loads(render_json(report))
    back = EvalReport.from_dict(data)
    assert [c.status for c in back.cases] == [c.status for c in report.cases]
    assert back.pass_rate == report.pass_rate and back.error_rate == report.error_rate
    assert back.cases[0].criterion_results[1].details["questions"][0]["verdict"] == "yes"
    assert data["totals"]["errors_by_kind"] == report.errors_by_kind
    hostile = back.get_case_result("hostile")
    assert hostile is not None and hostile.actual_response == "Model says " + PAYLOAD


def test_json_drops_raw_http_bodies_and_secrets() -> None:
    report = sample_report()
    report.judge["api_key"] = "sk-test-secret-123"
    text = render_json(report)
    assert RAW_HTTP_MARKER not in text
    assert "sk-test-secret-123" not in text
    data = json.loads(text)
    assert data["cases"][1]["execution"]["metadata"] == {"trace_id": "t-1"}
    assert data["judge"]["model"] == "claude-haiku-4-5"


# JUnit -----------------------------------------------------------------------------------

def _junit(report: EvalReport) -> ET.Element:
    return ET.fromstring(render_junit(report).encode("utf-8"))


def test_junit_parses_with_counts_that_match_its_testcases() -> None:
    root = _junit(sample_report())
    suite = root.find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    kinds = {k: sum(1 for tc in cases if tc.find(k) is not None) for k in ("failure", "error", "skipped")}
    assert int(suite.get("tests")) == len(cases)
    assert int(suite.get("failures")) == kinds["failure"]
    assert int(suite.get("errors")) == kinds["error"]
    assert int(suite.get("skipped")) == kinds["skipped"]
    assert root.get("tests") == suite.get("tests")


def test_junit_maps_each_case_and_criterion() -> None:
    suite = _junit(sample_report()).find("testsuite")
    by_key = {(tc.get("classname"), tc.get("name")): tc for tc in suite.findall("testcase")}
    passed = by_key[("checkout-bot/refund policy", "faithfulness")]
    assert list(passed) == []
    failed = by_key[("checkout-bot/composite check", "contains")]
    assert failed.find("failure").get("message") == "'ok' not found"
    judge = by_key[("checkout-bot/judge outage", "faithfulness")].find("error")
    assert judge.get("type") == "JUDGE_ERROR" and "HTTP 503" in judge.get("message")
    assert list(by_key[("checkout-bot/judge outage", "contains")]) == []
    assert by_key[("checkout-bot/broken evaluator", "faithfulness")].find("error").get("type") == "EVALUATOR_ERROR"
    # A model error never reached any criterion: each known criterion reports the error.
    down = [tc for (cls, _), tc in by_key.items() if cls == "checkout-bot/upstream down"]
    assert len(down) == 6 and all(tc.find("error").get("type") == "MODEL_ERROR" for tc in down)
    assert "upstream 504" in down[0].find("error").get("message")
    timeout = by_key[("checkout-bot/slow model", "contains")].find("error")
    assert timeout.get("type") == "TIMEOUT"
    assert by_key[("checkout-bot/no context", "faithfulness")].find("skipped") is not None


def test_junit_survives_control_characters_and_markup_in_output() -> None:
    case = CaseResult(
        eval_id="ctl", name="ctl\x00\x1b", status=CaseStatus.FAILED,
        criterion_results=[CriterionResult(criterion="c", score=0.0, passed=False, threshold=1.0,
                                           details={"reason": "bad \x07 byte " + PAYLOAD})],
    )
    root = _junit(EvalReport(name="s", cases=[case]))
    failure = root.find("testsuite/testcase/failure")
    assert failure is not None and failure.get("message").startswith("bad \ufffd byte </script>")


def test_junit_counts_a_case_without_criteria_once() -> None:
    report = EvalReport(name="s", cases=[CaseResult(eval_id="x", status=CaseStatus.MODEL_ERROR, error="boom")])
    suite = _junit(report).find("testsuite")
    assert suite.get("tests") == "1" and suite.get("errors") == "1"
    assert suite.find("testcase/error").get("message") == "MODEL_ERROR: boom"


# Console ---------------------------------------------------------------------------------

def test_console_shows_the_numbers_that_matter() -> None:
    console = Console(record=True, width=120, force_terminal=False)
    render_console(sample_report(), console)
    text = console.export_text()
    for expected in ("checkout-bot", "gpt-4o-mini", "anthropic/claude-haiku-4-5",
                     "50.0%", "44.4%",  # pass rate 2/4 evaluated, error rate 4/9
                     "model_error=1", "judge_error=1", "evaluator_error=1", "timeout=1",
                     "'ok' not found", "TimeoutError: upstream 504", "case exceeded its 30s timeout",
                     "1800 input + 180 output tokens", "$0.0024",
                     "Run stored in .referee/runs/20261129-120000-abc123",
                     "covers only the 4 evaluated case(s) of 9"):
        assert expected in text, expected
    per_eval = next(line for line in text.splitlines() if line.startswith("faithfulness"))
    # The mean covers the 2 scored results only: the 2 errors are not 0.0s.
    assert per_eval.split()[1:] == ["1", "1", "2", "1", "50.0%", "0.750", "(2)"]


def test_console_prints_markup_in_names_literally() -> None:
    console = Console(record=True, width=200, force_terminal=False)
    report = EvalReport(name="[bold]s[/bold]", cases=[CaseResult(
        eval_id="x", name="[red]x[/red]", status=CaseStatus.FAILED,
        criterion_results=[CriterionResult(criterion="[link=http://e]c[/link]", score=0.0,
                                           passed=False, threshold=1.0)])])
    render_console(report, console)
    text = console.export_text()
    assert "[bold]s[/bold]" in text and "[red]x[/red]" in text and "[link=http://e]c[/link]" in text


# Writers ---------------------------------------------------------------------------------

def test_write_reports_writes_each_file_format(tmp_path) -> None:
    console = Console(record=True, width=120)
    written = write_reports(sample_report(), tmp_path / "run", ["json", "junit", "html", "console"],
                            console=console)
    assert set(written) == {"json", "junit", "html"}
    assert EvalReport.from_file(written["json"]).total == 9
    ET.parse(written["junit"])
    assert written["html"].read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert str(tmp_path / "run") in console.export_text()
    assert not list((tmp_path / "run").glob("*.tmp"))


def test_unknown_format_is_a_clear_error(tmp_path) -> None:
    assert parse_formats("json, html,json") == ["json", "html"]
    with pytest.raises(ValueError, match="unknown report format 'pdf'; expected one of: console, json, junit, html"):
        write_reports(sample_report(), tmp_path, ["json", "pdf"])
    assert not (tmp_path / "results.json").exists()


def test_console_neutralises_terminal_escapes_from_model_output() -> None:
    import io

    report = EvalReport(name="s\x1b]0;title\x07", cases=[CaseResult(
        eval_id="x", name="x\x1b[2J", status=CaseStatus.MODEL_ERROR, error="boom \x1b[31mred\x9b")])
    buf = io.StringIO()
    render_console(report, Console(file=buf, force_terminal=True, width=120))
    out = buf.getvalue()
    assert "\x1b[2J" not in out and "\x1b]0;" not in out and "\x9b" not in out
    # Whole sequences are stripped, not only their ESC: no "[31m" residue either.
    assert "boom red" in out and "[31m" not in out and "[2J" not in out and "title" not in out


def test_console_names_one_judge_per_criterion() -> None:
    report = sample_report()
    report.judge = {"per_criterion": {
        "faithfulness": {"provider": "anthropic", "model": "claude-haiku-4-5", "api_key": "sk-nope"},
        "response_evaluation_score": {"model": "gemini-2.5-flash"},
        "tone": {"provider": "openai", "model": "llama3", "base_url": "http://127.0.0.1:8000/v1"},
    }}
    console = Console(record=True, width=300)
    render_console(report, console)
    text = console.export_text()
    assert ("judge: faithfulness: anthropic/claude-haiku-4-5; response_evaluation_score: "
            "gemini-2.5-flash; tone: openai/llama3 at http://127.0.0.1:8000/v1") in text
    assert "sk-nope" not in text


def test_an_empty_run_renders_in_every_format() -> None:
    report = EvalReport(name="empty")
    suite = _junit(report).find("testsuite")
    assert suite.get("tests") == "0" and suite.get("failures") == "0"
    assert EvalReport.from_dict(json.loads(render_json(report))).total == 0
    console = Console(record=True, width=120)
    render_console(report, console)
    text = console.export_text()
    # Nothing evaluated: the pass rate is "n/a", never a 0.0% that reads as "everything failed".
    assert "Failures" not in text and "0.0%" not in text
    assert "n/a" in text and "the run has no cases" in text
    assert report.pass_rate == 0.0 and report.evaluated == 0


def test_failure_lines_name_the_case_and_each_criterion_once():
    from referee import EvalCase
    from referee.report.console import _failure_lines
    from referee.report.model import CaseResult, CaseStatus
    from referee.result import CriterionResult

    judge_down = CriterionResult(
        criterion="faithfulness", score=0.0, passed=False, threshold=0.7, error_kind="judge",
        error="faithfulness: every judge verdict was unparseable")
    case = CaseResult(eval_id="case-1", status=CaseStatus.JUDGE_ERROR,
                      case=EvalCase(input="What is the refund window for opened items?"),
                      criterion_results=[judge_down],
                      error="faithfulness: every judge verdict was unparseable")
    assert case.label == "What is the refund window for opened items?"
    assert _failure_lines(case) == ["faithfulness: every judge verdict was unparseable"]
    long = CaseResult(eval_id="case-2", status=CaseStatus.PASSED,
                      case=EvalCase(input="word " * 40))
    assert len(long.label) == 60 and long.label.endswith("…")
    assert CaseResult(eval_id="case-3", status=CaseStatus.PASSED).label == "case-3"
    named = CaseResult(eval_id="case-4", name="refunds", status=CaseStatus.PASSED,
                       case=EvalCase(input="q"))
    assert named.label == "refunds"


def test_junit_has_one_properties_block_per_testsuite_before_its_testcases() -> None:
    report = sample_report()
    assert report.model_id  # the model_id property and the run's numbers share the one block
    suite = _junit(report).find("testsuite")
    assert suite is not None
    blocks = suite.findall("properties")
    assert len(blocks) == 1 and list(suite)[0] is blocks[0]
    names = [p.get("name") for p in blocks[0].findall("property")]
    assert names[:5] == ["model_id", "pass_rate", "evaluated", "error_rate", "criterion_errors"]
    assert "judge_spend" in names
