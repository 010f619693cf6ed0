"""Names users import keep working: old module paths after a rename, and the top level."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize(("old", "new"), [
    ("referee.judge.cache", "referee.judge.reply_cache"),
    ("referee.judge.caching", "referee.judge.prompt_caching"),
    ("referee.run.retry", "referee.run.case_retry"),
])
def test_a_renamed_modules_old_path_is_the_same_module(old: str, new: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # The very same module, not a copy of its names: a patch through the old path (as the
    # multivon tests do with "...retry.time.sleep") reaches the code that runs.
    assert importlib.import_module(old) is importlib.import_module(new)
    package, _, leaf = old.rpartition(".")
    assert getattr(importlib.import_module(package), leaf) is importlib.import_module(new)
    monkeypatch.setattr(f"{old}.__doc__", "patched")
    assert importlib.import_module(new).__doc__ == "patched"


def test_old_paths_import_their_names() -> None:
    from referee.judge.cache import JudgeCache, cache_stats  # noqa: F401
    from referee.judge.caching import estimate_tokens, worth_caching  # noqa: F401
    from referee.run.retry import JudgeRetry, should_retry  # noqa: F401
