"""A local OpenAI-compatible server as the judge (issue 20, "Local servers work from the README
as written"): concurrency that finds the server's slots, and short per-question verdicts."""

from __future__ import annotations

import asyncio

import pytest

from referee import CustomRubric, EvalCase
from referee.errors import JudgeUnavailable
from referee.execution import ExecutionResult
from referee.judge import JudgeConfig, get_judge, resolve_judge_config
from referee.judge.config import VERDICT_MAX_TOKENS, is_provider_endpoint, verdict_max_tokens
from referee.judge.limiter import (
    INITIAL_CONCURRENCY,
    SELF_HOSTED_INITIAL_CONCURRENCY,
    BudgetSettings,
    EndpointLimiter,
)
from referee.testing import Fault, Reply, ScriptedJudgeServer

pytestmark = pytest.mark.usefixtures("isolated_judge")


def test_a_base_url_other_than_the_providers_is_self_hosted():
    assert is_provider_endpoint("openai", "")
    assert is_provider_endpoint("openai", "https://api.openai.com/v1")
    assert not is_provider_endpoint("openai", "http://127.0.0.1:8080/v1")
    assert not is_provider_endpoint("anthropic", "https://llm-gateway.example.com")
    # A stand-in for the provider declares itself one; one that emulates a local server not.
    with ScriptedJudgeServer() as provider, ScriptedJudgeServer(local=True) as local:
        url = provider.base_url("openai")
        assert is_provider_endpoint("openai", url)
        assert get_judge(provider.judge_config()).concurrency_limit == INITIAL_CONCURRENCY
        assert not is_provider_endpoint("openai", local.base_url("openai"))
        assert get_judge(local.judge_config()).concurrency_limit == 2
    assert not is_provider_endpoint("openai", url)  # withdrawn when it stopped


def test_a_self_hosted_endpoint_starts_lower_than_a_provider():
    assert EndpointLimiter(BudgetSettings()).limit == INITIAL_CONCURRENCY == 8
    assert EndpointLimiter(BudgetSettings(self_hosted=True)).limit == (
        SELF_HOSTED_INITIAL_CONCURRENCY) == 2
    # A pinned limit is exactly what was asked for, wherever the server is.
    assert EndpointLimiter(BudgetSettings(max_concurrency=6, pinned=True,
                                          self_hosted=True)).limit == 6


async def test_the_adaptive_limit_finds_a_local_servers_slots():
    # Four slots, as `llama-server --parallel 4`: a fifth request waits at the server, and that
    # wait would count against the judge's timeout.
    with ScriptedJudgeServer(Reply("Yes", latency_s=0.1), slots=4) as server:
        judge = get_judge(server.judge_config(provider="openai"))
        assert judge.concurrency_limit == 2
        await asyncio.gather(*(judge.complete(f"q{i}") for i in range(160)))
        assert server.request_count == 160
        # Slow start overshoots once (2, 4, 8), sees the queue and comes back to the slots; it
        # then probes a few past them and comes back again (4-7 here; a loaded machine's
        # latency noise may cut it one lower).
        assert 3 <= judge.concurrency_limit <= 7, judge.concurrency_limit
        assert server.max_in_flight <= 8


async def test_many_slots_are_used():
    with ScriptedJudgeServer(Reply("Yes", latency_s=0.1), slots=24) as server:
        judge = get_judge(server.judge_config(provider="openai"))
        await asyncio.gather(*(judge.complete(f"q{i}") for i in range(200)))
        assert 18 <= judge.concurrency_limit <= 36, judge.concurrency_limit


def test_verdicts_are_short_at_a_local_server_unless_max_tokens_is_set():
    local = resolve_judge_config(JudgeConfig(provider="openai", model="llama3",
                                             base_url="http://127.0.0.1:8080/v1"))
    assert local.max_tokens == 1024  # resolution still fills the documented default
    assert verdict_max_tokens(local) == VERDICT_MAX_TOKENS == 128
    chosen = resolve_judge_config(JudgeConfig(provider="openai", model="llama3", max_tokens=1024,
                                              base_url="http://127.0.0.1:8080/v1"))
    assert verdict_max_tokens(chosen) == 1024
    # A resolved config passed on as a layer keeps its max_tokens a default.
    assert verdict_max_tokens(resolve_judge_config(local)) == 128
    hosted = resolve_judge_config(JudgeConfig(provider="openai", model="gpt-4o-mini"))
    assert verdict_max_tokens(hosted) == 1024  # a provider's own API: tokens are not wall time


async def test_per_question_verdicts_ask_for_few_tokens_at_a_local_server():
    case = EvalCase(input="Where is my order?")
    rubric = [("Is the answer polite?", True)]
    with ScriptedJudgeServer("Yes", local=True) as server:
        await CustomRubric(rubric, judge=server.judge_config(provider="openai")).evaluate(
            ExecutionResult(actual_response="It shipped."), case)
        await CustomRubric(rubric, judge=server.judge_config(
            provider="openai", max_tokens=400)).evaluate(
            ExecutionResult(actual_response="It shipped."), case)
        assert [r.max_tokens for r in server.requests] == [128, 400]


async def test_a_timeout_at_a_self_hosted_server_halves_the_window():
    from referee.judge.limiter import Outcome

    for self_hosted, after in ((True, 1), (False, INITIAL_CONCURRENCY)):
        budget = EndpointLimiter(BudgetSettings(self_hosted=self_hosted))
        permits = [await budget.lease(10) for _ in range(budget.limit)]
        for permit in permits:  # all in flight when it timed out: one cut, not one per request
            budget.settle(permit, Outcome("timed_out", latency_s=30.0))
        # Our own server answering nothing in time is queueing: fewer at once. A provider's
        # timeout says nothing about its capacity.
        assert budget.limit == after, self_hosted


async def test_timeouts_cut_the_window_through_the_judge():
    with ScriptedJudgeServer(Fault.hang(2), local=True) as server:
        judge = get_judge(server.judge_config(provider="openai", timeout=0.3, max_retries=0))
        assert judge.concurrency_limit == 2
        results = await asyncio.gather(*(judge.complete(f"q{i}") for i in range(2)),
                                       return_exceptions=True)
        assert all(isinstance(r, JudgeUnavailable) for r in results)
        assert judge.concurrency_limit == 1
