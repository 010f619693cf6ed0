"""multivon's names for what referee's case, case result and report already hold
(``report.suite_name``, ``case_result.case_id``/``skipped``/``agent_trace``, ``WordCount``'s bounds,
``report.zero_pass_cases``, ``case.revision``/``expected_tool_calls``). Written from multivon's
public signatures; no test code copied."""

from __future__ import annotations

from referee import (
    BLEU,
    AgentStep,
    Contains,
    EvalCase,
    EvalReport,
    EvalResult,
    EvalSuite,
    ToolCall,
)
from referee.report.model import CaseResult


def run(suite: EvalSuite, model, **kwargs) -> EvalReport:
    return suite.run(model, verbose=False, save=False, **kwargs)


def test_a_report_reads_its_suite_name():
    suite = EvalSuite("support-bot").add_cases([EvalCase(input="q")]).add_evaluator(
        Contains(["a"]))
    assert run(suite, lambda _: "a").suite_name == "support-bot"
    assert EvalReport(suite_name="by-hand", case_results=[]).suite_name == "by-hand"


def test_a_case_result_reads_case_id_skipped_and_agent_trace():
    steps = [AgentStep("look it up", [ToolCall(name="search", arguments={"q": "x"})], "found")]
    suite = EvalSuite("agent").add_cases([
        EvalCase(input="traced", case_id="t1"),
        EvalCase(input="plain", case_id="p1"),  # no expected_output: BLEU skips it
    ]).add_evaluator(BLEU())

    def model(question: str):
        return {"output": "found", "agent_trace": steps} if question == "traced" else "plain"

    by_id = {c.case_id: c for c in run(suite, model).case_results}
    assert set(by_id) == {"t1", "p1"}
    assert by_id["p1"].skipped and by_id["p1"].agent_trace is None
    trace = by_id["t1"].agent_trace
    assert [step.output for step in trace] == ["found"]
    assert [call.name for call in trace[0].tool_calls] == ["search"]
    scored = CaseResult("q", "out", [EvalResult("e", 1.0, True)])
    assert not scored.skipped and scored.case_id == scored.eval_id


def test_zero_pass_cases_with_one_run_flags_every_case_only_when_none_passed():
    cases = [EvalCase(input="a", case_id="a"), EvalCase(input="b", case_id="b")]
    suite = EvalSuite("zero").add_cases(cases).add_evaluator(Contains(["yes"]))
    none_passed = run(suite, lambda _: "no")
    assert sorted(c.case_id for c in none_passed.zero_pass_cases) == ["a", "b"]
    assert run(suite, lambda q: "yes" if q == "a" else "no").zero_pass_cases == []


def test_zero_pass_cases_with_repeated_runs_are_the_cases_that_never_passed():
    cases = [EvalCase(input="broken", case_id="broken"), EvalCase(input="flaky", case_id="flaky")]
    suite = EvalSuite("zero-runs").add_cases(cases).add_evaluator(Contains(["yes"]))
    calls = {"flaky": 0}

    def model(question: str) -> str:
        if question == "broken":
            return "no"
        calls["flaky"] += 1
        return "yes" if calls["flaky"] == 2 else "no"

    report = run(suite, model, runs=3, workers=1)
    assert [c.case_id for c in report.zero_pass_cases] == ["broken"]


def test_a_case_reads_its_revision_and_expected_tool_names():
    case = EvalCase(input="q", expected_tool_calls=["search", "summarize"], revision="r2",
                    source_id="tickets")
    assert (case.revision, case.source_id) == ("r2", "tickets")
    assert case.expected_tool_calls == ["search", "summarize"]
    assert EvalCase(input="q", expected_tool_calls=[]).expected_tool_calls == []
    assert EvalCase(input="q").expected_tool_calls is None
    assert EvalCase.model_validate(case.model_dump()).expected_tool_calls == ["search",
                                                                              "summarize"]


def test_word_count_defaults_are_multivons_bounds():
    from referee import WordCount

    default = WordCount()
    assert (default.min_words, default.max_words) == (0, 10_000)
    case = EvalCase(input="q")
    assert default.evaluate(case, "word " * 10_000).passed
    assert not default.evaluate(case, "word " * 10_001).passed
    # An unset maximum never contradicts a larger minimum.
    assert (WordCount(min=20_000).min_words, WordCount(min=20_000).max_words) == (20_000, 20_000)
    assert WordCount(max=3).min_words == 0


def test_a_gate_failure_reads_the_pass_rate_and_the_threshold_it_checked():
    import pytest

    from referee import EvalGateFailure

    built = EvalGateFailure("quality gate failed", 0.5, 0.8)  # multivon's positional order
    assert (built.pass_rate, built.threshold, built.report) == (0.5, 0.8, None)
    suite = EvalSuite("gate").add_cases([EvalCase(input="a"), EvalCase(input="b")])
    suite.add_evaluator(Contains(["yes"]))
    with pytest.raises(EvalGateFailure) as gate:
        suite.run(lambda q: "yes" if q == "a" else "no", verbose=False, save=False,
                  fail_threshold=0.9)
    assert (gate.value.pass_rate, gate.value.threshold) == (0.5, 0.9)
    report = gate.value.report
    assert EvalGateFailure("again", report).report is report  # referee's (message, report)
    repeated = run(EvalSuite("k").add_cases([EvalCase(input="a")]).add_evaluator(
        Contains(["yes"])), lambda _: "yes", runs=2)
    with pytest.raises(EvalGateFailure) as hat_k:
        repeated.assert_pass_hat_k(2, min_ci_low=1.01)
    assert hat_k.value.threshold == 1.01 and hat_k.value.pass_rate == 1.0
