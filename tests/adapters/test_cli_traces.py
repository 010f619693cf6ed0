"""`referee run --traces`: recorded OTLP spans and message lists scored from the command line."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from referee.cli import main
from referee.report.store import load_run

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "traces"


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def stored_report(runs: Path) -> dict:
    [run_dir] = [p for p in runs.iterdir() if p.is_dir()]
    # report.json refers to cases.jsonl for its cases; load_run reads both back.
    return load_run(run_dir).to_dict()


def test_recorded_otlp_spans_are_scored_against_a_case_file(tmp_path, capsys):
    code, out, err = run_cli(
        capsys, "run", str(EXAMPLES / "cases.evalset.yaml"),
        "--traces", str(EXAMPLES / "agent_spans.otlp.json"),
        "--config", str(EXAMPLES / "eval_config.json"), "--out", str(tmp_path), "-q")

    assert code == 0, err
    assert out.startswith("2 passed, 0 failed, 0 errors")
    report = stored_report(tmp_path)
    assert report["model_id"] == "recorded"
    cases = {c["eval_id"]: c for c in report["cases"]}
    assert cases["refund"]["execution"]["node_visits"] == ["triage", "refunds"]
    # The exporter left the opt-in result out: said once on stderr, kept in the report.
    assert "gen_ai.tool.call.result not recorded (an opt-in attribute)" in err
    assert "'execute_tool issue_refund'" in err
    assert cases["refund"]["execution"]["metadata"]["trace_notes"]


def test_a_message_list_file_that_carries_its_cases_is_scored(tmp_path, capsys):
    code, out, err = run_cli(
        capsys, "run", "--traces", str(EXAMPLES / "recorded_cases.jsonl"),
        "--config", str(EXAMPLES / "eval_config.messages.json"), "--out", str(tmp_path), "-q")

    assert code == 0, err
    assert out.startswith("2 passed, 0 failed, 0 errors")
    report = stored_report(tmp_path)
    assert report["model_id"] == "recorded"
    multi = next(c for c in report["cases"] if c["eval_id"] == "price-then-return")
    assert [t["response"] for t in multi["execution"]["turns"]] == [
        "The Nimbus keyboard costs 81.88 EUR.",
        "Unused items can be returned within 30 days of purchase."]


def test_a_suite_file_scores_traces_with_its_own_evaluators(tmp_path, capsys):
    suite_file = tmp_path / "eval_recorded.py"
    suite_file.write_text(textwrap.dedent("""
        from referee import EvalSuite
        from referee.evaluators.deterministic import Contains

        suite = EvalSuite("recorded support")
        suite.add_evaluator(Contains("refund"))
    """), encoding="utf-8")
    code, out, err = run_cli(capsys, "run", str(suite_file), "--traces",
                             str(EXAMPLES / "agent_spans.otlp.json"), "--out",
                             str(tmp_path / "runs"), "-q")

    assert code == 0, err
    assert out.startswith("1 passed, 1 failed, 0 errors")  # only the refund answer says it
    assert stored_report(tmp_path / "runs")["name"] == "recorded support"


def test_traces_refuse_an_agent_and_name_bad_files(tmp_path, capsys):
    code, _, err = run_cli(capsys, "run", str(EXAMPLES / "cases.evalset.yaml"), "--traces",
                           str(EXAMPLES / "agent_spans.otlp.json"), "--agent", "x.py:f")
    assert code == 2 and "re-runs nothing; drop --agent" in err

    code, _, err = run_cli(capsys, "run", "--traces", str(tmp_path / "absent.jsonl"))
    absent = tmp_path / "absent.jsonl"
    assert code == 2 and err.strip() == f"referee: error: --traces {absent}: no such file"

    bad = tmp_path / "bad.json"
    bad.write_text('{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "x"}]}]}]}')
    code, _, err = run_cli(capsys, "run", "--traces", str(bad), "--out", str(tmp_path))
    assert code == 2
    assert err.strip() == (f"referee: error: {bad}: field 'resourceSpans[0].scopeSpans[0]."
                           f"spans[0].traceId': missing (expected a span with its trace id)")

    code, _, err = run_cli(capsys, "run")
    assert code == 2 and "or --traces FILE" in err


def test_traces_logs_give_the_spans_their_content(tmp_path, capsys):
    from otlp_builders import any_value, export, span

    trace, chat = "5" * 32, "1" * 16
    spans = tmp_path / "spans.json"
    spans.write_text(json.dumps(export(span(
        trace, chat, "chat gpt", 0, gen_ai__operation__name="chat", gen_ai__system="openai",
        gen_ai__conversation__id="weather-1", gen_ai__usage__input_tokens=5,
        gen_ai__usage__output_tokens=2))), encoding="utf-8")
    logs = tmp_path / "logs.json"
    logs.write_text(json.dumps({"resourceLogs": [{"scopeLogs": [{"logRecords": [
        {"traceId": trace, "spanId": trace[:8] + chat[:8], "eventName": name,
         "body": any_value(body)}
        for name, body in (("gen_ai.user.message", {"content": "Weather in Oslo?"}),
                           ("gen_ai.choice", {"index": 0, "message": {"content": "Snow."}}))
    ]}]}]}), encoding="utf-8")
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"eval_id": "weather-1", "input": "Weather in Oslo?",
                                 "expected_output": "Snow."}) + "\n", encoding="utf-8")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"criteria": {"rouge_match": {"threshold": 0.8}}}),
                      encoding="utf-8")

    without = run_cli(capsys, "run", str(cases), "--traces", str(spans), "--config",
                      str(config), "--out", str(tmp_path / "a"), "-q")
    code, out, err = run_cli(capsys, "run", str(cases), "--traces", str(spans),
                             "--traces-logs", str(logs), "--config", str(config),
                             "--out", str(tmp_path / "b"), "-q")

    # Spans alone: no text to compare, so nothing is scored (exit 3) and the note says why.
    assert without[0] == 3 and "--traces-logs" in without[2], without
    assert code == 0, err
    assert out.startswith("1 passed, 0 failed")
    assert run_cli(capsys, "run", "--traces-logs", str(logs))[0] == 2
