"""Fixtures for the `referee serve` tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _runs_in_tmp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("REFEREE_RUNS_DIR", str(tmp_path / "default-runs"))
