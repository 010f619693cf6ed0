"""Per-node judge caches merged by key: `merge_caches` and `referee cache merge`."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from referee.cli import main
from referee.judge import get_judge
from referee.judge.reply_cache import JudgeCache, merge_caches
from referee.testing import Reply, ScriptedJudgeServer

pytestmark = pytest.mark.usefixtures("reply_cache_in_tmp_path")


def _put(path: Path, key: str, text: str) -> None:
    cache = JudgeCache(path)
    cache.put(key, provider="openai", model="m", text=text, input_tokens=3, output_tokens=1)
    cache.close()


def _rows(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT key, text FROM judge_replies"))


def test_merge_copies_what_the_destination_lacks_and_keeps_its_own(tmp_path: Path) -> None:
    node_a, node_b, merged = tmp_path / "a.sqlite3", tmp_path / "b.sqlite3", tmp_path / "m.sqlite3"
    _put(node_a, "k1", "Yes")
    _put(node_a, "k2", "No")
    _put(node_b, "k2", "No, on node b")  # the same request answered on both nodes
    _put(node_b, "k3", "Maybe")
    result = merge_caches([node_a, node_b], merged)
    assert (result.added, result.already_present, result.total) == (3, 1, 3)
    assert _rows(merged) == {"k1": "Yes", "k2": "No", "k3": "Maybe"}  # the first copy stands
    again = merge_caches([node_b], node_a)
    assert (again.added, again.already_present, again.total) == (1, 1, 3)
    assert _rows(node_a)["k2"] == "No"  # a destination never loses its own reply
    assert _rows(node_b) == {"k2": "No, on node b", "k3": "Maybe"}  # sources are only read


async def test_a_merged_cache_answers_requests_first_asked_on_other_nodes(
        judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    judge_server.set_reply(Reply("Yes"))
    nodes = [tmp_path / f"node-{n}" / "judge.sqlite3" for n in range(3)]
    prompts = [f"Is claim {n} supported?" for n in range(6)]
    for n, prompt in enumerate(prompts):  # each node answered the requests of its own shards
        cfg = judge_server.judge_config(cache=True, cache_path=str(nodes[n % 3]))
        await get_judge(cfg).complete(prompt)
    assert judge_server.request_count == 6
    merged = merge_caches(nodes[1:], nodes[0])
    assert (merged.added, merged.total) == (4, 6)
    judge_server.reset_record()
    cfg = judge_server.judge_config(cache=True, cache_path=str(nodes[0]))
    replies = [await get_judge(cfg).complete(prompt) for prompt in prompts]
    assert all(reply.cached for reply in replies) and judge_server.request_count == 0


def test_cache_merge_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    node_a, node_b = tmp_path / "a.sqlite3", tmp_path / "b.sqlite3"
    _put(node_a, "k1", "Yes")
    _put(node_b, "k1", "Yes")
    _put(node_b, "k2", "No")
    assert main(["cache", "merge", str(node_a), str(node_b), "--into", str(tmp_path / "m")]) == 0
    assert capsys.readouterr().out.strip() == (
        f"merged 2 cache file(s) into {tmp_path / 'm'}: 2 replies added, 1 already there; 2 in all")
    # Without --into: this machine's cache ($REFEREE_CACHE_DIR here).
    assert main(["cache", "merge", str(node_b)]) == 0
    assert _rows(tmp_path / "cache-dir" / "judge_cache.sqlite3") == {"k1": "Yes", "k2": "No"}


@pytest.mark.parametrize("make,expected", [
    (lambda p: None, "no such judge cache file"),
    (lambda p: p.write_text("not a database, just text\n" * 200), "not a referee judge cache"),
    (lambda p: sqlite3.connect(p).execute("CREATE TABLE other (x)").connection.commit(),
     "not a referee judge cache (no such table: source.judge_replies)"),
], ids=["missing", "not-sqlite", "other-sqlite"])
def test_bad_sources_are_one_line_naming_the_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], make, expected: str) -> None:
    source = tmp_path / "node.sqlite3"
    make(source)
    assert main(["cache", "merge", str(source), "--into", str(tmp_path / "m.sqlite3")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"referee: error: {source}: ") and expected in err
    assert len(err.splitlines()) == 1


def test_a_cache_is_not_merged_into_itself(tmp_path: Path) -> None:
    _put(tmp_path / "a.sqlite3", "k1", "Yes")
    with pytest.raises(ValueError, match="a.sqlite3: a cache cannot be merged into itself"):
        merge_caches([tmp_path / "a.sqlite3"], tmp_path / "a.sqlite3")
