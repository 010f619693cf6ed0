"""A tiny run of the benchmark harness (referee only, no peers) so it cannot rot.

No timing assertions: only that every row exists and that the counts the table reports are the
counts the workloads imply.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

# The harness lives at the repository root, outside the installed package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import replies  # noqa: E402
from benchmarks.run import (  # noqa: E402
    DEFAULT_REQUEST_CONCURRENCY,
    W6_TOKENS_PER_REQUEST,
    Harness,
    Sizes,
    format_rate_limited,
    format_table,
    run_benchmarks,
)
from referee import EvalCase, ExecutionResult  # noqa: E402
from referee.evaluators import AnswerAccuracy, Faithfulness, Hallucination, Relevance  # noqa: E402

W1_EVALUATORS = 4
QUESTIONS_PER_EVALUATOR = 4
W2_CRITERIA = 4


@pytest.fixture(scope="module")
def rows():
    sizes = Sizes(rag=3, agent=5, scaling=(2, 3), rate_limited=((600, 2),))
    with Harness(latency_ms=1.0, sizes=sizes, peer_python=None, timeout_s=120,
                 log=lambda message: None) as harness:
        harness.w1(["referee", "referee-batched"])
        harness.w2(["referee"])
        harness.w3(["referee"])
        harness.w4(["referee"])
        harness.w6(["referee"])
        harness.cpu(["referee"])
        return harness.finish()


def _row(rows, workload, system, cases):
    matches = [r for r in rows if (r.workload, r.system, r.cases) == (workload, system, cases)]
    assert len(matches) == 1, f"expected one {workload}/{system}/{cases} row, got {matches}"
    return matches[0]


def test_w1_counts_one_request_per_question(rows):
    row = _row(rows, "W1", "referee", 3)
    assert row.judge_requests == 3 * W1_EVALUATORS * QUESTIONS_PER_EVALUATOR
    assert row.evaluations == row.passed_evaluations == 3 * W1_EVALUATORS
    assert row.errored_evaluations == 0
    assert row.judge_tokens > row.judge_requests  # token estimates of prompts and replies
    assert row.bill is not None and row.bill.requests == row.judge_requests
    # W1's prompts are too short for any provider's cache: every input token is billable.
    assert all(row.bill.billable_input_tokens[p] == row.bill.prompt_tokens
               for p in ("openai", "anthropic", "google"))
    assert row.ideal_s == pytest.approx(row.judge_requests * 0.001
                                        / DEFAULT_REQUEST_CONCURRENCY["referee"])
    assert row.efficiency is not None and row.efficiency > 0
    assert row.rss_peak_kb >= row.rss_baseline_kb > 0
    assert row.report_bytes > 0
    assert row.ratio_to_referee == pytest.approx(1.0)
    assert not any("unscripted" in note for note in row.notes)


def test_batched_mode_asks_one_request_per_evaluator(rows):
    row = _row(rows, "W1", "referee-batched", 3)
    assert row.judge_requests == 3 * W1_EVALUATORS
    assert row.evaluations == row.passed_evaluations == 3 * W1_EVALUATORS
    assert row.ratio_to_referee is not None


def test_w2_is_judge_free_and_counts_criteria(rows):
    row = _row(rows, "W2", "referee", 5)
    assert row.judge_requests == 0
    assert row.evaluations == row.passed_evaluations == 5 * W2_CRITERIA
    assert row.criteria_only_evaluations == 5 * W2_CRITERIA
    assert row.evaluations_per_cpu_s > 0


def test_w3_rerun_is_served_from_the_cache(rows):
    row = _row(rows, "W3", "referee", 3)
    assert row.judge_requests == 0
    assert row.evaluations == row.passed_evaluations == 3 * W1_EVALUATORS


def test_w4_scales_and_reuses_w1_at_the_same_size(rows):
    small = _row(rows, "W4", "referee", 2)
    assert small.judge_requests == 2 * W1_EVALUATORS * QUESTIONS_PER_EVALUATOR
    same_as_w1 = _row(rows, "W4", "referee", 3)
    assert "W4 row reused from W1" in same_as_w1.notes
    assert same_as_w1.judge_requests == _row(rows, "W1", "referee", 3).judge_requests


def test_w6_counts_what_the_rate_limited_server_let_through(rows):
    row = _row(rows, "W6", "referee", 2)
    assert (row.limit_rpm, row.limit_tpm) == (600, 600 * W6_TOKENS_PER_REQUEST)
    assert row.errored_cases == 0 and row.error is None
    admitted = row.judge_requests - row.rate_limited
    assert admitted == 2 * W1_EVALUATORS * QUESTIONS_PER_EVALUATOR
    assert row.ideal_s is not None and row.ideal_s >= admitted / 10.0
    assert row.throughput is not None and row.throughput > 0
    assert "referee" in format_rate_limited(rows)


def test_cpu_row_counts_the_timed_requests_only(rows):
    row = _row(rows, "CPU", "referee", 3)
    # The server also saw the 10 warm-up cases; the CPU is divided by the timed run's own.
    assert row.judge_requests == 13 * W1_EVALUATORS * QUESTIONS_PER_EVALUATOR
    assert row.cpu_ms_per_request == pytest.approx(
        1000 * row.cpu_s / (3 * W1_EVALUATORS * QUESTIONS_PER_EVALUATOR))
    # The event loop's thread alone: part of the process's CPU, never more.
    assert row.loop_cpu_ms_per_request is not None
    assert 0 < row.loop_cpu_ms_per_request <= row.cpu_ms_per_request


def test_table_has_a_line_per_row(rows):
    table = format_table(rows, 1.0)
    body = [line for line in table.splitlines() if line.startswith(("W1", "W2", "W3", "W4"))]
    # W6 and CPU have tables of their own.
    assert len(body) == len([r for r in rows if r.workload not in ("W6", "CPU")])
    assert not any(line.startswith(("W6", "CPU")) for line in table.splitlines())
    assert "referee-batched" in table


def test_a_failing_system_is_a_failed_row_not_a_lost_benchmark(monkeypatch):
    import benchmarks.run as bench

    monkeypatch.setitem(bench._RUNNER_MODULE, "referee-batched", "benchmarks.systems.missing")
    logged: list[str] = []
    with Harness(latency_ms=1.0, sizes=Sizes(rag=2, agent=2, scaling=(2,)), peer_python=None,
                 timeout_s=120, log=logged.append) as harness:
        harness.w1(["referee-batched", "referee"])
        rows = harness.finish()
    failed, measured = rows
    assert failed.error and "exit status 1" in failed.error and failed.ratio_to_referee is None
    assert measured.error is None and measured.evaluations == 2 * W1_EVALUATORS
    table = format_table(rows, 1.0)
    assert "FAILED" in table and "W1 at 2 cases FAILED, exit status 1" in table
    assert any("No module named" in line for line in logged)


def test_unknown_workload_or_system_is_refused():
    with pytest.raises(ValueError, match="W9"):
        run_benchmarks(["W9"], ["referee"], install=False)
    with pytest.raises(ValueError, match="ragas"):
        run_benchmarks(["W1"], ["ragas"], install=False)


def test_scripted_answers_are_the_good_answers_to_referees_questions():
    case = EvalCase(input="q", context=["c"], expected_output="e")
    actual = ExecutionResult(actual_response="a")
    for evaluator in (Faithfulness(), Hallucination(), Relevance(), AnswerAccuracy()):
        for question in evaluator.questions(actual, case):
            assert replies.good_answer(question.text) == question.expect_yes, question.text


def test_structured_output_verdicts_match_the_items_in_the_prompt():
    body = {"messages": [{"role": "user", "content": 'Claims:\n["a", "b", "c", "d"]\n\nJSON:'}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "Verdicts"}}}
    verdicts = json.loads(replies.reply_for(body))["verdicts"]
    assert len(verdicts) == 4 and all(v["verdict"] == "yes" for v in verdicts)


def test_unscriptable_prompt_is_an_error_not_a_guess():
    with pytest.raises(ValueError, match="no reply"):
        replies.reply_for({"messages": [{"role": "user", "content": "Write a poem."}]})


@pytest.mark.timeout(300)  # three runs of the referee runner, one per judge wire
def test_w5_bills_each_provider_from_a_run_on_its_own_wire():
    with Harness(latency_ms=1.0, sizes=Sizes(long_rag=2), peer_python=None, timeout_s=120,
                 log=lambda message: None) as harness:
        harness.w5(["referee-case-batched"])
        rows = harness.finish()
    row = _row(rows, "W5", "referee-case-batched", 2)
    assert row.judge_requests == 2  # one request per case
    assert row.bill is not None and row.bill.prompt_chars > 2 * 6000  # ~1,500 tokens of context
    notes = " ".join(row.notes)
    assert "anthropic column from a run on the anthropic wire" in notes
    assert "google column from a run on the google wire" in notes
    for provider in ("openai", "anthropic", "google"):
        assert row.bill.cost_usd[provider] > 0
        # One request per case finds nothing cached.
        assert row.bill.cached_tokens[provider] == 0
    # Claude Haiku 4.5 caches from 4,096 tokens: the prefix is left unmarked, nothing written.
    assert row.bill.write_tokens["anthropic"] == 0
    table = format_table(rows, 1.0)
    assert "billable in/case anthropic" in table and "$/1k cases gemini-2.5-flash" in table


def test_w6_judge_layer_counts_at_the_server():
    """The judge layer alone against a rate-limited server: every request answered, the
    limit learned, and the table built from the server's counts (no timing asserted beyond
    the rate being positive)."""
    from benchmarks.w6_judge import format_results, measure, paced_rate

    result = measure("openai", rpm=1200, requests=30, latency_ms=1.0, timeout_s=120)
    assert result.lost == 0
    assert result.admitted == 30 and result.received == 30 + result.rate_limited
    assert result.learned_rpm == 1200
    assert result.of_limit > 0 and sum(result.admitted_per_s) == 30
    assert "openai" in format_results([result])
    # An ideal client: a burst of 20 at once, then one every 50 ms: exactly the limit.
    assert paced_rate(0.0, [0.0] * 20 + [0.05 * i for i in range(1, 11)], 20) == pytest.approx(20)


def test_cpu_layers_measures_each_layer_in_its_own_process(capsys):
    """Every layer runs to the end and reports a positive CPU per request (its size is the
    benchmark's business, not a test's); an unknown layer is refused in one line."""
    import tempfile

    from benchmarks import cpu_layers

    def leftovers() -> set[str]:
        return {p.name for p in Path(tempfile.gettempdir()).glob("referee-cpu-layers-*")}

    before = leftovers()
    assert cpu_layers.main(["--requests", "64", "--rounds", "1"]) == 0
    assert leftovers() == before  # its caches and run directories are removed
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: float(line.split()[1]) for line in lines[2:]}
    assert set(rows) == set(cpu_layers.LAYERS) and all(v > 0 for v in rows.values())
    with pytest.raises(SystemExit):
        cpu_layers.main(["--layers", "judge,http2"])
    assert "unknown http2" in capsys.readouterr().err


def test_micro_costs_prints_each_per_call_cost(capsys):
    from benchmarks import micro_costs

    assert micro_costs.main() == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 8 and all(line.endswith(" us") and float(line.split()[-2]) > 0
                                   for line in lines)
