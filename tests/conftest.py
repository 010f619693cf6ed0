"""Fixtures shared by the test modules."""

from __future__ import annotations

from typing import Iterator

import pytest

from referee.judge import configure

# Settings a developer's shell may carry that would re-route or re-shape the tests' judges.
JUDGE_ENV = ("JUDGE_PROVIDER", "JUDGE_MODEL", "OPENAI_BASE_URL", "REFEREE_CACHE_DIR",
             "REFEREE_JUDGE_CONCURRENCY", "REFEREE_JUDGE_RPM", "REFEREE_JUDGE_TPM")


@pytest.fixture
def isolated_judge(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No global judge, no judge settings from the environment, the judge cache off."""
    for name in JUDGE_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("REFEREE_CACHE", "0")
    configure(None)
    yield
    configure(None)
