"""The guard of tests/conftest.py: no test writes under the user's home or cache directories
(design decision 18), under xdist too (each worker process has its own sentinel home)."""

from __future__ import annotations

import os
from pathlib import Path

import conftest
import platformdirs

from referee.judge import default_cache_path


def test_an_unplaced_judge_cache_is_the_tests_own() -> None:
    assert conftest._test_caches is not None
    assert conftest._test_caches in default_cache_path().parents


def test_the_users_directories_point_at_the_sentinel_home(monkeypatch) -> None:
    monkeypatch.delenv("REFEREE_CACHE_DIR")  # each test's own, set by conftest
    home = conftest._sentinel_home
    assert home is not None and home.is_dir()
    for name in conftest.USER_DIR_VARIABLES:
        assert home in Path(os.environ[name]).parents
    assert home in Path(os.path.expanduser("~")).parents
    assert home in Path(platformdirs.user_cache_dir("referee")).parents
    assert home in default_cache_path().parents  # where an unnamed judge cache would go


def test_a_judge_cache_in_the_default_place_is_caught(monkeypatch) -> None:
    monkeypatch.delenv("REFEREE_CACHE_DIR")  # each test's own, set by conftest
    before = conftest.user_dir_entries()
    path = default_cache_path()  # where a judge cache whose place no one chose goes
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"SQLite format 3\x00")
    try:
        message = conftest.written_to_user_dirs(before)
        assert message is not None and "judge_cache.sqlite3" in message
        assert "write under tmp_path" in message
    finally:
        _remove_new(before)
    assert conftest.written_to_user_dirs(before) is None


def test_a_change_to_a_file_that_was_there_is_caught() -> None:
    """A cache that an earlier test created is written to, not created: still a write."""
    assert conftest._sentinel_home is not None
    existing = conftest._sentinel_home / "xdg_data_home" / "notes.txt"
    existing.write_text("one", encoding="utf-8")
    try:
        before = conftest.user_dir_entries()
        assert conftest.written_to_user_dirs(before) is None
        existing.write_text("one and two", encoding="utf-8")
        message = conftest.written_to_user_dirs(before)
        assert message is not None and "notes.txt" in message
    finally:
        existing.unlink()


def _remove_new(before: dict[Path, tuple[int, int]]) -> None:
    for path in sorted(set(conftest.user_dir_entries()) - set(before), reverse=True):
        if path.is_dir():
            path.rmdir()
        else:
            path.unlink()
