"""The scripted judge server speaks each provider's API through one wire format per API,
chosen once per request from its route (referee/testing/wire.py); nothing asks a provider's
name (tests/test_provider_rules.py). What each format writes is covered through the real SDKs
by the judge tests; these pin how a format is chosen, and what a provider the server does not
emulate gets."""

from __future__ import annotations

import pytest

from referee.testing import ScriptedJudgeServer
from referee.testing.script import RateLimitState
from referee.testing.server import _error_body, _parse_request
from referee.testing.wire import for_provider, for_route

REFUSED = RateLimitState(admitted=False, retry_after_s=1.5, rpm=60, remaining_requests=0,
                         reset_requests_s=1.5, tpm=None, remaining_tokens=0, reset_tokens_s=0)


@pytest.mark.parametrize(("route", "api"), [
    ("/v1/chat/completions", ("openai", "chat")),
    ("/v1/responses", ("openai", "responses")),
    ("/v1/messages", ("anthropic", "messages")),
    ("/v1beta/models/gemini-2.5-flash:generateContent", ("google", "generate_content")),
])
def test_each_route_picks_its_api(route: str, api: tuple[str, str]) -> None:
    wire = for_route(route)
    assert (wire.provider, wire.api_style) == api


def test_a_route_no_api_has_is_refused() -> None:
    with pytest.raises(LookupError):
        for_route("/v1/embeddings")


def test_a_request_reads_the_same_whole_or_through_its_format() -> None:
    body = {"model": "gpt-4o-mini", "temperature": 0.2, "max_tokens": 9,
            "messages": [{"role": "system", "content": "Be brief."},
                         {"role": "user", "content": "Hi?"}]}
    assert _parse_request("/v1/chat/completions?x=1", body) == (
        "openai", "chat", "gpt-4o-mini", "Hi?", "Be brief.", 0.2, 9)


def test_what_a_providers_apis_share_follows_the_provider() -> None:
    with ScriptedJudgeServer() as server:
        assert server.base_url("openai").endswith("/v1")
        assert server.base_url("anthropic") == server.base_url("google")
        # A provider the server has no API of: its SDK's base URL as given.
        assert server.base_url("vertex") == server.base_url("anthropic")
    assert set(for_provider("openai").rate_limit_headers(REFUSED)) == {
        "x-ratelimit-limit-requests", "x-ratelimit-remaining-requests",
        "x-ratelimit-reset-requests", "retry-after-ms", "retry-after"}
    assert set(for_provider("anthropic").rate_limit_headers(REFUSED)) == {
        "anthropic-ratelimit-requests-limit", "anthropic-ratelimit-requests-remaining",
        "anthropic-ratelimit-requests-reset", "retry-after"}
    assert for_provider("google").rate_limit_headers(REFUSED) == {"retry-after": "2"}
    assert _error_body("anthropic", 529, "busy")["error"]["type"] == "overloaded_error"
    assert _error_body("google", 429, "slow")["error"]["status"] == "RESOURCE_EXHAUSTED"
    assert _error_body("vertex", 500, "down") == _error_body("openai", 500, "down") == {
        "error": {"message": "down", "type": "scripted_error", "param": None, "code": "500"}}
