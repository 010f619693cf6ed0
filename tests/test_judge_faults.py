"""Retries, Retry-After, giving up, SDK retries off, connection reuse and the concurrency cap."""

from __future__ import annotations

import asyncio
import email.utils
import logging
import threading
import time

import pytest

from referee.errors import JudgeUnavailable
from referee.judge import Verdict, get_judge, parse_retry_after, parse_verdict
from referee.judge import retry as retry_module
from referee.judge.client import _endpoint_for
from referee.testing import DUMMY_API_KEY, FakeJudge, Fault, Reply, ScriptedJudgeServer

PROVIDERS = [("openai", "chat"), ("openai", "responses"), ("anthropic", "chat"), ("google", "chat")]


pytestmark = pytest.mark.usefixtures("isolated_judge")


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Backoff delays the judge asked for; the test does not actually wait them out."""
    recorded: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        recorded.append(seconds)

    monkeypatch.setattr(retry_module, "sleep", fake_sleep)
    return recorded


@pytest.mark.parametrize(("provider", "api_style"), PROVIDERS)
async def test_429_retry_after_is_honoured(judge_server: ScriptedJudgeServer, sleeps: list[float],
                                           provider: str, api_style: str) -> None:
    judge_server.enqueue_faults(Fault.rate_limit(retry_after=7))
    cfg = judge_server.judge_config(provider=provider, api_style=api_style)
    reply = await get_judge(cfg).complete("q")
    assert reply.text == "Yes" and reply.attempts == 2
    assert judge_server.request_count == 2  # exactly one retry: the SDK's own retries are off
    assert sleeps == [pytest.approx(7.0, abs=0.5)]  # the endpoint's pause, waited out once


async def test_retry_after_http_date_and_cap(judge_server: ScriptedJudgeServer,
                                             sleeps: list[float]) -> None:
    in_30s = email.utils.formatdate(time.time() + 30, usegmt=True)
    judge_server.enqueue_faults(Fault.rate_limit(retry_after=in_30s),
                                Fault.http(503, retry_after=3600))
    await get_judge(judge_server.judge_config(provider="openai")).complete("q")
    assert 15.0 <= sleeps[0] <= 30.0  # the date has second resolution; a busy machine is slow
    assert sleeps[1] == pytest.approx(retry_module.RETRY_AFTER_CAP_S, abs=0.5)


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after("12") == 12.0
    assert parse_retry_after("1.5") == 1.5
    assert parse_retry_after("-3") == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0


async def test_backoff_without_retry_after_grows_and_is_jittered(
        judge_server: ScriptedJudgeServer, sleeps: list[float]) -> None:
    judge_server.enqueue_faults(*[Fault.server_error(500)] * 4)
    await get_judge(judge_server.judge_config(provider="openai")).complete("q")
    policy = retry_module.RetryPolicy()
    assert len(sleeps) == 4
    for attempt, delay in enumerate(sleeps):
        ceiling = min(policy.max_delay_s, policy.initial_delay_s * 2 ** attempt)
        assert ceiling / 2 <= delay <= ceiling


@pytest.mark.parametrize(("provider", "api_style"), PROVIDERS)
async def test_gives_up_after_the_bound(judge_server: ScriptedJudgeServer, sleeps: list[float],
                                        provider: str, api_style: str) -> None:
    judge_server.set_reply(Fault.http(503))
    cfg = judge_server.judge_config(provider=provider, model="m-1", api_style=api_style,
                                    max_retries=2)
    with pytest.raises(JudgeUnavailable) as info:
        await get_judge(cfg).complete("q")
    assert judge_server.request_count == 3  # 1 + max_retries, never multiplied by SDK retries
    error = info.value
    assert (error.provider, error.model) == (provider, "m-1")
    assert error.cause is not None
    assert "503" in str(error) and "3 attempt(s)" in str(error)


async def test_gives_up_when_the_time_budget_cannot_cover_retry_after(
        judge_server: ScriptedJudgeServer, sleeps: list[float]) -> None:
    judge_server.set_reply(Fault.rate_limit(retry_after=30))
    cfg = judge_server.judge_config(provider="openai", rate_limit_wait_s=10)
    with pytest.raises(JudgeUnavailable, match="rate-limit wait budget"):
        await get_judge(cfg).complete("q")
    assert judge_server.request_count == 1 and sleeps == []


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_client_errors_are_not_retried(judge_server: ScriptedJudgeServer,
                                             sleeps: list[float], status: int) -> None:
    judge_server.set_reply(Fault.http(status))
    with pytest.raises(JudgeUnavailable, match=f"HTTP {status}.*not retryable"):
        await get_judge(judge_server.judge_config(provider="anthropic")).complete("q")
    assert judge_server.request_count == 1


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504, 529])
async def test_retryable_statuses(judge_server: ScriptedJudgeServer, sleeps: list[float],
                                  status: int) -> None:
    judge_server.enqueue_faults(Fault.http(status))
    reply = await get_judge(judge_server.judge_config(provider="openai")).complete("q")
    assert reply.attempts == 2


@pytest.mark.parametrize(("provider", "api_style"), PROVIDERS)
@pytest.mark.parametrize("fault", [Fault.reset(), Fault.truncated(), Fault.non_json()],
                         ids=["reset", "truncated", "non_json"])
async def test_transport_faults_are_retried(judge_server: ScriptedJudgeServer, sleeps: list[float],
                                            provider: str, api_style: str, fault: Fault) -> None:
    judge_server.enqueue_faults(fault)
    cfg = judge_server.judge_config(provider=provider, api_style=api_style)
    reply = await get_judge(cfg).complete("q")
    assert reply.text == "Yes" and judge_server.request_count == 2 and len(sleeps) == 1


async def test_hang_past_the_timeout_is_retried(judge_server: ScriptedJudgeServer,
                                                sleeps: list[float]) -> None:
    judge_server.enqueue_faults(Fault.hang())  # holds the request until the server stops
    cfg = judge_server.judge_config(provider="openai", timeout=0.5)
    reply = await get_judge(cfg).complete("q")
    assert reply.text == "Yes" and judge_server.request_count == 2


async def test_a_timed_out_deterministic_request_is_retried_once(
        judge_server: ScriptedJudgeServer, sleeps: list[float]) -> None:
    judge_server.set_reply(Fault.hang())
    cfg = judge_server.judge_config(provider="openai", timeout=0.3, max_retries=4)
    with pytest.raises(JudgeUnavailable, match=r"timeout .*after 2 attempt\(s\): a deterministic "
                                               r"request \(temperature 0\) that timed out is "
                                               r"retried 1 time\(s\) only; raise the timeout"):
        await get_judge(cfg).complete("q")
    assert judge_server.request_count == 2
    # Sampled at a temperature above 0, another attempt may answer differently: max_retries.
    judge_server.reset_record()
    with pytest.raises(JudgeUnavailable, match=r"after 5 attempt\(s\), attempts exhausted"):
        await get_judge(cfg).complete("q", temperature=0.7)
    assert judge_server.request_count == 5


async def test_other_failures_of_a_deterministic_request_keep_max_retries(
        judge_server: ScriptedJudgeServer, sleeps: list[float]) -> None:
    judge_server.set_reply(Fault.http(503))
    cfg = judge_server.judge_config(provider="openai", max_retries=3)
    with pytest.raises(JudgeUnavailable, match=r"after 4 attempt\(s\)"):
        await get_judge(cfg).complete("q")
    assert judge_server.request_count == 4


async def test_latency_is_timed_from_sending_not_from_the_queue(
        judge_server: ScriptedJudgeServer) -> None:
    judge_server.set_reply(Reply(text="Yes", latency_s=0.3))
    judge = get_judge(judge_server.judge_config(provider="openai", max_concurrency=1))
    replies = await asyncio.gather(*(judge.complete(f"q{i}") for i in range(3)))
    # One at a time: the third waited about 0.6 s for its permit, which is not the server's.
    assert judge_server.max_in_flight == 1
    assert all(0.25 <= r.latency_s < 0.55 for r in replies), [r.latency_s for r in replies]


@pytest.mark.parametrize(("provider", "api_style"), PROVIDERS)
async def test_empty_content_is_a_reply_not_a_verdict(judge_server: ScriptedJudgeServer,
                                                      provider: str, api_style: str) -> None:
    judge_server.set_reply(Fault.empty())
    reply = await get_judge(judge_server.judge_config(provider=provider,
                                                      api_style=api_style)).complete("q")
    assert reply.text == "" and parse_verdict(reply.text) is Verdict.UNKNOWN


async def test_bugs_are_not_disguised_as_outages(judge_server: ScriptedJudgeServer) -> None:
    with pytest.raises(TypeError, match="prompt must be a str"):
        await get_judge(judge_server.judge_config(provider="openai")).complete(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(("provider", "api_style"), PROVIDERS)
async def test_connection_and_client_are_reused(judge_server: ScriptedJudgeServer, provider: str,
                                                api_style: str) -> None:
    cfg = judge_server.judge_config(provider=provider, api_style=api_style)
    # Counted as a difference: an earlier test's server may have had this port.
    endpoint = _endpoint_for(cfg)
    clients_before = endpoint.clients_created
    for _ in range(3):
        await get_judge(cfg).complete("q")  # a fresh Judge object each time
    await get_judge(cfg.model_copy(update={"model": "another-model"})).complete("q")
    assert judge_server.request_count == 4
    assert judge_server.connection_count == 1
    assert endpoint.clients_created - clients_before == 1


async def test_concurrency_cap_is_respected(judge_server: ScriptedJudgeServer) -> None:
    judge_server.set_reply(Reply("Yes", latency_s=0.05))
    cfg = judge_server.judge_config(provider="openai", max_concurrency=4)
    # Two criteria with different models share the endpoint and so share the limit.
    judges = [get_judge(cfg), get_judge(cfg.model_copy(update={"model": "other"}))]
    replies = await asyncio.gather(*(judges[i % 2].complete(f"q{i}") for i in range(40)))
    assert all(r.text == "Yes" for r in replies)
    assert judge_server.request_count == 40
    assert 1 <= judge_server.max_in_flight <= 4
    assert judge_server.connection_count <= 4


async def test_default_concurrency_adapts_up_to_the_ceiling(judge_server: ScriptedJudgeServer) -> None:
    # 0.2 s, not less: the SDK client and this server share one process, and 64 requests in
    # flight at 0.05 s (1,280 a second) need more CPU than a 2-core machine has; the latency
    # then climbs for real, which rightly stops the window's growth (this failed under load).
    judge_server.set_reply(Reply("Yes", latency_s=0.2))
    cfg = judge_server.judge_config(provider="openai")  # no max_concurrency: adaptive
    judge = get_judge(cfg)
    assert cfg.max_concurrency is None and judge.max_concurrency == 64
    assert judge.concurrency_limit == 8  # it starts low
    replies = await asyncio.gather(*(judge.complete(f"q{i}") for i in range(300)))
    assert len(replies) == 300 and judge_server.request_count == 300
    # With no 429 and a steady latency it grew past the old fixed 16, never past 64.
    assert 16 < judge_server.max_in_flight <= 64
    assert 16 < judge.concurrency_limit <= 64


async def test_concurrency_cap_from_the_environment(judge_server: ScriptedJudgeServer,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    judge_server.set_reply(Reply("Yes", latency_s=0.05))
    monkeypatch.setenv("REFEREE_JUDGE_CONCURRENCY", "many")
    with pytest.raises(ValueError, match="REFEREE_JUDGE_CONCURRENCY='many' is not an integer"):
        get_judge(judge_server.judge_config(provider="openai"))
    monkeypatch.setenv("REFEREE_JUDGE_CONCURRENCY", "3")
    cfg = judge_server.judge_config(provider="openai")
    assert get_judge(cfg).max_concurrency == 3
    await asyncio.gather(*(get_judge(cfg).complete(f"q{i}") for i in range(12)))
    assert judge_server.request_count == 12 and 1 <= judge_server.max_in_flight <= 3


async def test_server_handles_hundreds_of_concurrent_requests(
        judge_server: ScriptedJudgeServer) -> None:
    judge_server.set_reply(Reply("Yes", latency_s=0.2))
    cfg = judge_server.judge_config(provider="openai", max_concurrency=200)
    replies = await asyncio.gather(*(get_judge(cfg).complete(f"q{i}") for i in range(200)))
    assert len(replies) == 200 and judge_server.request_count == 200
    assert judge_server.max_in_flight <= 200


def test_limit_holds_across_event_loops_and_threads(judge_server: ScriptedJudgeServer) -> None:
    # The engine may run on a private loop in a worker thread next to the caller's own loop.
    judge_server.set_reply(Reply("Yes", latency_s=0.05))
    cfg = judge_server.judge_config(provider="openai", max_concurrency=3)
    endpoint = _endpoint_for(cfg)
    clients_before = endpoint.clients_created
    results: list[int] = []
    errors: list[BaseException] = []

    def worker() -> None:
        async def run() -> int:
            judge = get_judge(cfg)
            replies = await asyncio.gather(*(judge.complete(f"q{i}") for i in range(8)))
            return len(replies)
        try:
            results.append(asyncio.run(run()))
        except BaseException as exc:  # reported below; a thread cannot raise into the test
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors and results == [8, 8, 8]
    assert judge_server.max_in_flight <= 3
    assert endpoint.clients_created - clients_before == 3  # one client per loop, one limit


async def test_cancelled_waiters_do_not_leak_slots() -> None:
    fake = FakeJudge(Reply("Yes", latency_s=0.05))
    cfg = fake.judge_config(max_concurrency=2)
    judge = get_judge(cfg)
    tasks = [asyncio.create_task(judge.complete(f"q{i}")) for i in range(10)]
    await asyncio.sleep(0.01)
    for task in tasks[2:6]:
        task.cancel()
    done = await asyncio.gather(*tasks, return_exceptions=True)
    assert sum(isinstance(d, asyncio.CancelledError) for d in done) == 4
    assert _endpoint_for(cfg).limiter.active == 0
    assert fake.max_in_flight <= 2


async def test_fake_judge_goes_through_the_same_retry_path(sleeps: list[float]) -> None:
    fake = FakeJudge("No")
    fake.enqueue_faults(Fault.rate_limit(retry_after=2), Fault.reset(), Fault.truncated())
    reply = await get_judge(fake.judge_config()).complete("q")
    assert reply.text == "No" and reply.attempts == 4 and fake.request_count == 4
    assert sleeps[0] == pytest.approx(2.0, abs=0.5)


async def test_retries_are_logged_without_secrets(judge_server: ScriptedJudgeServer,
                                                  sleeps: list[float],
                                                  caplog: pytest.LogCaptureFixture) -> None:
    judge_server.enqueue_faults(Fault.rate_limit(retry_after=1), Fault.http(500))
    with caplog.at_level(logging.INFO, logger="referee.judge"):
        await get_judge(judge_server.judge_config(provider="openai")).complete("q")
    assert "HTTP 429" in caplog.text and "endpoint paused" in caplog.text
    assert "HTTP 500" in caplog.text and "retry 1/4" in caplog.text
    assert judge_server.requests[0].headers["authorization"].endswith(DUMMY_API_KEY)
    assert DUMMY_API_KEY not in caplog.text


async def test_unavailable_message_carries_the_providers_words(judge_server: ScriptedJudgeServer,
                                                               sleeps: list[float]) -> None:
    judge_server.set_reply(Fault.http(
        404, body='{"error": {"message": "model house-9 does not exist, key sk-abcdefgh12345678",'
                  ' "type": "invalid_request_error"}}'))
    with pytest.raises(JudgeUnavailable) as info:
        await get_judge(judge_server.judge_config(provider="openai", model="house-9")).complete("q")
    message = str(info.value)
    assert message.startswith("judge openai/house-9 unavailable: HTTP 404")
    assert "does not exist" in message
    assert "sk-abcdefgh12345678" not in message


async def test_openai_json_mode_always_mentions_json(judge_server: ScriptedJudgeServer) -> None:
    # OpenAI rejects JSON mode when no message says "JSON"; the judge layer makes sure one does.
    judge_server.set_reply('{"score": 1}')
    for api_style in ("chat", "responses"):
        cfg = judge_server.judge_config(provider="openai", api_style=api_style)
        await get_judge(cfg).complete("Rate this answer from 0 to 1.", json_mode=True)
    for request in judge_server.requests:
        assert "json" in (request.system or "").lower()


async def test_streaming_requests_are_refused_clearly(judge_server: ScriptedJudgeServer) -> None:
    import openai

    client = openai.AsyncOpenAI(api_key="k", base_url=judge_server.base_url(), max_retries=0)
    with pytest.raises(openai.BadRequestError, match="does not stream"):
        await client.chat.completions.create(model="m", stream=True,
                                             messages=[{"role": "user", "content": "q"}])
    await client.close()


def test_stopping_the_server_closes_the_keep_alive_connections_it_accepted() -> None:
    # Each open keep-alive connection holds a server thread and the client's socket; a test
    # session makes hundreds, so the server must close them when it stops.
    import http.client
    import json
    from urllib.parse import urlsplit

    server = ScriptedJudgeServer("Yes").start()
    threads_before = set(threading.enumerate())
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "q"}]})
    connection.request("POST", urlsplit(server.base_url("openai")).path + "/chat/completions",
                       body, {"Content-Type": "application/json",
                              "Authorization": f"Bearer {DUMMY_API_KEY}"})
    assert connection.getresponse().read()  # answered; the connection stays open
    handler_threads = [t for t in set(threading.enumerate()) - threads_before
                       if "process_request" in t.name]
    assert handler_threads  # one waits on this connection for its next request
    server.stop()
    for thread in handler_threads:
        thread.join(timeout=10)
    assert not any(t.is_alive() for t in handler_threads)
    assert connection.sock.recv(1) == b""  # the client sees the connection closed
    connection.close()
