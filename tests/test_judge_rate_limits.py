"""Rate limits as a pace: endpoint-wide pauses, adaptive concurrency, rpm/tpm budgets and the
providers' rate-limit headers, through the real SDKs against the scripted server.

Timing is only ever checked as a lower bound with wide margins (a slow machine makes runs
longer, never shorter), or through counts the server keeps.
"""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace

import pytest

from referee.errors import JudgeUnavailable
from referee.judge import client as client_module
from referee.judge import get_judge
from referee.judge import limiter as limiter_module
from referee.judge.client import _endpoint_for
from referee.judge.limiter import (
    BudgetSettings,
    EndpointIdentity,
    EndpointLimiter,
    Outcome,
    Permit,
    read_rate_limit_headers,
)
from referee.testing import FakeJudge, Fault, Reply, ScriptedJudgeServer
from referee.testing.server import DUMMY_API_KEY

pytestmark = pytest.mark.usefixtures("isolated_judge")


async def _ask(judge, count: int, prefix: str = "q") -> list:
    return await asyncio.gather(*(judge.complete(f"{prefix}{i}") for i in range(count)))


async def test_a_429_pauses_the_whole_endpoint(judge_server: ScriptedJudgeServer) -> None:
    judge_server.set_reply(Reply("Yes", latency_s=0.05))
    judge_server.enqueue_faults(Fault.rate_limit(retry_after=0.5))
    judge = get_judge(judge_server.judge_config(provider="openai", max_concurrency=4))
    replies = await _ask(judge, 12)
    assert all(r.text == "Yes" for r in replies)
    requests = judge_server.requests
    refused_at = requests[0].arrived_at
    assert requests[0].path.endswith("/chat/completions")
    # The three sent alongside the refused one were already on their way; every later request,
    # the refused one's retry included, waited for the pause instead of finding the limit itself.
    later = [r.arrived_at for r in requests[4:]]
    assert len(later) == 9 and min(later) >= refused_at + 0.4


async def test_adaptive_concurrency_halves_on_429_and_grows_back(
        judge_server: ScriptedJudgeServer) -> None:
    judge_server.set_reply(Reply("Yes", latency_s=0.02))
    judge = get_judge(judge_server.judge_config(provider="openai"))
    await _ask(judge, 200)
    grown = judge.concurrency_limit
    assert grown > 8
    judge_server.enqueue_faults(*[Fault.rate_limit(retry_after=0.05)] * 3)
    await _ask(judge, 12, prefix="r")
    cut = judge.concurrency_limit
    # The three 429s of one round trip cut once, by half; a few successes add little back.
    assert cut <= grown // 2 + 1
    assert _endpoint_for(judge.config).limiter.rate_limited == 3


async def test_building_the_client_is_not_the_providers_latency(
        judge_server: ScriptedJudgeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A loop's first request builds its SDK client (in a cold process, the SDK's import:
    seconds). Counted as that request's latency it set the smoothed latency far above the
    floor, which ended slow start at the starting window (the adaptive test failed on a busy
    machine)."""
    clock_offset = [0.0]
    monotonic = time.monotonic
    monkeypatch.setattr(client_module, "time",
                        SimpleNamespace(monotonic=lambda: monotonic() + clock_offset[0]))
    adapter = client_module.adapter_for("openai")
    make_client = adapter.make_client

    def slow_make_client(*args):
        clock_offset[0] += 100.0  # building the client "takes" 100 s
        return make_client(*args)

    monkeypatch.setattr(adapter, "make_client", slow_make_client)
    latencies: list[float] = []

    class RecordingBudget(EndpointLimiter):
        def settle(self, permit: Permit, outcome: Outcome) -> None:
            latencies.append(outcome.latency_s)
            super().settle(permit, outcome)

    limiter_module.set_budget_factory(lambda settings, endpoint: RecordingBudget(settings))
    try:
        await get_judge(judge_server.judge_config(provider="openai")).complete("q")
    finally:
        limiter_module.set_budget_factory(None)
    assert clock_offset[0] == 100.0 and len(latencies) == 1
    assert latencies[0] < 50.0  # the round trip only


async def test_an_explicit_cap_is_never_grown_nor_passed(judge_server: ScriptedJudgeServer) -> None:
    judge_server.set_reply(Reply("Yes", latency_s=0.02))
    judge = get_judge(judge_server.judge_config(provider="openai", max_concurrency=6))
    await _ask(judge, 120)
    assert judge.concurrency_limit == 6 and judge_server.max_in_flight <= 6
    judge_server.enqueue_faults(Fault.rate_limit(retry_after=0.05))
    await _ask(judge, 12, prefix="r")
    assert judge.concurrency_limit == 6  # pinned: a 429 pauses but does not cut


async def test_429s_past_the_wait_budget_are_a_judge_error(judge_server: ScriptedJudgeServer) -> None:
    cfg = judge_server.judge_config(provider="anthropic", rate_limit_wait_s=2.0)
    await get_judge(cfg).complete("warm-up")  # the SDK's import and client are not the test
    judge_server.set_reply(Fault.rate_limit(retry_after=0.3))
    with pytest.raises(JudgeUnavailable, match="rate-limit wait budget"):
        await get_judge(cfg).complete("q")
    # It kept going at the provider's pace within the budget: retried, and gave up in the end.
    assert judge_server.request_count - 1 >= 2


async def test_insufficient_quota_is_not_retried(judge_server: ScriptedJudgeServer) -> None:
    judge_server.set_reply(Fault.quota_exhausted())
    with pytest.raises(JudgeUnavailable, match="quota exhausted.*not retryable"):
        await get_judge(judge_server.judge_config(provider="openai")).complete("q")
    assert judge_server.request_count == 1


async def test_rpm_budget_is_honoured_at_the_server(judge_server: ScriptedJudgeServer) -> None:
    judge = get_judge(judge_server.judge_config(provider="openai", rpm=1200))  # 20/s, burst 20
    started = time.monotonic()
    await _ask(judge, 50)
    arrivals = sorted(r.arrived_at for r in judge_server.requests)
    assert len(arrivals) == 50
    # 20 at once, then one every 50 ms: the last of the other 30 cannot arrive before 1.5 s.
    assert arrivals[-1] - started >= 1.5 * 0.8
    # Sending and arriving drift apart on a busy machine: allow a whole second's worth more.
    first_half_second = [t for t in arrivals if t < arrivals[0] + 0.5]
    assert len(first_half_second) <= 20 + 20


async def test_tpm_budget_is_honoured_at_the_server(judge_server: ScriptedJudgeServer) -> None:
    judge_server.set_reply(Reply("Yes", input_tokens=100, output_tokens=1))
    # 1,000 tokens a second, a burst of 1,000; each request bills 101 tokens.
    judge = get_judge(judge_server.judge_config(provider="openai", tpm=60_000))
    started = time.monotonic()
    await asyncio.gather(*(judge.complete(f"q{i} " + "word " * 95) for i in range(30)))
    arrivals = sorted(r.arrived_at for r in judge_server.requests)
    # 3,030 tokens, 1,000 of them at once: about 2 s for the rest.
    assert arrivals[-1] - started >= 2.0 * 0.7
    first_half_second = [t for t in arrivals if t < arrivals[0] + 0.5]
    assert len(first_half_second) * 101 <= 1000 + 1000 + 300


def test_budgets_from_the_environment(monkeypatch: pytest.MonkeyPatch,
                                      judge_server: ScriptedJudgeServer) -> None:
    monkeypatch.setenv("REFEREE_JUDGE_RPM", "lots")
    with pytest.raises(ValueError, match="REFEREE_JUDGE_RPM='lots' is not a number"):
        get_judge(judge_server.judge_config(provider="openai"))
    monkeypatch.setenv("REFEREE_JUDGE_RPM", "300")
    monkeypatch.setenv("REFEREE_JUDGE_TPM", "90000")
    budget = _endpoint_for(judge_server.judge_config(provider="openai")).limiter
    assert budget.requests_per_minute == 300 and budget.tokens_per_minute == 90000


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_rate_limit_headers_slow_down_before_the_429(judge_server: ScriptedJudgeServer,
                                                          provider: str) -> None:
    judge_server.set_reply(Reply("Yes", latency_s=0.01))
    judge_server.set_rate_limit(rpm=1200)  # 20 a second, a burst of 20
    judge = get_judge(judge_server.judge_config(provider=provider))  # no budget of its own
    replies = await _ask(judge, 60)
    assert len(replies) == 60
    budget = _endpoint_for(judge.config).limiter
    assert budget.requests_per_minute == 1200  # learned from the headers
    # Told the pace by every reply, it waits its turn instead of being refused (with the
    # headers ignored, the same run meets about 26 429s).
    assert judge_server.rate_limited_count <= 8
    assert judge_server.request_count - judge_server.rate_limited_count == 60


def test_a_reported_shortfall_keeps_the_queue_already_reserved() -> None:
    """A reply saying fewer are left than we have already queued must push the queue back,
    never forget it: clamping the shortfall to zero let a dozen queued requests start at once
    and meet a run of 429s (the flaky header test's cause)."""
    now = 100.0
    bucket = limiter_module._Bucket(per_minute=1200, capacity=10, now=now)
    starts = [bucket.reserve(1.0, now) for _ in range(16)]  # 10 at once, then one per 50 ms
    assert starts[-1] == pytest.approx(now + 0.30)
    bucket.cap_available(-8.0, now)  # the provider has 8 fewer than even that queue assumes
    assert bucket.available(now) == pytest.approx(-8.0)
    assert bucket.reserve(1.0, now) == pytest.approx(now + 0.45)  # behind the shortfall


async def test_the_server_refuses_like_a_provider(judge_server: ScriptedJudgeServer) -> None:
    import httpx

    judge_server.set_rate_limit(rpm=60, tpm=10_000)  # one a second, a burst of one
    url = f"{judge_server.base_url('openai')}/chat/completions"
    body = {"model": "m", "messages": [{"role": "user", "content": "hello there"}]}
    async with httpx.AsyncClient() as client:
        ok = await client.post(url, json=body)
        refused = await client.post(url, json=body)
    assert ok.status_code == 200 and refused.status_code == 429
    assert ok.headers["x-ratelimit-limit-requests"] == "60"
    assert ok.headers["x-ratelimit-remaining-requests"] == "0"
    assert ok.headers["x-ratelimit-limit-tokens"] == "10000"
    assert 0 < int(refused.headers["retry-after-ms"]) <= 1000
    assert refused.headers["retry-after"] == "1"
    seen = read_rate_limit_headers(refused.headers)
    assert seen is not None and seen.limit_requests == 60 and seen.remaining_requests == 0
    assert 0 < (seen.reset_requests_s or 0) <= 1.0
    assert judge_server.rate_limited_count == 1


def test_reading_anthropic_headers() -> None:
    seen = read_rate_limit_headers({
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "49",
        "anthropic-ratelimit-requests-reset": "2026-01-01T00:00:01Z",
        "anthropic-ratelimit-input-tokens-limit": "40000",
        "anthropic-ratelimit-input-tokens-remaining": "39000",
    }, now=1767225600.0)  # 2026-01-01T00:00:00Z
    assert seen is not None
    assert (seen.limit_requests, seen.remaining_requests, seen.reset_requests_s) == (50, 49, 1.0)
    assert (seen.limit_tokens, seen.remaining_tokens) == (40000, 39000)
    assert read_rate_limit_headers({"content-type": "application/json"}) is None


async def test_budgets_are_pluggable(judge_server: ScriptedJudgeServer) -> None:
    """A budget held elsewhere (one per cluster, say) plugs in through set_budget_factory."""
    leases: list[int] = []
    outcomes: list[str] = []

    class CountingBudget(EndpointLimiter):
        async def lease(self, tokens: int) -> Permit:
            leases.append(tokens)
            return await super().lease(tokens)

        def settle(self, permit: Permit, outcome: Outcome) -> None:
            outcomes.append(outcome.kind)
            super().settle(permit, outcome)

    endpoints: list[EndpointIdentity] = []

    def factory(settings: BudgetSettings, endpoint: EndpointIdentity) -> EndpointLimiter:
        endpoints.append(endpoint)
        return CountingBudget(settings)

    limiter_module.set_budget_factory(factory)
    try:
        judge_server.enqueue_faults(Fault.rate_limit(retry_after=0.01))
        reply = await get_judge(judge_server.judge_config(provider="openai")).complete("q" * 40)
    finally:
        limiter_module.set_budget_factory(None)
    assert reply.text == "Yes"
    assert leases == [10 + 16, 10 + 16] and outcomes == ["rate_limited", "ok"]
    # The factory learns which endpoint it builds for, but never the key itself.
    [endpoint] = endpoints
    assert (endpoint.provider, endpoint.base_url) == ("openai", judge_server.base_url("openai"))
    assert DUMMY_API_KEY not in repr(endpoint) and len(endpoint.digest) == 32


async def test_the_fake_judge_enforces_a_rate_limit_too() -> None:
    fake = FakeJudge("Yes")
    fake.set_rate_limit(rpm=600)  # ten a second, a burst of ten
    judge = get_judge(fake.judge_config(max_concurrency=20))
    replies = await _ask(judge, 14)
    assert [r.text for r in replies] == ["Yes"] * 14
    # The burst went through, the rest were refused once, waited the endpoint's pause, and got in.
    assert fake.rate_limited_count >= 1
    assert fake.request_count - fake.rate_limited_count == 14


def test_a_learned_limit_leaves_most_of_the_providers_burst_usable() -> None:
    """The provider's bucket (remaining + what refills until its reset) is learned from the
    headers; keeping half of it in reserve left half of every run's first burst unused."""
    budget = EndpointLimiter(BudgetSettings())
    permit = Permit(tokens=10, leased_at=0.0)
    headers = read_rate_limit_headers({"x-ratelimit-limit-requests": "6000",
                                       "x-ratelimit-remaining-requests": "99",
                                       "x-ratelimit-reset-requests": "10ms"})
    budget.settle(permit, Outcome("ok", latency_s=0.05, headers=headers))
    assert budget.requests_per_minute == 6000
    bucket = budget._requests
    assert bucket is not None
    # A bucket of 100 (99 left plus 1 refilling in 10 ms): 90 may go at once, 10 stay in reserve.
    assert bucket.capacity == pytest.approx(100 * limiter_module.LEARNED_BURST_SHARE)
    assert 85 <= bucket.available(time.monotonic()) <= 100


async def _round_trips(budget: EndpointLimiter, callers: int, latency_s: float) -> None:
    """``callers`` requests through ``budget``, each reporting ``latency_s``; no real waiting."""
    async def one() -> None:
        permit = await budget.lease(1)
        await asyncio.sleep(0)  # the other callers queue for a slot meanwhile
        budget.settle(permit, Outcome("ok", latency_s=latency_s))

    await asyncio.gather(*(one() for _ in range(callers)))


@pytest.mark.parametrize("rpm", [None, 600_000])
async def test_a_known_pace_grows_the_window_through_a_latency_climb(rpm: float | None) -> None:
    """Latency climbing above twice its floor stops the window's growth (more requests in flight
    would only queue), unless a known pace needs more in flight at that latency: then the pace,
    not the window, protects the provider, and a frozen window would hold the rate under it."""
    budget = EndpointLimiter(BudgetSettings(max_concurrency=48, rpm=rpm))
    await _round_trips(budget, 4, 0.05)      # the floor: 50 ms
    await _round_trips(budget, 400, 0.30)    # then every reply takes six times as long
    if rpm is None:
        assert budget.limit <= 16            # no pace: growth stopped as latency climbed
    else:
        assert budget.limit == 48            # 10,000 a second at 0.3 s needs the ceiling


async def test_a_reply_read_late_does_not_stall_the_endpoint() -> None:
    """``remaining`` is what the provider had when the request arrived; its bucket refilled
    while the reply came back. A reply read half a second late (a busy machine) said 50 too
    few were left and pushed every later start back by half a second."""
    budget = EndpointLimiter(BudgetSettings(max_concurrency=64, pinned=True))
    learned = read_rate_limit_headers({"x-ratelimit-limit-requests": "6000",
                                       "x-ratelimit-remaining-requests": "99",
                                       "x-ratelimit-reset-requests": "10ms"})
    budget.settle(await budget.lease(1), Outcome("ok", latency_s=0.05, headers=learned))
    late = await budget.lease(1)
    queued = [await budget.lease(1) for _ in range(30)]  # reserved after it, at the pace
    # The late reply: 40 were left when it arrived, 0.5 s (50 refills) before it was read.
    reply = read_rate_limit_headers({"x-ratelimit-limit-requests": "6000",
                                     "x-ratelimit-remaining-requests": "40",
                                     "x-ratelimit-reset-requests": "600ms"})
    budget.settle(late, Outcome("ok", latency_s=0.55, headers=reply))
    bucket = budget._requests
    assert bucket is not None
    # 40 left + 50 refilled - 30 reserved since: 60, not 40 - 30 = 10 (or less).
    assert bucket.available(time.monotonic()) >= 55
    for permit in queued:
        budget.settle(permit, Outcome("cancelled"))


async def test_try_lease_grants_only_a_permit_that_may_start_now() -> None:
    """What a budget that hands out permits in batches (one per cluster) relies on."""
    paced = EndpointLimiter(BudgetSettings(max_concurrency=2, pinned=True, rpm=120))  # 2 at once
    first, second = paced.try_lease(10), paced.try_lease(10)
    assert first is not None and second is not None and paced.active == 2
    assert paced.try_lease(10) is None and paced.active == 2  # no free slot: nothing taken
    paced.settle(first, Outcome("ok", latency_s=0.1))
    assert paced.try_lease(10) is None and paced.active == 1  # a slot, but the pace says wait
    permit = await asyncio.wait_for(paced.lease(10), 5)  # the waiting lease still gets it
    assert paced.active == 2
    paced.settle(permit, Outcome("ok"))

    paused = EndpointLimiter(BudgetSettings(max_concurrency=4, pinned=True))
    told = paused.try_lease(10)
    assert told is not None
    paused.settle(told, Outcome("rate_limited", retry_after=30.0))
    assert paused.try_lease(10) is None and paused.active == 0  # nothing starts in a pause


async def test_a_slot_freed_on_the_waiters_own_loop_needs_no_cross_thread_wake_up(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A grant to a waiter on the releasing loop is handed over directly: no self-pipe write
    (``call_soon_threadsafe``) per judge request."""
    budget = EndpointLimiter(BudgetSettings(max_concurrency=1, pinned=True))
    first = await budget.lease(10)
    waiter = asyncio.ensure_future(budget.lease(10))
    await asyncio.sleep(0)
    assert not waiter.done()  # queued behind the only slot
    cross_thread: list[object] = []
    monkeypatch.setattr(asyncio.get_running_loop(), "call_soon_threadsafe",
                        lambda *args, **kwargs: cross_thread.append(args))
    budget.settle(first, Outcome("ok", latency_s=0.05))
    second = await asyncio.wait_for(waiter, 5.0)
    assert cross_thread == []
    budget.settle(second, Outcome("ok", latency_s=0.05))


def test_a_slot_freed_from_another_thread_still_wakes_the_waiter() -> None:
    slots = limiter_module._Slots(1)
    holder = threading.Thread(target=lambda: asyncio.run(slots.acquire()))
    holder.start()
    holder.join()  # the slot is held, taken on a loop that has closed since

    async def wait_for_the_slot() -> bool:
        queued = asyncio.ensure_future(slots.acquire())
        await asyncio.sleep(0)
        assert not queued.done()
        releaser = threading.Thread(target=slots.release)  # no event loop in that thread
        releaser.start()
        try:
            return await asyncio.wait_for(queued, 5.0)
        finally:
            releaser.join()

    assert asyncio.run(wait_for_the_slot()) is True  # it had to queue
    assert slots.active == 1


@pytest.mark.parametrize(("system", "prompt"), [(None, "abcde"), ("abc", "abcde"), ("", ""),
                                                ("s" * 401, "p" * 4000)])
def test_a_request_is_budgeted_by_the_one_token_estimate(system: str | None, prompt: str) -> None:
    """The tpm budget and the prompt-caching rules count tokens by one formula
    (``referee.judge.estimate_tokens``), each text rounded up, plus a short answer."""
    from referee.judge import estimate_tokens
    from referee.judge.client import estimate_request_tokens
    from referee.judge.providers import JudgeRequest

    request = JudgeRequest(model="m", prompt=prompt, system=system, json_mode=False,
                           temperature=0.0, max_tokens=1024, timeout=30.0, api_style="chat")
    expected = estimate_tokens(system or "") + estimate_tokens(prompt) + 16
    assert estimate_request_tokens(request) == expected
    short = JudgeRequest(model="m", prompt=prompt, system=system, json_mode=False,
                         temperature=0.0, max_tokens=4, timeout=30.0, api_style="chat")
    assert estimate_request_tokens(short) == expected - 12


# --- a 429 that asks for no pause (issue 31) ---------------------------------------------------

HOT_LOOP_BUDGET_S = 1.0
HOT_LOOP_TIMEOUT_S = 5.0


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("header", [{"retry_after": 0}, {"retry_after_ms": 0}],
                         ids=["retry-after", "retry-after-ms"])
def test_a_429_asking_for_no_pause_is_a_judge_error_within_the_wait_budget(
        judge_server: ScriptedJudgeServer, tmp_path, provider: str, header: dict) -> None:
    """Some gateways answer every 429 with a pause of 0: taken at its word that was a loop of
    about 300 requests a second that never gave up, since a budget of pauses of 0 is never
    spent. Every pause has a floor, and the budget counts the refused attempts by the clock."""
    from referee import CaseStatus, EvalCase, EvalSuite
    from referee.evaluators import CustomRubric
    from referee.judge.retry import RETRY_AFTER_FLOOR_S

    judge = judge_server.judge_config(provider=provider, model="m",
                                      rate_limit_wait_s=HOT_LOOP_BUDGET_S,
                                      timeout=HOT_LOOP_TIMEOUT_S)
    # The SDK's import (seconds on a busy machine) and the run's setup are not the test.
    asyncio.run(get_judge(judge).complete("warm-up"))
    judge_server.set_reply(Fault.rate_limit(**header))
    suite = EvalSuite("hot loop").add_case(EvalCase(input="q"))
    suite.add_evaluator(CustomRubric([("Is it polite?", True)], judge=judge))
    report = suite.run(lambda prompt: "out", verbose=False, runs_dir=tmp_path)
    assert report.cases[0].status == CaseStatus.JUDGE_ERROR
    assert "rate-limit wait budget" in (report.cases[0].judge_error or "")
    refused = [r.arrived_at for r in judge_server.requests[1:]]
    elapsed = refused[-1] - refused[0]  # from the first refused request to the last
    # Each pause is at least the floor, so the budget admits at most budget / floor pauses.
    sent = len(refused)
    assert 2 <= sent <= HOT_LOOP_BUDGET_S / RETRY_AFTER_FLOOR_S + 1
    assert elapsed < HOT_LOOP_BUDGET_S + HOT_LOOP_TIMEOUT_S
    assert all(later - earlier >= RETRY_AFTER_FLOOR_S * 0.9  # a floor under every pause
               for earlier, later in zip(refused, refused[1:]))


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_429s_slow_to_arrive_spend_the_wait_budget_by_the_clock(
        judge_server: ScriptedJudgeServer, provider: str) -> None:
    """Pauses alone would let a server that takes its time to refuse hold a request for many
    times the budget: its refused attempts count too."""
    from referee.judge.retry import RATE_LIMIT_CLOCK_ALLOWANCE_S

    cfg = judge_server.judge_config(provider=provider, rate_limit_wait_s=1.0, timeout=5.0)
    await get_judge(cfg).complete("warm-up")

    def refuse_slowly(request: object) -> Fault:
        time.sleep(1.0)
        return Fault.rate_limit(retry_after=0)

    judge_server.set_reply(refuse_slowly)
    started = time.monotonic()
    with pytest.raises(JudgeUnavailable, match="rate-limit wait budget"):
        await get_judge(cfg).complete("q")
    elapsed = time.monotonic() - started
    # Counting pauses only, four pauses of 0.25 s fit the budget: five refusals, 6 s. By the
    # clock two refusals (2 s, with a pause) pass the budget and its allowance for round trips.
    assert judge_server.request_count - 1 <= 3
    assert elapsed < 1.0 + RATE_LIMIT_CLOCK_ALLOWANCE_S + 5.0


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_retry_after_one_still_gives_up_after_three_requests(
        judge_server: ScriptedJudgeServer, provider: str) -> None:
    cfg = judge_server.judge_config(provider=provider, rate_limit_wait_s=2.0)
    await get_judge(cfg).complete("warm-up")  # the SDK's import and client are not the test
    judge_server.set_reply(Fault.rate_limit(retry_after=1))
    with pytest.raises(JudgeUnavailable, match="rate-limit wait budget"):
        await get_judge(cfg).complete("q")
    assert judge_server.request_count - 1 == 3  # pauses of 1 s and 1 s; a third would pass 2 s


async def test_a_429_without_retry_after_backs_off_and_gives_up(
        judge_server: ScriptedJudgeServer) -> None:
    cfg = judge_server.judge_config(provider="openai", rate_limit_wait_s=2.0)
    await get_judge(cfg).complete("warm-up")
    judge_server.set_reply(Fault.rate_limit())
    with pytest.raises(JudgeUnavailable, match="rate-limit wait budget"):
        await get_judge(cfg).complete("q")
    # Backoffs of 0.25-0.5, 0.5-1 and 1-2 s: the third or fourth pause passes the budget.
    assert 3 <= judge_server.request_count - 1 <= 4


class _Refusal(Exception):
    """An SDK's HTTP error as classify() reads it: a status and the response's headers."""

    def __init__(self, status: int, headers: dict[str, str]) -> None:
        super().__init__(f"HTTP {status}")
        self.status_code = status
        self.response = SimpleNamespace(status_code=status, headers=headers)


PAUSE_HEADERS = [{"retry-after": value} for value in
                 ("0", "0.0", "-5", "0.001", "1e-9", "nan", "", "Wed, 21 Oct 2015 07:28:00 GMT")]
PAUSE_HEADERS += [{"retry-after-ms": value} for value in ("0", "-1", "1", "0.5", "nan")]
PAUSE_HEADERS += [{"retry-after-ms": "0", "retry-after": "0"}, {}]


@pytest.mark.parametrize("status", [429, 503, 529])
@pytest.mark.parametrize("headers", PAUSE_HEADERS)
def test_no_header_value_yields_a_pause_below_the_floor(status: int, headers: dict) -> None:
    """The refused request always waits at least the floor; the endpoint's shared pause takes
    the server at its word (0 is no pause: a 0 on a few of many requests must not stop the
    rest each time), and is never negative, NaN or past the cap."""
    from referee.judge import retry as retry_module
    from referee.judge.client import _failure_outcome

    floor = retry_module.RETRY_AFTER_FLOOR_S
    info = retry_module.classify(_Refusal(status, headers))
    outcome = _failure_outcome(info, latency_s=0.0)
    assert outcome.retry_after is None or 0.0 <= outcome.retry_after <= retry_module.RETRY_AFTER_CAP_S
    assert retry_module.server_pause(info.retry_after or 0.0) >= floor
    assert retry_module.RetryPolicy().delay(0, info.retry_after) >= floor / 2
    if info.retry_after is not None:
        assert retry_module.RetryPolicy().delay(0, info.retry_after) >= floor
    limiter = EndpointLimiter(BudgetSettings(max_concurrency=4, pinned=True))

    async def refused() -> float:
        permit = await limiter.lease(1)
        limiter.settle(permit, outcome)
        return limiter.paused_for()

    paused = asyncio.run(refused())
    assert paused >= 0.0
    if outcome.retry_after is not None:
        # The endpoint's pause, as the next lease waits it (a little of it has passed).
        assert paused >= outcome.retry_after - 0.1
