"""An in-process fake judge provider: the scripted judge without sockets, for fast unit tests.

``FakeJudge`` registers provider ``"fake"``; its ``judge_config()`` routes every call through the
real judge layer (limits, retries, cache, usage) to the fake's script instead of a network.
"""

from __future__ import annotations

import asyncio
import itertools
import weakref
from typing import Any

from referee.judge.config import JudgeConfig
from referee.judge.providers import (
    JudgeRequest,
    ProviderSetupError,
    RawReply,
    register_provider,
)
from referee.judge.retry import MalformedReply
from referee.testing.script import (
    Fault,
    Outcome,
    RecordedRequest,
    Reply,
    Responder,
    ScriptedJudge,
    token_counts,
)

FAKE_PROVIDER = "fake"
_ids = itertools.count(1)
_fakes: weakref.WeakValueDictionary[str, FakeJudge] = weakref.WeakValueDictionary()


class _FakeResponse:
    def __init__(self, status_code: int, headers: dict[str, str]) -> None:
        self.status_code = status_code
        self.headers = dict(headers)


class FakeHTTPError(Exception):
    """Shaped like the SDKs' status errors (status_code, response.headers) so retries treat it
    exactly as they treat a real provider's."""

    judge_provider_error = True

    def __init__(self, status_code: int, retry_after: str | None) -> None:
        super().__init__(f"fake judge HTTP {status_code}")
        self.status_code = status_code
        self.response = _FakeResponse(status_code,
                                      {"retry-after": retry_after} if retry_after else {})


class FakeJudge(ScriptedJudge):
    """A scripted judge answering in-process. Scripted like ScriptedJudgeServer."""

    def __init__(self, reply: Outcome | Responder = "Yes") -> None:
        super().__init__(reply)
        self.handle = f"fake://{next(_ids)}"
        _fakes[self.handle] = self

    def judge_config(self, model: str = "fake-judge", **overrides: Any) -> JudgeConfig:
        fields: dict[str, Any] = {"provider": FAKE_PROVIDER, "model": model,
                                  "base_url": self.handle, "cache": False}
        fields.update(overrides)
        return JudgeConfig(**fields)

    async def respond(self, request: JudgeRequest) -> RawReply:
        recorded = self._append_request(
            method="CALL", path=self.handle, provider=FAKE_PROVIDER,
            api_style=request.api_style, model=request.model, prompt=request.prompt,
            system=request.system, temperature=request.temperature,
            max_tokens=request.max_tokens,
            body={"json_mode": request.json_mode, "timeout": request.timeout})
        limits = self._admit(recorded)
        if limits is not None and not limits.admitted:
            raise FakeHTTPError(429, f"{max(limits.retry_after_s, 0.001):.3f}")
        self._enter()
        try:
            outcome = self.script.decide(recorded)
            raw = await self._realize(outcome, recorded, request.timeout)
            limit = self.rate_limit
            if limits is not None and limit is not None:
                limit.charge(raw.output_tokens)  # as the server does when it answers
            return raw
        finally:
            self._leave()

    async def _realize(self, outcome: Reply | Fault, recorded: RecordedRequest,
                       timeout: float) -> RawReply:
        if isinstance(outcome, Fault):
            if outcome.kind == "status":
                raise FakeHTTPError(outcome.status, outcome.retry_after)
            if outcome.kind == "reset":
                raise ConnectionResetError("fake judge connection reset")
            if outcome.kind == "hang":
                await asyncio.sleep(min(outcome.seconds if outcome.seconds is not None
                                        else timeout, timeout))
                raise TimeoutError(f"fake judge did not answer within {timeout}s")
            if outcome.kind in ("truncated", "non_json"):
                raise MalformedReply(f"fake judge {outcome.kind} body")
            if outcome.kind == "empty":
                outcome = Reply(text="")
            elif outcome.kind == "latency":
                await asyncio.sleep(outcome.seconds or 0.0)
                outcome = Reply()
            else:
                raise ValueError(f"unknown fault kind {outcome.kind!r}")
        if outcome.latency_s:
            await asyncio.sleep(outcome.latency_s)
        input_tokens, output_tokens = token_counts(outcome, recorded)
        return RawReply(text=outcome.text, input_tokens=input_tokens,
                        output_tokens=output_tokens, model=recorded.model,
                        truncated=outcome.cut_off)


class _FakeAdapter:
    def credentials(self, cfg: JudgeConfig) -> tuple[str, str | None]:
        return cfg.base_url, None

    def make_client(self, base_url: str, api_key: str | None, cfg: JudgeConfig) -> Any:
        fake = _fakes.get(base_url)
        if fake is None:
            raise ProviderSetupError(f"no FakeJudge is alive for {base_url!r}; keep a reference to it "
                              "while its judge_config() is in use")
        return fake

    async def call(self, client: Any, request: JudgeRequest) -> RawReply:
        fake: FakeJudge = client
        return await fake.respond(request)


register_provider(FAKE_PROVIDER, _FakeAdapter())
