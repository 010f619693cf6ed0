"""The content tests' scripted judge server, reached by every provider's official SDK."""

from __future__ import annotations

import pytest

from referee.testing import ScriptedJudgeServer


@pytest.fixture
def server(isolated_judge, monkeypatch):
    with ScriptedJudgeServer(reply="Yes") as running:
        key = f"scripted-{running.port}"  # keeps the judge layer's shared endpoints apart
        for var in ("GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "ANTHROPIC_AUTH_TOKEN"):
            monkeypatch.delenv(var, raising=False)
        for provider, prefix in (("openai", "OPENAI"), ("anthropic", "ANTHROPIC")):
            monkeypatch.setenv(f"{prefix}_BASE_URL", running.base_url(provider))
            monkeypatch.setenv(f"{prefix}_API_KEY", key)
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", running.base_url("google"))
        monkeypatch.setenv("GOOGLE_API_KEY", key)
        yield running
