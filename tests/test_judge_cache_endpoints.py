"""The reply cache keys and records each reply's endpoint; `referee cache stats` and `clear`."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from referee.cli import main
from referee.judge import get_judge
from referee.judge.reply_cache import CacheFilter, cache_key, cache_stats, clear_cache, flush_caches
from referee.testing import ScriptedJudgeServer

SECRET = "sk-live-SECRET-5e4d3c2b1a09"


pytestmark = pytest.mark.usefixtures("reply_cache_in_tmp_path")


def cached(server: ScriptedJudgeServer, cache: Path, model: str = "llama3", **overrides):
    return server.judge_config(provider="openai", model=model, cache=True,
                               cache_path=str(cache), **overrides)


def cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert not err, err
    return code, out


async def test_two_local_servers_behind_one_model_name_never_share_replies(tmp_path, capsys):
    """The same model name at two endpoints is two judges: a reply of one is never replayed
    for the other, and each reply is recorded with its endpoint (never the key)."""
    cache = tmp_path / "judge.sqlite3"
    with ScriptedJudgeServer(reply="Yes") as old, ScriptedJudgeServer(reply="No") as new:
        first = await get_judge(cached(old, cache, api_key=SECRET)).complete("Is it polite?")
        second = await get_judge(cached(new, cache)).complete("Is it polite?")
        assert (first.text, second.text, second.cached) == ("Yes", "No", False)
        assert new.request_count == 1
        flush_caches()
        stats = cache_stats(cache)
        assert stats.total == 2
        assert {(g.model, g.endpoint) for g in stats.groups} == {
            ("llama3", old.base_url().rstrip("/")), ("llama3", new.base_url().rstrip("/"))}
        assert SECRET.encode() not in cache.read_bytes()

        code, out = cli(capsys, "cache", "stats", "--cache", str(cache))
        assert code == 0 and f"{cache}: 2 replies" in out
        assert out.count("llama3") == 2 and old.base_url().rstrip("/") in out

        # The old server's verdicts go; the new server's stay, and only the old one is asked again.
        code, out = cli(capsys, "cache", "clear", "--cache", str(cache), "--endpoint",
                        old.base_url())
        assert code == 0 and "removed 1 judge replies" in out and "1 left" in out
        again = await get_judge(cached(old, cache, api_key=SECRET)).complete("Is it polite?")
        assert not again.cached and old.request_count == 2
        kept = await get_judge(cached(new, cache)).complete("Is it polite?")
        assert kept.cached and new.request_count == 1


async def test_filters_select_by_model_provider_endpoint_and_age(tmp_path, capsys):
    cache = tmp_path / "judge.sqlite3"
    with ScriptedJudgeServer(reply="Yes") as server:
        for model in ("llama3", "llama3.1", "qwen2"):
            await get_judge(cached(server, cache, model=model)).complete("q")
        flush_caches()
    assert cache_stats(cache, CacheFilter(model="llama3*")).matching == 2
    assert cache_stats(cache, CacheFilter(provider="anthropic")).matching == 0
    assert cache_stats(cache, CacheFilter(endpoint="default")).matching == 0  # all local
    assert cache_stats(cache, CacheFilter(endpoint="http://127.0.0.1:*")).matching == 3
    assert cache_stats(cache, CacheFilter(older_than_s=3600)).matching == 0
    with sqlite3.connect(str(cache)) as db:  # one reply stored two days ago
        db.execute("UPDATE judge_replies SET created_at = ? WHERE model = 'qwen2'",
                   (time.time() - 2 * 86400,))
    code, out = cli(capsys, "cache", "stats", "--cache", str(cache), "--older-than", "1d",
                    "--json")
    data = json.loads(out)
    assert (data["replies"], data["matching"]) == (3, 1)
    assert [j["model"] for j in data["judges"]] == ["qwen2"]
    code, out = cli(capsys, "cache", "clear", "--cache", str(cache), "--older-than", "1d")
    assert "removed 1 judge replies" in out and "2 left" in out
    code, out = cli(capsys, "cache", "clear", "--cache", str(cache), "--model", "llama3")
    assert "removed 1 judge replies" in out and "1 left" in out  # a glob, not a prefix
    assert clear_cache(cache) == (1, 0)  # no filter: everything


def test_replies_stored_before_endpoints_were_recorded_stay_readable(tmp_path, capsys):
    """A cache written by an earlier release (no endpoint table) keeps serving its replies:
    their keys already held the endpoint. Stats lists them as '(not recorded)'."""
    cache = tmp_path / "old.sqlite3"
    key = cache_key(provider="openai", model="gpt-4o-mini", base_url="", api_style="chat",
                    prompt="Is it polite?", system=None, json_mode=False, temperature=0.0,
                    max_tokens=1024, sample_index=0)
    with sqlite3.connect(str(cache)) as db:
        db.execute("CREATE TABLE judge_replies (key TEXT PRIMARY KEY, provider TEXT NOT NULL, "
                   "model TEXT NOT NULL, text TEXT NOT NULL, input_tokens INTEGER NOT NULL, "
                   "output_tokens INTEGER NOT NULL, created_at REAL NOT NULL)")
        db.execute("INSERT INTO judge_replies VALUES (?, 'openai', 'gpt-4o-mini', 'Yes', 5, 1, ?)",
                   (key, time.time()))
    from referee.judge import JudgeConfig

    cfg = JudgeConfig(provider="openai", model="gpt-4o-mini", api_key="sk-test-unused",
                      api_style="chat", temperature=0.0, max_tokens=1024, cache=True,
                      cache_path=str(cache))
    import asyncio

    reply = asyncio.run(get_judge(cfg).complete("Is it polite?"))
    assert reply.cached and reply.text == "Yes"  # served without reaching OpenAI
    code, out = cli(capsys, "cache", "stats", "--cache", str(cache))
    assert "(not recorded)" in out and "gpt-4o-mini" in out
    assert clear_cache(cache, CacheFilter(endpoint="default")) == (0, 1)


def test_stats_and_clear_on_a_missing_or_foreign_file(tmp_path, capsys):
    code, out = cli(capsys, "cache", "stats", "--cache", str(tmp_path / "none.sqlite3"))
    assert code == 0 and "no judge cache at" in out
    foreign = tmp_path / "other.sqlite3"
    with sqlite3.connect(str(foreign)) as db:
        db.execute("CREATE TABLE t (x)")
    code = main(["cache", "clear", "--cache", str(foreign)])
    err = capsys.readouterr().err
    assert code == 2 and "not a referee judge cache (no judge_replies table)" in err
    code = main(["cache", "clear", "--older-than", "soon"])
    assert code == 2 and "expected an age such as 30d" in capsys.readouterr().err


async def test_merged_caches_keep_each_replys_endpoint(tmp_path):
    from referee.judge.reply_cache import merge_caches

    node_a, node_b = tmp_path / "a.sqlite3", tmp_path / "b.sqlite3"
    with ScriptedJudgeServer(reply="Yes") as server:
        await get_judge(cached(server, node_a)).complete("on a")
        await get_judge(cached(server, node_b)).complete("on b")
        flush_caches()
        merge_caches([node_b], node_a)
        [group] = cache_stats(node_a).groups
        assert (group.replies, group.endpoint) == (2, server.base_url().rstrip("/"))
