"""Backpressure, sampling, the judge spend cap and /metrics, verified with counts."""

from __future__ import annotations

import asyncio
import hashlib
import time
from typing import Any

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.sdk.trace.export import SpanExportResult  # noqa: E402
from otlp_receiver import receiver  # noqa: E402
from traffic import make_traces, scrape, trace_id  # noqa: E402

from referee.evaluators.deterministic import Contains  # noqa: E402
from referee.evaluators.safety import Toxicity  # noqa: E402
from referee.result import CriterionResult  # noqa: E402
from referee.serve import Sampler, SamplingRule  # noqa: E402
from referee.serve._alerts import AlertRule  # noqa: E402
from referee.store import list_runs, load_run  # noqa: E402
from referee.testing import Reply, ScriptedJudgeServer  # noqa: E402


class SlowCheck:
    """A deterministic check that takes ``seconds`` per case: a known scoring rate."""

    name = "slow_check"
    threshold = 1.0

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def evaluate(self, actual: Any, expected: Any) -> CriterionResult:
        await asyncio.sleep(self.seconds)
        return CriterionResult(criterion=self.name, score=1.0, passed=True, threshold=1.0)


def export_all(url: str, traces: list[list[Any]], per_request: int = 1,
               every_s: float = 0.0) -> list[SpanExportResult]:
    """Each trace (or ``per_request`` of them) in one request, one request per ``every_s``
    at most (as fast as the exporter goes with 0)."""
    exporter = OTLPSpanExporter(endpoint=f"{url}/v1/traces", timeout=120)
    results = []
    try:
        for i in range(0, len(traces), per_request):
            results.append(exporter.export([s for t in traces[i:i + per_request] for s in t]))
            time.sleep(every_s)
        return results
    finally:
        exporter.shutdown()


def stored(tmp_path: Any) -> Any:
    (run,) = list_runs(tmp_path / "runs")
    return load_run(run.path)


async def test_an_exporter_at_ten_times_the_scoring_rate_is_told_to_retry_and_loses_nothing(
        tmp_path):
    traces = make_traces(40, children=2)  # 3 spans each
    # One case at a time, 50 ms each: 20 cases/s. The exporter offers a trace every 5 ms
    # (200/s, ten times that), so the 12-span bound is met at once and 503s follow.
    async with receiver([SlowCheck(0.05)], tmp_path, concurrency=1, max_pending_spans=12,
                        max_queue=2) as (scorer, url):
        results = await asyncio.to_thread(export_all, url, traces, 1, 0.005)
        await scorer.drain()
        metrics = await asyncio.to_thread(scrape, url)
    assert results == [SpanExportResult.SUCCESS] * len(traces)  # every one, after retries
    assert metrics["referee_serve_rejected_total"] > 0
    assert metrics['referee_serve_requests_total{signal="traces",code="503"}'] > 0
    assert metrics['referee_serve_requests_total{signal="traces",code="200"}'] == len(traces)
    # Memory stays bounded: never more than the bound plus the one request let in at it.
    assert metrics["referee_serve_pending_spans_peak"] <= 12 + 3
    assert metrics["referee_serve_dropped_total"] == 0
    report = stored(tmp_path)
    assert sorted(c.eval_id for c in report.cases) == sorted(trace_id(t) for t in traces)
    assert report.passed == len(traces)


def fraction(key: str) -> float:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2.0 ** 64


async def test_sampling_rules_decide_by_trace_id_and_always_score_errors_and_marked(tmp_path):
    chat = make_traces(120, route="/chat", error=(3, 7), marked=(11,))
    search = make_traces(40, route="/search", start=1000)
    other = make_traces(30, service="batch", route="/nightly", start=2000)
    sampler = Sampler((SamplingRule.parse("service=shop,route=/chat:0.25"),
                       SamplingRule.parse("route=/search:1")), default_rate=0.0)
    async with receiver([Contains("answer")], tmp_path, sampler=sampler) as (scorer, url):
        await asyncio.to_thread(export_all, url, chat + search + other, 10)
        await scorer.drain()
        metrics = await asyncio.to_thread(scrape, url)

    always = {trace_id(chat[i]) for i in (3, 7, 11)}
    expected = {trace_id(t) for t in chat if fraction(trace_id(t)) < 0.25} | always | {
        trace_id(t) for t in search}
    report = stored(tmp_path)
    scored = {c.eval_id for c in report.cases}
    assert scored == expected
    assert 20 <= len(expected - always - {trace_id(t) for t in search}) <= 45  # about 30 of 117
    sampled_out = len(chat) + len(search) + len(other) - len(expected)
    assert report.metadata["sampled_out"] == sampled_out
    assert metrics['referee_serve_cases_sampled_out_total{rule="default"}'] == len(other)
    assert metrics['referee_serve_cases_sampled_out_total{rule="service=shop,route=/chat:0.25"}'
                   ] == len(chat) - len(expected & {trace_id(t) for t in chat})
    # Deterministic by id: a replica (its own spool and runs) scores the very same traces.
    replica = tmp_path / "replica"
    async with receiver([Contains("answer")], replica, sampler=sampler) as (other_scorer, url):
        await asyncio.to_thread(export_all, url, chat + search + other, 10)
        await other_scorer.drain()
    assert {c.eval_id for c in stored(replica).cases} == scored


def test_a_sampling_rule_that_cannot_be_read_names_what_was_expected():
    with pytest.raises(Exception, match="KEY=VALUE"):
        SamplingRule.parse("route=/chat")
    with pytest.raises(Exception, match="KEY one of service, route, agent, tag, error"):
        SamplingRule.parse("colour=blue:0.5")
    with pytest.raises(Exception, match="error=true or error=false"):
        SamplingRule.parse("error=yes:1")


async def test_past_the_spend_cap_judged_criteria_are_skipped_for_budget_and_checks_run(
        tmp_path, isolated_judge):
    # gpt-4o-mini at $0.15 per million input tokens: each Toxicity question (5 per case)
    # costs $0.015 at 100k tokens, a case $0.075. A $0.20 hourly cap lets three cases through.
    with ScriptedJudgeServer(Reply("No", input_tokens=100_000, output_tokens=0)) as server:
        judged = Toxicity(judge=server.judge_config(provider="openai", model="gpt-4o-mini"))
        traces = make_traces(8)
        async with receiver([judged, Contains("answer")], tmp_path, concurrency=1,
                            spend_per_hour=0.20) as (scorer, url):
            await asyncio.to_thread(export_all, url, traces)
            await scorer.drain()
            metrics = await asyncio.to_thread(scrape, url)
        requests = server.request_count

    report = stored(tmp_path)
    by_outcome: dict[str, int] = {}
    for case in report.cases:
        toxicity, contains = case.criterion_results
        outcome = "budget" if toxicity.details.get("skipped_for_budget") else "judged"
        by_outcome[outcome] = by_outcome.get(outcome, 0) + 1
        assert contains.passed and not contains.skipped  # deterministic ones still run
        if outcome == "budget":
            assert toxicity.skipped and "skipped for budget" in toxicity.details["reason"]
    assert by_outcome == {"judged": 3, "budget": 5}
    assert requests == 3 * 5
    assert report.metadata["skipped_for_budget"] == 5
    assert metrics["referee_serve_judge_spend_usd_total"] == pytest.approx(3 * 0.075)
    assert metrics['referee_serve_criterion_results_total{criterion="toxicity",'
                   'outcome="skipped_for_budget"}'] == 5
    assert metrics["referee_serve_judge_spend_cap_hour_usd"] == 0.20


async def test_a_pass_rate_below_its_gate_alerts_once_per_window_and_posts_the_webhook(
        tmp_path):
    from aiohttp import web

    posted: list[dict[str, Any]] = []

    async def hook(request: web.Request) -> web.Response:
        posted.append(await request.json())
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/hook", hook)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    hook_url = f"http://127.0.0.1:{runner.addresses[0][1]}/hook"
    # "answer 1" is in one answer of six ("answer 0" ... "answer 5"): 1/6 < 0.5.
    try:
        async with receiver([Contains("answer 1"), Contains("answer")], tmp_path,
                            alerts=(AlertRule.parse("contains=0.5"),
                                    AlertRule.parse("contains#2=0.5")),
                            alert_min_cases=4, webhook=hook_url) as (scorer, url):
            fired: list[Any] = []
            scorer.on_alert = fired.append
            await asyncio.to_thread(export_all, url, make_traces(6))
            await scorer.drain()
            metrics = await asyncio.to_thread(scrape, url)
    finally:
        await runner.cleanup()
    assert [a.criterion for a in fired] == ["contains"]  # contains#2 passes every case
    assert fired[0].verdicts >= 4 and fired[0].pass_rate < 0.5
    assert len(posted) == 1 and posted[0]["criterion"] == "contains"
    assert posted[0]["gate"] == 0.5 and posted[0]["window_run"] == stored(tmp_path).run_id
    assert metrics['referee_serve_alerts_total{criterion="contains"}'] == 1
    assert metrics["referee_serve_webhook_failures_total"] == 0


def test_exit_on_alert_stops_the_server_with_exit_code_1(tmp_path):
    from traffic import SUITE, free_port, start_server

    suite = tmp_path / "suite.py"
    suite.write_text(SUITE.replace('Contains("answer")', 'Contains("answer 1")'),
                     encoding="utf-8")
    port = free_port()
    server = start_server(suite, port, tmp_path, "--alert", "contains=0.9",
                          "--alert-min-cases", "3", "--exit-on-alert")
    try:
        export_all(f"http://127.0.0.1:{port}", make_traces(5))
        assert server.wait(30) == 1
        assert server.stderr is not None
        assert "alert: contains pass rate" in server.stderr.read()
    finally:
        if server.poll() is None:
            server.kill()
    (run,) = list_runs(tmp_path / "runs")
    assert run.finished  # the window's report was written on the way out


def test_an_alert_on_a_criterion_the_suite_lacks_is_bad_input(tmp_path):
    import subprocess
    import sys

    from traffic import SUITE, server_env

    suite = tmp_path / "suite.py"
    suite.write_text(SUITE, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "referee", "serve", str(suite), "--port", "0",
                           "--spool", str(tmp_path / "spool"), "--alert", "faithfulness=0.9"],
                          capture_output=True, text=True, cwd=tmp_path,
                          env=server_env(), timeout=60)
    assert done.returncode == 2
    assert "--alert faithfulness: no such criterion" in done.stderr
    assert "its criteria: contains" in done.stderr


def test_a_bad_sampling_rule_on_the_command_line_is_one_line_and_exit_2(tmp_path):
    import subprocess
    import sys

    from traffic import SUITE, server_env

    suite = tmp_path / "suite.py"
    suite.write_text(SUITE, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "referee", "serve", str(suite), "--port", "0",
                           "--spool", str(tmp_path / "spool"), "--sample", "colour=blue:0.5"],
                          capture_output=True, text=True, cwd=tmp_path, env=server_env(),
                          timeout=60)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "colour=blue" in done.stderr and "KEY one of service" in done.stderr


async def test_rules_match_agent_tag_and_error_attributes_of_real_spans(tmp_path):
    refunds = make_traces(6, agent="refunds", tags="vip,beta")
    helpers = make_traces(6, agent="helper", start=100, error=(100, 101))
    sampler = Sampler((SamplingRule.parse("tag=vip:1"), SamplingRule.parse("error=false:0")),
                      default_rate=1.0, always_errors=False)
    only_errors = Sampler((SamplingRule.parse("agent=help*,error=true:1"),), default_rate=0.0,
                          always_errors=False)
    # The first: vip traces by rule, helpers without an error span by rule (rate 0), the two
    # with one by the default rate. The second: a wildcard agent and error status together.
    for chosen, expected in ((sampler, refunds + helpers[:2]), (only_errors, helpers[:2])):
        folder = tmp_path / str(len(expected))
        async with receiver([Contains("answer")], folder, sampler=chosen) as (scorer, url):
            await asyncio.to_thread(export_all, url, refunds + helpers, 4)
            await scorer.drain()
        assert {c.eval_id for c in stored(folder).cases} == {trace_id(t) for t in expected}
