"""Each provider through its official SDK against the scripted server; resolution end to end."""

from __future__ import annotations

import pytest

from referee.judge import JudgeConfig, configure, get_judge, resolve_judge_config, set_price
from referee.judge.client import _endpoint_for
from referee.testing import DUMMY_API_KEY, Fault, Reply, ScriptedJudgeServer

PROVIDERS = [("openai", "chat"), ("openai", "responses"), ("anthropic", "chat"), ("google", "chat")]
PATHS = {("openai", "chat"): "/v1/chat/completions", ("openai", "responses"): "/v1/responses",
         ("anthropic", "chat"): "/v1/messages", ("google", "chat"): ":generateContent"}
# Provider credentials and endpoints from a developer's shell, beyond conftest's JUDGE_ENV.
_PROVIDER_ENV = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "GOOGLE_API_KEY",
                 "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI")


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, isolated_judge: None) -> None:
    for name in _PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(("provider", "api_style"), PROVIDERS)
async def test_round_trip_through_official_sdk(judge_server: ScriptedJudgeServer, provider: str,
                                               api_style: str) -> None:
    judge_server.set_reply(Reply("Yes, fully supported.", input_tokens=42, output_tokens=4))
    cfg = judge_server.judge_config(provider=provider, model="judge-x", api_style=api_style,
                                    temperature=0.25, max_tokens=77)
    reply = await get_judge(cfg).complete("Is the claim supported?", system="You are strict.")
    assert reply.text == "Yes, fully supported."
    assert (reply.usage.input_tokens, reply.usage.output_tokens, reply.usage.requests) == (42, 4, 1)
    assert not reply.cached and reply.provider == provider and reply.model == "judge-x"
    [request] = judge_server.requests
    assert PATHS[(provider, api_style)] in request.path
    assert (request.provider, request.model) == (provider, "judge-x")
    assert request.prompt == "Is the claim supported?"
    assert request.system is not None and "You are strict." in request.system
    assert request.max_tokens == 77
    if provider != "anthropic" or "temperature" in request.body:
        assert request.temperature == 0.25
    auth = request.headers.get("authorization", "") + request.headers.get("x-api-key", "") + \
        request.headers.get("x-goog-api-key", "")
    assert DUMMY_API_KEY in auth


@pytest.mark.parametrize(("provider", "api_style"), PROVIDERS)
async def test_reasoning_blocks_are_not_the_answer(judge_server: ScriptedJudgeServer,
                                                   provider: str, api_style: str) -> None:
    judge_server.set_reply(Reply("No", thinking="Yes yes yes, let me think"))
    cfg = judge_server.judge_config(provider=provider, api_style=api_style)
    assert (await get_judge(cfg).complete("q")).text == "No"


@pytest.mark.parametrize(("provider", "api_style"), PROVIDERS)
async def test_json_mode_reaches_the_provider(judge_server: ScriptedJudgeServer, provider: str,
                                              api_style: str) -> None:
    judge_server.set_reply('{"score": 0.5}')
    cfg = judge_server.judge_config(provider=provider, api_style=api_style)
    reply = await get_judge(cfg).complete("Return JSON", json_mode=True)
    assert reply.text == '{"score": 0.5}'
    body = judge_server.requests[0].body
    if (provider, api_style) == ("openai", "chat"):
        assert body["response_format"] == {"type": "json_object"}
    elif provider == "openai":
        assert body["text"]["format"]["type"] == "json_object"
    elif provider == "google":
        assert body["generationConfig"]["responseMimeType"] == "application/json"
    else:
        assert "JSON" in body["system"]


async def test_resolution_order_is_visible_at_the_server(judge_server: ScriptedJudgeServer,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # Built-in default: anthropic / claude-haiku-4-5, routed by the SDK's own env vars.
    monkeypatch.setenv("ANTHROPIC_BASE_URL", judge_server.base_url("anthropic"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", DUMMY_API_KEY)
    await get_judge(resolve_judge_config(None)).complete("q")
    # Environment: JUDGE_PROVIDER / JUDGE_MODEL, with OPENAI_BASE_URL routing the openai SDK.
    monkeypatch.setenv("JUDGE_PROVIDER", "openai")
    monkeypatch.setenv("JUDGE_MODEL", "env-model")
    monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url("openai"))
    monkeypatch.setenv("OPENAI_API_KEY", DUMMY_API_KEY)
    await get_judge(resolve_judge_config(None)).complete("q")
    # configure() beats the environment.
    configure(JudgeConfig(provider="openai", model="global-model"))
    await get_judge(resolve_judge_config(None)).complete("q")
    # judge= beats configure().
    await get_judge(resolve_judge_config(JudgeConfig(model="kwarg-model"))).complete("q")
    seen = [(r.provider, r.model) for r in judge_server.requests]
    assert seen == [("anthropic", "claude-haiku-4-5"), ("openai", "env-model"),
                    ("openai", "global-model"), ("openai", "kwarg-model")]


async def test_explicit_zero_temperature_beats_global(judge_server: ScriptedJudgeServer) -> None:
    configure(judge_server.judge_config(provider="openai", temperature=0.8))
    await get_judge(resolve_judge_config(JudgeConfig(temperature=0.0))).complete("q")
    await get_judge(resolve_judge_config(JudgeConfig(model="other"))).complete("q")
    assert [r.temperature for r in judge_server.requests] == [0.0, 0.8]


async def test_openai_base_url_env_routes_openai(judge_server: ScriptedJudgeServer,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url("openai"))
    # No key at all: local OpenAI-compatible servers do not need one.
    cfg = resolve_judge_config(JudgeConfig(provider="openai", model="llama3"))
    assert cfg.base_url == judge_server.base_url("openai")
    reply = await get_judge(cfg).complete("q")
    assert reply.text == "Yes"
    assert judge_server.requests[0].model == "llama3"


async def test_per_call_overrides_and_reply_model(judge_server: ScriptedJudgeServer) -> None:
    cfg = judge_server.judge_config(provider="google", model="gemini-2.5-flash")
    await get_judge(cfg).complete("q", temperature=0.3, max_tokens=12)
    request = judge_server.requests[0]
    assert (request.temperature, request.max_tokens) == (0.3, 12)


async def test_cost_uses_the_price_table(judge_server: ScriptedJudgeServer) -> None:
    judge_server.set_reply(Reply("Yes", input_tokens=1_000_000, output_tokens=1_000_000))
    known = await get_judge(judge_server.judge_config(provider="openai",
                                                      model="gpt-4o-mini")).complete("q")
    assert known.usage.cost_usd == pytest.approx(0.15 + 0.60)
    unknown = await get_judge(judge_server.judge_config(provider="openai",
                                                        model="house-model-7")).complete("q")
    assert unknown.usage.cost_usd is None
    set_price("house-model-7", 2.0, 3.0)
    priced = await get_judge(judge_server.judge_config(provider="openai",
                                                       model="house-model-7-20250101")).complete("q")
    assert priced.usage.cost_usd == pytest.approx(5.0)


async def test_rule_and_callback_scripting(judge_server: ScriptedJudgeServer) -> None:
    judge_server.add_rule("capital of France", "Yes")
    judge_server.set_reply(lambda request: f"No ({len(request.prompt)} chars)")
    judge = get_judge(judge_server.judge_config(provider="anthropic"))
    assert (await judge.complete("Is Paris the capital of France?")).text == "Yes"
    assert (await judge.complete("abc")).text == "No (3 chars)"


async def test_a_broken_responder_is_reported(judge_server: ScriptedJudgeServer) -> None:
    judge_server.set_reply(lambda request: 1 / 0)
    from referee.errors import JudgeUnavailable

    with pytest.raises(JudgeUnavailable, match="scripted responder raised ZeroDivisionError"):
        await get_judge(judge_server.judge_config(provider="openai", max_retries=0)).complete("q")
    assert [type(e) for e in judge_server.errors] == [ZeroDivisionError]


def test_judge_config_requires_a_running_server() -> None:
    server = ScriptedJudgeServer()
    with pytest.raises(RuntimeError, match="not running"):
        server.judge_config()


async def test_each_server_instance_is_its_own_endpoint() -> None:
    import openai

    with ScriptedJudgeServer("one") as first, ScriptedJudgeServer("two") as second:
        assert first.base_url() != second.base_url()
        assert first.base_url().startswith(first.url)
        await get_judge(first.judge_config(provider="openai")).complete("q")
        assert first.requests[0].path == "/v1/chat/completions"  # recorded without the prefix
        # The bare URL is served as well, for clients that build their own paths.
        client = openai.AsyncOpenAI(api_key="k", base_url=f"{second.url}/v1", max_retries=0)
        reply = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "q"}])
        await client.close()
        assert reply.choices[0].message.content == "two"
        assert second.requests[0].path == "/v1/chat/completions"


@pytest.mark.parametrize("provider", ["openai", "anthropic", "google"])
def test_a_sync_run_closes_the_judge_client_of_its_loop(judge_server: ScriptedJudgeServer,
                                                        provider: str) -> None:
    from referee import EvalCase, EvalSuite, Relevance

    cfg = judge_server.judge_config(provider=provider)
    endpoint = _endpoint_for(cfg)
    suite = EvalSuite("closing").add_cases([EvalCase(input="q")])
    suite.add_evaluator(Relevance(judge=cfg))
    for _ in range(3):
        assert suite.run(lambda p: "a", verbose=False, save=False).passed == 1
    # The client holds its loop alive, so a client left open would stay forever, one per run.
    assert endpoint.clients_created == 3 and endpoint.open_clients == 0


SDK_WIRES = [p for p in PROVIDERS if p[0] != "google"]
_SDK_HEADERS = ("authorization", "x-api-key", "anthropic-version", "content-type")


@pytest.mark.parametrize(("provider", "api_style"), SDK_WIRES)
async def test_direct_http_sends_and_reads_what_the_sdk_path_does(
        judge_server: ScriptedJudgeServer, provider: str, api_style: str) -> None:
    from referee.judge.providers import _direct

    judge_server.set_reply(Reply("Yes", input_tokens=42, output_tokens=4))
    cfg = judge_server.judge_config(provider=provider, api_style=api_style, cache=False)
    judge = get_judge(cfg)
    direct = await judge.complete("q", system="s", prompt_prefix="material\n", json_mode=True)
    client = _endpoint_for(cfg).client(cfg)
    assert client in _direct._direct_http  # the SDK's aiohttp session, not its pipeline
    _direct._direct_http.pop(client)
    through_sdk = await judge.complete("q", system="s", prompt_prefix="material\n",
                                       json_mode=True)
    first, second = judge_server.requests
    assert (first.path, first.body) == (second.path, second.body)
    assert [first.headers.get(h) for h in _SDK_HEADERS] == \
        [second.headers.get(h) for h in _SDK_HEADERS]
    assert (direct.text, direct.usage) == (through_sdk.text, through_sdk.usage)


@pytest.mark.parametrize(("provider", "api_style"), SDK_WIRES)
async def test_direct_http_raises_the_sdks_own_errors(judge_server: ScriptedJudgeServer,
                                                      provider: str, api_style: str) -> None:
    import importlib
    import socket

    from referee.judge.providers import JudgeRequest, adapter_for

    sdk = importlib.import_module(provider)
    cfg = judge_server.judge_config(provider=provider, api_style=api_style, cache=False)
    request = JudgeRequest(model="judge-x", prompt="q", system=None, json_mode=False,
                           temperature=0.0, max_tokens=8, timeout=5.0, api_style=api_style)
    adapter = adapter_for(provider)
    client = _endpoint_for(cfg).client(cfg)
    judge_server.enqueue_faults(Fault.rate_limit(retry_after=2))
    with pytest.raises(sdk.RateLimitError) as limited:
        await adapter.call(client, request)
    assert limited.value.response.headers["retry-after"] == "2"
    with socket.socket() as probe:  # a port with nothing listening
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    dead = adapter.make_client(closed, DUMMY_API_KEY, cfg)
    try:
        with pytest.raises(sdk.APIConnectionError):
            await adapter.call(dead, request)
    finally:
        await dead.close()


@pytest.mark.parametrize(("provider", "api_style"), SDK_WIRES)
async def test_direct_http_bounds_each_attempt_itself(judge_server: ScriptedJudgeServer,
                                                      provider: str, api_style: str) -> None:
    import importlib

    from referee.judge.providers import JudgeRequest, adapter_for, bounds_its_attempts

    # The judge arms no deadline of its own around such a client: the attempt must end alone.
    sdk = importlib.import_module(provider)
    cfg = judge_server.judge_config(provider=provider, api_style=api_style, cache=False)
    client = _endpoint_for(cfg).client(cfg)
    assert bounds_its_attempts(client)
    judge_server.enqueue_faults(Fault.hang())  # holds the request until the server stops
    request = JudgeRequest(model="judge-x", prompt="q", system=None, json_mode=False,
                           temperature=0.0, max_tokens=8, timeout=0.3, api_style=api_style)
    with pytest.raises(sdk.APITimeoutError):
        await adapter_for(provider).call(client, request)


def test_bodies_and_replies_orjson_refuses_still_go_through() -> None:
    import json

    from referee.judge.providers._base import json_value as _json_value
    from referee.judge.providers._direct import _json_bytes

    # orjson writes and reads the usual ones; the stdlib takes what orjson refuses.
    usual = {"prompt": "caf\u00e9", "n": 1}
    assert json.loads(_json_bytes(usual)) == usual
    assert json.loads(_json_bytes({"prompt": "half a pair \ud800"})) == {
        "prompt": "half a pair \ud800"}
    assert json.loads(_json_bytes({"seed": 2**70})) == {"seed": 2**70}
    assert _json_value(b'{"usage": {"prompt_tokens": 3}}') == {"usage": {"prompt_tokens": 3}}
    assert _json_value(b'{"score": NaN}')["score"] != 0  # NaN: read, not refused
    with pytest.raises(ValueError):
        _json_value(b"<html>502 Bad Gateway</html>")


async def test_a_custom_adapter_may_use_any_object_as_its_client() -> None:
    from referee.judge import register_provider
    from referee.judge.providers import JudgeRequest, RawReply

    class PlainClientAdapter:
        """Its client is a dict, which no weak reference can point to."""

        def credentials(self, cfg: JudgeConfig) -> tuple[str, str | None]:
            return "plain://", None

        def make_client(self, base_url: str, api_key: str | None, cfg: JudgeConfig) -> dict:
            return {"calls": 0}

        async def call(self, client: dict, request: JudgeRequest) -> RawReply:
            client["calls"] += 1
            return RawReply(text="Yes", input_tokens=3, output_tokens=1, model=request.model)

    register_provider("plain-client", PlainClientAdapter())
    cfg = JudgeConfig(provider="plain-client", model="m", cache=False)
    reply = await get_judge(cfg).complete("q")
    assert reply.text == "Yes" and reply.attempts == 1


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_clients_share_one_tls_context(judge_server: ScriptedJudgeServer,
                                             monkeypatch: pytest.MonkeyPatch,
                                             provider: str) -> None:
    import ssl

    from referee.judge import providers
    from referee.judge.providers import _direct

    # Each event loop gets its own client; loading the certificate store for each cost more
    # CPU than a hundred judge requests. A change of SSL_CERT_FILE still takes effect.
    cfg = judge_server.judge_config(provider=provider, cache=False)
    adapter = providers.adapter_for(provider)
    made = [adapter.make_client(judge_server.base_url(provider), DUMMY_API_KEY, cfg)
            for _ in range(2)]
    certifi = pytest.importorskip("certifi")
    monkeypatch.setenv("SSL_CERT_FILE", certifi.where())
    made.append(adapter.make_client(judge_server.base_url(provider), DUMMY_API_KEY, cfg))
    try:
        first, second, other = (_direct._direct_http[c]._transport.ssl_context for c in made)
        assert first is second and other is not first
        for context in (first, other):
            assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
            assert context.cert_store_stats()["x509_ca"] > 0
    finally:
        for client in made:
            await client.close()


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_proxied_endpoint_keeps_the_sdk_path(judge_server: ScriptedJudgeServer,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     provider: str) -> None:
    from referee.judge import providers
    from referee.judge.providers import _direct

    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")  # honoured by the SDK's transport only
    cfg = judge_server.judge_config(provider=provider, cache=False)
    client = providers.adapter_for(provider).make_client(judge_server.base_url(provider),
                                                         DUMMY_API_KEY, cfg)
    try:
        assert client not in _direct._direct_http
    finally:
        await client.close()


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_the_sdk_internals_the_direct_path_uses_exist(judge_server: ScriptedJudgeServer,
                                                            provider: str) -> None:
    import importlib

    from referee.judge.providers._direct import (
        SDK_CHECKED_WITH,
        _direct_http,
        missing_sdk_internals,
    )
    from referee.judge.providers._sdk import aiohttp_http_client

    # An SDK release that drops one of them silently loses the direct path (and its speed):
    # this names the release and what went.
    sdk = importlib.import_module(provider)
    base_url = judge_server.base_url(provider)
    http = aiohttp_http_client(sdk, 5.0, base_url)
    assert http is not None, f"{provider} {sdk.__version__} has no DefaultAioHttpClient"
    client_type = sdk.AsyncOpenAI if provider == "openai" else sdk.AsyncAnthropic
    client = client_type(api_key=DUMMY_API_KEY, base_url=base_url, max_retries=0,
                         http_client=http)
    try:
        missing = missing_sdk_internals(client, http)
        assert not missing, (
            f"{provider} {sdk.__version__} lacks SDK internals the direct HTTP path uses "
            f"(last checked with {provider} {SDK_CHECKED_WITH[provider]}): "
            f"{', '.join(missing)}; update referee/judge/providers/_direct.py, or set "
            "REFEREE_DIRECT_HTTP=0 meanwhile")
        cfg = judge_server.judge_config(provider=provider, cache=False)
        assert _endpoint_for(cfg).client(cfg) in _direct_http, "the internals are there, unused"
    finally:
        await client.close()


@pytest.mark.parametrize(("provider", "api_style"), SDK_WIRES)
async def test_with_direct_http_off_requests_go_through_the_sdks_public_post(
        judge_server: ScriptedJudgeServer, monkeypatch: pytest.MonkeyPatch, provider: str,
        api_style: str) -> None:
    import importlib

    from referee.judge.providers._direct import _direct_http

    sdk = importlib.import_module(provider)
    client_type = sdk.AsyncOpenAI if provider == "openai" else sdk.AsyncAnthropic
    public_post = client_type.post
    posted: list[str] = []

    async def counted_post(self: object, path: str, **kwargs: object) -> object:
        posted.append(path)
        return await public_post(self, path, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(client_type, "post", counted_post)
    monkeypatch.setenv("REFEREE_DIRECT_HTTP", "0")
    judge_server.set_reply(Reply("Yes", input_tokens=42, output_tokens=4))
    judge_server.enqueue_faults(Fault.rate_limit(retry_after=0))
    cfg = judge_server.judge_config(provider=provider, api_style=api_style, cache=False)
    reply = await get_judge(cfg).complete("q", system="s", json_mode=True)
    assert reply.text == "Yes" and reply.attempts == 2  # the SDK's 429 was retried as ever
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (42, 4)
    assert _endpoint_for(cfg).client(cfg) not in _direct_http
    assert len(posted) == 2 and len({r.path for r in judge_server.requests}) == 1


async def test_an_unreadable_direct_http_switch_is_named(judge_server: ScriptedJudgeServer,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from referee.errors import JudgeUnavailable

    monkeypatch.setenv("REFEREE_DIRECT_HTTP", "sometimes")
    with pytest.raises(JudgeUnavailable, match="REFEREE_DIRECT_HTTP='sometimes' is not a boolean"):
        await get_judge(judge_server.judge_config(cache=False)).complete("q")


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_an_sdk_without_an_internal_keeps_the_sdks_path(judge_server: ScriptedJudgeServer,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               provider: str) -> None:
    import importlib

    from referee.judge.providers import adapter_for
    from referee.judge.providers._direct import _direct_http

    # A release that drops the error builder would otherwise fail on the first error reply.
    sdk = importlib.import_module(provider)
    client_type = sdk.AsyncOpenAI if provider == "openai" else sdk.AsyncAnthropic
    owner = next(k for k in client_type.__mro__ if "_make_status_error_from_response" in vars(k))
    monkeypatch.delattr(owner, "_make_status_error_from_response")
    cfg = judge_server.judge_config(provider=provider, cache=False)
    client = adapter_for(provider).make_client(judge_server.base_url(provider), DUMMY_API_KEY, cfg)
    try:
        assert client not in _direct_http
    finally:
        await client.close()
