"""Fixtures shared by the test modules."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import user_dirs
from chromium_support import BROWSER_MISSING

from referee.judge import configure
from referee.judge.reply_cache import flush_caches
from referee.run.session import default_runs_dir
from referee.testing import DUMMY_API_KEY, ScriptedJudgeServer

# Settings a developer's shell may carry that would re-route or re-shape the tests' judges.
JUDGE_ENV = ("JUDGE_PROVIDER", "JUDGE_MODEL", "JUDGE_PANEL", "JUDGE_PANEL_AGGREGATE",
             "JUDGE_PANEL_QUORUM", "OPENAI_BASE_URL", "REFEREE_CACHE_DIR",
             "REFEREE_JUDGE_CONCURRENCY", "REFEREE_JUDGE_RPM", "REFEREE_JUDGE_TPM",
             "REFEREE_JUDGE_MAX_RETRIES", "REFEREE_DIRECT_HTTP", "REFEREE_JUDGE_BATCH_API",
             "JUDGE_CASCADE", "JUDGE_CASCADE_MARGIN")


@pytest.fixture
def isolated_judge(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No global judge, no judge settings from the environment, the judge cache off."""
    for name in JUDGE_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("REFEREE_CACHE", "0")
    configure(None)
    yield
    configure(None)


@pytest.fixture
def reply_cache_in_tmp_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """No global judge and no judge settings from the environment; the judge cache on, its
    default directory (yielded) under ``tmp_path``."""
    for name in ("JUDGE_PROVIDER", "JUDGE_MODEL", "OPENAI_BASE_URL", "REFEREE_CACHE"):
        monkeypatch.delenv(name, raising=False)
    cache_dir = tmp_path / "cache-dir"
    monkeypatch.setenv("REFEREE_CACHE_DIR", str(cache_dir))
    configure(None)
    yield cache_dir
    configure(None)

@pytest.fixture
def openai_judge_server(isolated_judge: None, monkeypatch: pytest.MonkeyPatch
                        ) -> Iterator[Callable[..., ScriptedJudgeServer]]:
    """Starts a scripted judge server (``ScriptedJudgeServer``'s arguments) that the OpenAI
    SDK reaches through the environment, for a test's isolated judge; stopped after the test."""
    with ExitStack() as servers:
        def start(reply: Any, **options: Any) -> ScriptedJudgeServer:
            server = servers.enter_context(ScriptedJudgeServer(reply=reply, **options))
            monkeypatch.setenv("OPENAI_BASE_URL", server.base_url("openai"))
            monkeypatch.setenv("OPENAI_API_KEY", DUMMY_API_KEY)
            return server

        yield start


# Where a run goes when a test gives no runs_dir: the repository's .referee/runs (or the
# runs directory of the shell that started pytest). A run left there fills `referee list` and
# the viewer of whoever works in the checkout, so a test must store its runs under tmp_path
# (runs_dir=, --out) or not at all (save=False).
REPOSITORY_RUNS = Path(__file__).resolve().parent.parent / ".referee" / "runs"
_WATCHED_RUNS = sorted({REPOSITORY_RUNS, default_runs_dir().absolute()})


def _stored_runs() -> set[Path]:
    found: set[Path] = set()
    for runs in _WATCHED_RUNS:
        try:
            found.update(runs / name for name in os.listdir(runs))
        except OSError:  # not there (yet): nothing stored
            pass
    return found


@pytest.fixture(autouse=True)
def no_runs_left_in_the_checkout() -> Iterator[None]:
    before = _stored_runs()
    yield
    left = sorted(_stored_runs() - before)
    if left:
        pytest.fail(f"this test stored {len(left)} run(s) in the checkout's runs directory "
                    f"({', '.join(map(str, left[:3]))}); give it runs_dir=tmp_path (--out for "
                    "the CLI) or save=False", pytrace=False)


def pytest_configure(config: pytest.Config) -> None:
    user_dirs.point_user_dirs_at_a_sentinel()


def pytest_unconfigure(config: pytest.Config) -> None:
    user_dirs.remove_the_sentinel()


_cache_folders = itertools.count()


@pytest.fixture(autouse=True)
def a_judge_cache_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """The judge cache is on by default, so a test that asks a judge without placing its cache
    would use the user's. Unplaced, it goes to a folder of the test's own (created only when
    used): never the user's, and no reply one test cached answers another's request."""
    assert user_dirs.test_caches is not None
    monkeypatch.setenv("REFEREE_CACHE_DIR", str(user_dirs.test_caches / f"test-{next(_cache_folders)}"))


@pytest.fixture(autouse=True)
def nothing_written_to_the_users_home() -> Iterator[None]:
    before = user_dirs.user_dir_entries()
    yield
    flush_caches()  # a judge cache writes a moment later: the test that filled it is this one
    message = user_dirs.written_to_user_dirs(before)
    if message is not None:
        pytest.fail(message, pytrace=False)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line, however many browser tests skipped for want of a browser (`pytest -q` shows
    no skip reasons)."""
    skipped = [report for report in terminalreporter.stats.get("skipped", [])
               if BROWSER_MISSING in str(getattr(report, "longrepr", ""))]
    if skipped:
        terminalreporter.write_line(f"{len(skipped)} browser test(s) skipped: {BROWSER_MISSING}",
                                    yellow=True)
