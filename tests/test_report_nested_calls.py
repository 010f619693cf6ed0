"""Agents used as tools in the HTML case view, read in headless Chromium: the inner agent and
its calls sit indented under the call that ran it, in the recorded calls and in the expected ↔
actual trajectory; a trajectory criterion that read the inner calls aligns them instead."""

from __future__ import annotations

import re
from pathlib import Path

from test_report_samples import chromium_dom

from referee import AgentEvaluator, CriteriaConfig, CriterionConfig, EvalConfig, MatchType
from referee.case import EvalCase, ToolCall
from referee.execution import ExecutionResult
from referee.report.html import render_html


def delegating_agent(message: str, history: list) -> ExecutionResult:
    checker = ToolCall(name="ask_checker", args={"input": "INV-7"}, result="INV-7 verified",
                       nested_node_visits=["checker"],
                       nested_calls=[ToolCall(name="verify", args={"invoice": "INV-7"},
                                              result="INV-7 checks out")])
    research = ToolCall(name="ask_researcher", args={"input": "Check INV-7"}, result="paid",
                        nested_node_visits=["researcher"],
                        nested_calls=[ToolCall(name="lookup_invoice", args={"invoice": "INV-7"},
                                               result={"status": "paid"}), checker])
    return ExecutionResult(actual_response="INV-7 is paid.", tool_calls=[research],
                           node_visits=["orchestrator"])


def _rows(dom: str, table_class: str | None = None) -> list[tuple[str, str, str]]:
    """(row class, indent class of the tool cell, visible text) of each table row."""
    tables = re.findall(r"<table[^>]*>.*?</table>", dom, re.S)
    if table_class is not None:
        tables = [t for t in tables if f'class="{table_class}"' in t[:60]]
    rows = []
    for table in tables:
        for attrs, body in re.findall(r"<tr([^>]*)>(.*?)</tr>", table, re.S):
            row_class = re.search(r'class="([^"]*)"', attrs)
            indent = re.search(r'<td class="(d\d)"', body)
            text = " ".join(re.sub(r"<[^>]+>", " ", body).split())
            rows.append((row_class.group(1) if row_class else "",
                         indent.group(1) if indent else "", text))
    return rows


ARGS = {"ask_researcher": {"input": "Check INV-7"}, "lookup_invoice": {"invoice": "INV-7"},
        "ask_checker": {"input": "INV-7"}, "verify": {"invoice": "INV-7"}}


async def _report_dom(tmp_path: Path, include_nested: bool, expected: list[str]) -> str:
    config = EvalConfig(criteria=CriteriaConfig(trajectory=CriterionConfig.trajectory(
        match_type=MatchType.EXACT, include_nested=include_nested)))
    case = EvalCase.single_turn("Is INV-7 paid?", expected_tool_trajectory=[
        ToolCall(name=name, args=ARGS[name]) for name in expected])
    report = await AgentEvaluator(delegating_agent, config=config, save=False).evaluate(
        [case], verbose=False)
    path = tmp_path / f"report-{include_nested}.html"
    path.write_text(render_html(report), encoding="utf-8")
    return chromium_dom(path.as_uri(), tmp_path)


async def test_inner_calls_are_indented_under_the_agent_tool_call(tmp_path: Path) -> None:
    dom = await _report_dom(tmp_path, include_nested=False, expected=["ask_researcher"])

    trajectory = _rows(dom, "trajectory")
    assert [(cls, indent, text.split(" {")[0]) for cls, indent, text in trajectory[1:]] == [
        ("o-matched", "", "matched ask_researcher"),
        ("o-nested", "d1", "inside ↳ agent researcher"),
        ("o-nested", "d1", "inside ↳ lookup_invoice"),
        ("o-nested", "d1", "inside ↳ ask_checker"),
        ("o-nested", "d2", "inside ↳ agent checker"),
        ("o-nested", "d2", "inside ↳ verify"),
    ]
    recorded = [(cls, indent, text.split(" {")[0]) for cls, indent, text in _rows(dom)
                if cls in ("inner-call", "inner-agent") or text.startswith("1 ask_researcher")]
    assert recorded == [
        ("", "d0", "1 ask_researcher"),
        ("inner-agent", "d1", "↳ agent researcher"),
        ("inner-call", "d1", "1.1 lookup_invoice"),
        ("inner-call", "d1", "1.2 ask_checker"),
        ("inner-agent", "d2", "↳ agent checker"),
        ("inner-call", "d2", "1.2.1 verify"),
        ("", "d0", "1 ask_researcher"),  # the expected trajectory's table, no inner run
    ]


async def test_a_trajectory_that_read_the_inner_calls_aligns_them(tmp_path: Path) -> None:
    expected = ["ask_researcher", "lookup_invoice", "ask_checker", "verify"]
    dom = await _report_dom(tmp_path, include_nested=True, expected=expected)

    trajectory = _rows(dom, "trajectory")
    assert [text.split(" {")[0] for _, _, text in trajectory[1:]] == [
        f"matched {name}" for name in expected]


async def test_without_tool_call_details_the_inner_calls_lose_theirs_too() -> None:
    from referee.report.reporters import trimmed_report

    report = await AgentEvaluator(delegating_agent, save=False).evaluate(
        [EvalCase.single_turn("Is INV-7 paid?")], verbose=False)

    (call,) = trimmed_report(report, tool_call_details=False).cases[0].execution.tool_calls
    (lookup, checker) = call.nested_calls
    assert (call.args, lookup.args, lookup.result) == ({}, {}, None)
    assert (checker.nested_calls[0].name, checker.nested_calls[0].args) == ("verify", {})
    assert checker.nested_node_visits == ["checker"]  # names stay, as the calls' names do
