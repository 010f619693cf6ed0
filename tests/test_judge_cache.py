"""The SQLite reply cache: hits, sample index in the key, no cached errors, degradation, secrets."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from pathlib import Path

import pytest

from referee.errors import JudgeUnavailable
from referee.judge import default_cache_path, get_judge
from referee.judge import retry as retry_module
from referee.judge.reply_cache import JudgeCache, flush_caches
from referee.testing import FakeJudge, Fault, Reply, ScriptedJudgeServer

SECRET = "sk-live-SECRET-9f8e7d6c5b4a"


@pytest.fixture(autouse=True)
def _no_retry_waits(reply_cache_in_tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def no_wait(seconds: float) -> None:
        return None

    monkeypatch.setattr(retry_module, "sleep", no_wait)


def _cached_cfg(server: ScriptedJudgeServer, tmp_path: Path, **overrides):
    return server.judge_config(provider="openai", cache=True,
                               cache_path=str(tmp_path / "judge.sqlite3"), **overrides)


async def test_rerun_is_served_from_cache(judge_server: ScriptedJudgeServer,
                                          tmp_path: Path) -> None:
    cfg = _cached_cfg(judge_server, tmp_path)
    first = await get_judge(cfg).complete("Is it true?", system="strict")
    assert not first.cached and judge_server.request_count == 1
    judge_server.reset_record()
    again = await get_judge(cfg).complete("Is it true?", system="strict")
    assert judge_server.request_count == 0
    assert again.cached and again.text == first.text
    assert (again.usage.requests, again.usage.cached_requests) == (0, 1)
    assert again.usage.input_tokens == 0


async def test_sample_index_is_part_of_the_key(judge_server: ScriptedJudgeServer,
                                               tmp_path: Path) -> None:
    replies = iter(["Yes", "No", "Yes"])
    judge_server.set_reply(lambda request: next(replies))
    judge = get_judge(_cached_cfg(judge_server, tmp_path))
    samples = [await judge.complete("q", sample_index=i) for i in range(3)]
    assert [s.text for s in samples] == ["Yes", "No", "Yes"]
    assert judge_server.request_count == 3
    repeat = [await judge.complete("q", sample_index=i) for i in range(3)]
    assert [s.text for s in repeat] == ["Yes", "No", "Yes"] and all(s.cached for s in repeat)
    assert judge_server.request_count == 3


@pytest.mark.parametrize("change", [
    {"system": "other system"}, {"json_mode": True}, {"temperature": 0.5}, {"max_tokens": 9},
])
async def test_any_request_change_misses(judge_server: ScriptedJudgeServer, tmp_path: Path,
                                         change: dict) -> None:
    judge = get_judge(_cached_cfg(judge_server, tmp_path))
    await judge.complete("q")
    await judge.complete("q", **change)
    assert judge_server.request_count == 2


async def test_model_and_endpoint_are_part_of_the_key(tmp_path: Path) -> None:
    with ScriptedJudgeServer("Yes") as one, ScriptedJudgeServer("No") as two:
        await get_judge(_cached_cfg(one, tmp_path)).complete("q")
        other_model = await get_judge(_cached_cfg(one, tmp_path, model="m2")).complete("q")
        other_endpoint = await get_judge(_cached_cfg(two, tmp_path)).complete("q")
        assert not other_model.cached and not other_endpoint.cached
        assert other_endpoint.text == "No"


async def test_errors_are_never_cached(judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    judge_server.enqueue_faults(Fault.http(503))
    cfg = _cached_cfg(judge_server, tmp_path, max_retries=0)
    with pytest.raises(JudgeUnavailable):
        await get_judge(cfg).complete("q")
    judge_server.enqueue_faults(Fault.http(401))
    with pytest.raises(JudgeUnavailable):
        await get_judge(cfg).complete("q")
    ok = await get_judge(cfg).complete("q")
    assert not ok.cached and judge_server.request_count == 3
    assert (await get_judge(cfg).complete("q")).cached


async def test_env_switches_and_default_location(judge_server: ScriptedJudgeServer,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    cfg = judge_server.judge_config(provider="openai", cache=None)  # inherit env / default
    monkeypatch.setenv("REFEREE_CACHE", "0")
    await get_judge(cfg).complete("q")
    await get_judge(cfg).complete("q")
    assert judge_server.request_count == 2
    assert not default_cache_path().exists()
    monkeypatch.setenv("REFEREE_CACHE", "1")
    await get_judge(cfg).complete("q")
    assert (await get_judge(cfg).complete("q")).cached
    assert default_cache_path() == tmp_path / "cache-dir" / "judge_cache.sqlite3"
    assert default_cache_path().exists()
    monkeypatch.setenv("REFEREE_CACHE", "maybe")
    with pytest.raises(ValueError, match="REFEREE_CACHE"):
        await get_judge(cfg).complete("q")


async def test_corrupt_cache_degrades_with_one_warning(judge_server: ScriptedJudgeServer,
                                                       tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "corrupt.sqlite3"
    path.write_bytes(b"this is not a sqlite database" * 100)
    cfg = judge_server.judge_config(provider="openai", cache=True, cache_path=str(path))
    with caplog.at_level(logging.WARNING, logger="referee.judge"):
        for _ in range(3):
            assert (await get_judge(cfg).complete("q")).text == "Yes"
    assert judge_server.request_count == 3
    warnings = [r for r in caplog.records if "judge cache" in r.getMessage()]
    assert len(warnings) == 1 and "live calls" in warnings[0].getMessage()


def test_locked_cache_degrades(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "locked.sqlite3"
    cache = JudgeCache(path)
    cache.put("k", provider="p", model="m", text="t", input_tokens=1, output_tokens=1)
    cache.flush()
    blocker = sqlite3.connect(str(path), timeout=0.1, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        other = JudgeCache(path)
        with caplog.at_level(logging.WARNING, logger="referee.judge"):
            other.put("k2", provider="p", model="m", text="t", input_tokens=1, output_tokens=1)
            other.flush()  # the write meets the lock
            assert other.get("k") is None  # skipped during the cool-down, no second stall
            other.put("k3", provider="p", model="m", text="t", input_tokens=1, output_tokens=1)
        assert sum("judge cache" in r.getMessage() for r in caplog.records) == 1
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    other._skip_until = 0.0  # the cool-down is over
    assert other.get("k") is not None  # usable again once the lock is gone
    assert other.get("k2") is None  # nothing was written while locked


async def test_cache_is_safe_under_concurrency(tmp_path: Path) -> None:
    fake = FakeJudge(lambda request: f"reply to {request.prompt}")
    cfg = fake.judge_config(cache=True, cache_path=str(tmp_path / "c.sqlite3"),
                            max_concurrency=32)
    prompts = [f"p{i % 20}" for i in range(100)]
    first = await asyncio.gather(*(get_judge(cfg).complete(p) for p in prompts))
    assert [r.text for r in first] == [f"reply to {p}" for p in prompts]
    assert fake.request_count == 20  # repeats of a prompt in flight share its call
    second = await asyncio.gather(*(get_judge(cfg).complete(p) for p in prompts))
    assert all(r.cached for r in second) and fake.request_count == 20


async def test_api_key_never_in_messages_logs_or_cache(judge_server: ScriptedJudgeServer,
                                                       tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    cache_file = tmp_path / "secret-check.sqlite3"
    cfg = judge_server.judge_config(provider="openai", api_key=SECRET, cache=True,
                                    cache_path=str(cache_file))
    messages: list[str] = []
    with caplog.at_level(logging.DEBUG):
        judge_server.enqueue_faults(Fault.rate_limit(retry_after=1), Fault.http(401))
        with pytest.raises(JudgeUnavailable) as unauthorized:
            await get_judge(cfg).complete("q")
        messages.append(str(unauthorized.value))
        judge_server.set_reply(Fault.http(500))
        with pytest.raises(JudgeUnavailable) as exhausted:
            await get_judge(cfg.model_copy(update={"max_retries": 1})).complete("q")
        messages.append(str(exhausted.value))
        judge_server.set_reply("Yes")
        await get_judge(cfg).complete("q")
        await get_judge(cfg).complete("q")
    assert SECRET in judge_server.requests[0].headers["authorization"]  # it was really sent
    for text in messages + [caplog.text, repr(cfg), cfg.model_dump_json()]:
        assert SECRET not in text
    flush_caches()
    assert SECRET.encode() not in cache_file.read_bytes()
    rows = sqlite3.connect(str(cache_file)).execute("SELECT * FROM judge_replies").fetchall()
    assert rows and all(SECRET not in str(row) for row in rows)


async def test_empty_replies_are_not_cached(judge_server: ScriptedJudgeServer,
                                            tmp_path: Path) -> None:
    judge_server.enqueue_faults(Fault.empty())
    cfg = _cached_cfg(judge_server, tmp_path)
    assert (await get_judge(cfg).complete("q")).text == ""
    second = await get_judge(cfg).complete("q")
    assert second.text == "Yes" and not second.cached


async def test_sample_index_must_be_a_non_negative_int(judge_server: ScriptedJudgeServer) -> None:
    with pytest.raises(ValueError, match="sample_index"):
        await get_judge(judge_server.judge_config()).complete("q", sample_index=-1)


async def test_identical_requests_in_flight_share_one_call(judge_server: ScriptedJudgeServer,
                                                           tmp_path: Path) -> None:
    judge_server.set_reply(Reply("Yes", latency_s=0.2))
    judge = get_judge(_cached_cfg(judge_server, tmp_path))
    replies = await asyncio.gather(*(judge.complete("Same question?") for _ in range(5)),
                                   judge.complete("Another question?"))
    assert judge_server.request_count == 2  # one per distinct request, over HTTP
    assert [r.text for r in replies] == ["Yes"] * 6
    assert sorted(r.cached for r in replies[:5]) == [False, True, True, True, True]
    assert all(r.usage.input_tokens == 0 for r in replies[:5] if r.cached)


async def test_a_failed_shared_call_lets_each_waiter_try_on_its_own(
        judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    judge_server.enqueue_faults(Fault.http(400))  # not retryable: the first caller gives up
    judge_server.set_reply(Reply("No", latency_s=0.1))
    judge = get_judge(_cached_cfg(judge_server, tmp_path))
    outcomes = await asyncio.gather(*(judge.complete("Q?") for _ in range(3)),
                                    return_exceptions=True)
    assert isinstance(outcomes[0], JudgeUnavailable)
    assert [o.text for o in outcomes[1:]] == ["No", "No"]
    assert judge_server.request_count == 3  # the failed call, then one of each waiter's own


async def test_without_the_cache_identical_requests_are_all_made(
        judge_server: ScriptedJudgeServer) -> None:
    judge = get_judge(judge_server.judge_config(provider="openai", cache=False))
    await asyncio.gather(*(judge.complete("Same question?") for _ in range(3)))
    assert judge_server.request_count == 3  # no cache, no sharing: each sample is its own call


async def test_a_waiter_that_gives_up_does_not_cancel_the_shared_call(
        judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    judge_server.set_reply(Reply("Yes", latency_s=0.3))
    judge = get_judge(_cached_cfg(judge_server, tmp_path))
    first = asyncio.ensure_future(judge.complete("Q?"))
    await asyncio.sleep(0.05)
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(judge.complete("Q?"), timeout=0.05)
    assert (await first).text == "Yes" and judge_server.request_count == 1


def _rows(path: Path) -> list[str]:
    if not path.exists():
        return []
    with sqlite3.connect(str(path)) as db:
        try:
            return [key for (key,) in db.execute("SELECT key FROM judge_replies ORDER BY key")]
        except sqlite3.OperationalError:  # the writer has created the file, not the table yet
            return []


def test_replies_are_readable_at_once_and_written_in_one_batch(tmp_path: Path) -> None:
    path = tmp_path / "batched.sqlite3"
    cache = JudgeCache(path)
    cache.WRITE_DELAY_S = 60.0  # only an explicit flush writes in this test
    for i in range(5):
        cache.put(f"k{i}", provider="p", model="m", text=f"t{i}", input_tokens=i, output_tokens=1)
    hit = cache.get("k3")
    assert hit is not None and (hit.text, hit.input_tokens) == ("t3", 3)
    assert _rows(path) == []  # nothing written yet: one batch to come
    flush_caches()
    assert _rows(path) == [f"k{i}" for i in range(5)]
    assert JudgeCache(path).get("k4") is not None  # another reader of the file sees them
    cache.close()


def test_pending_replies_are_written_after_the_delay_and_on_close(tmp_path: Path) -> None:
    path = tmp_path / "delayed.sqlite3"
    cache = JudgeCache(path)
    cache.WRITE_DELAY_S = 0.05
    cache.put("soon", provider="p", model="m", text="t", input_tokens=1, output_tokens=1)
    for _ in range(200):  # the timer thread writes it; no flush is called here
        if _rows(path) == ["soon"]:
            break
        threading.Event().wait(0.02)
    assert _rows(path) == ["soon"]
    cache.WRITE_DELAY_S = 60.0
    cache.put("late", provider="p", model="m", text="t", input_tokens=1, output_tokens=1)
    cache.close()
    assert _rows(path) == ["late", "soon"]


def test_a_run_leaves_its_replies_in_the_file(judge_server: ScriptedJudgeServer,
                                              tmp_path: Path) -> None:
    from referee.run.sync import run_sync

    path = tmp_path / "run.sqlite3"
    cfg = judge_server.judge_config(provider="openai", cache=True, cache_path=str(path))
    JudgeCache.WRITE_DELAY_S, delay = 60.0, JudgeCache.WRITE_DELAY_S
    try:
        run_sync(get_judge(cfg).complete("q"))
        assert len(_rows(path)) == 1  # the end of the run flushed it, not the timer
    finally:
        JudgeCache.WRITE_DELAY_S = delay


# Caches written by earlier releases are keyed by the stdlib's JSON of the request, so the key
# of every request must stay exactly that digest, whichever encoder writes it now.
def _stdlib_key(**request: object) -> str:
    import hashlib
    import json

    blob = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)
    # surrogatepass: earlier releases failed on a lone surrogate; it now keys the request.
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


@pytest.mark.parametrize("value", [
    "plain", "", "quote \" backslash \\ slash /", "\n\r\t\b\f\x00\x1f\x7f", "é ü 中文 😀",
    "\u2028\u2029\ufeff", "lone \ud800 surrogate", 0, -3, 2**63 - 1, 2**64, True, False, None,
    0.0, -0.0, 0.1, 0.7, 1.5, 0.0001, 1e-05, 1e-300, 9.999e15, 1e16, 1e300,
    float("inf"), float("nan"), Path("/tmp/x"), ("a", 1), {"nested": 1e-7},
])
def test_cache_keys_are_the_digest_earlier_releases_wrote(value: object) -> None:
    from referee.judge.reply_cache import cache_key

    request = {"provider": "openai", "model": "gpt-4o-mini", "prompt": "Question?",
               "temperature": 0.0, "max_tokens": 16, "sample_index": 0, "value": value}
    assert cache_key(**request) == _stdlib_key(**request)


async def test_a_lone_surrogate_in_the_prompt_is_judged_and_cached(
        judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    # A model's output may hold a lone surrogate (a cut emoji); keying it used to raise
    # UnicodeEncodeError, and the evaluator failed instead of asking the judge.
    cfg = _cached_cfg(judge_server, tmp_path)
    prompt = "Is the output 'broken \ud83d emoji' polite?"
    first = await get_judge(cfg).complete(prompt)
    assert first.text == "Yes" and not first.cached and judge_server.request_count == 1
    again = await get_judge(cfg).complete(prompt)
    assert again.cached and judge_server.request_count == 1
