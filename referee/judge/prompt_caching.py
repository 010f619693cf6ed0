"""Provider prompt caching: each provider's published rules, and a cheap token estimate.

Each provider's adapter holds its rules (``ProviderRules.caching_rules``). The judge layer reads
them to decide when a shared prefix is worth a cache breakpoint
(Anthropic) or a warm-up request before its siblings fan out; ``referee.testing``'s scripted
server reads the same rules to emulate each provider's cache, so what the judge assumes and
what the tests see cannot drift apart.

Published rules (checked 2026-12-01 against each provider's documentation):

- OpenAI: automatic for prompts of 1,024 tokens or more; the cached part is the longest
  prefix seen before, in 128-token steps; entries live 5-10 minutes after last use.
- Anthropic: only up to a ``cache_control`` breakpoint, and only when the prefix up to it is at
  least the model's minimum (4,096 tokens for Haiku 4.5 and Opus 4.5/4.6/4.7; 2,048 for the
  Haiku 3 models; 1,024 for the Sonnet 4.x models, Opus 4/4.1 and the rest); a write costs
  1.25x input, a read 0.1x; entries live 5 minutes after last use.
- Gemini: implicit caching of a repeated prefix, on Gemini 2.5 and newer only, from 2,048
  tokens on 2.5 Flash and 2.5 Pro and 4,096 on the Gemini 3 models (the minimum the Gemini API
  documentation has listed since mid-2026; it said 1,024 for 2.5 Flash before); entry lifetime
  is not published, 5 minutes assumed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import math
import time
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator

from referee.judge.providers import CachingRules, rules_for

__all__ = ["CHARS_PER_TOKEN", "CachingRules", "PrefixWarmer", "caching_rules", "estimate_tokens",
           "loop_warmer", "warm_up", "worth_caching"]

# ~4 characters per token for English text: the rule of thumb all three providers publish.
CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """A provider-neutral token estimate (no tokenizer download, no network)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN) if text else 0


@functools.lru_cache(maxsize=256)  # asked once per judge request, of a handful of models
def caching_rules(provider: str, model: str) -> CachingRules | None:
    """The prompt-caching rules of ``provider`` for ``model`` (its adapter's,
    ``ProviderRules.caching_rules``); None when it does not cache."""
    return rules_for(provider).caching_rules(model.strip().lower().rsplit("/", 1)[-1])


def worth_caching(provider: str, model: str, prefix_text: str) -> bool:
    """Whether a prefix this long can be served from ``provider``'s cache at all."""
    rules = caching_rules(provider, model)
    return rules is not None and estimate_tokens(prefix_text) >= rules.min_tokens


class PrefixWarmer:
    """Sends the first request of a cacheable prefix alone, and its siblings after it.

    Requests fired together with a cold prefix all pay the full input price, because none
    finds the prefix in the provider's cache yet. So the first request for a prefix goes
    first; requests for the same prefix wait until its reply has arrived (or it failed) and
    then fan out together. A prefix warmed within the provider's cache lifetime is not
    waited for again. State is per event loop, like the SDK clients.
    """

    _MAX_REMEMBERED = 4096

    def __init__(self) -> None:
        self._warming: dict[str, asyncio.Event] = {}
        self._warmed: OrderedDict[str, float] = OrderedDict()

    @contextlib.asynccontextmanager
    async def turn(self, key: str, ttl_s: float) -> AsyncIterator[None]:
        now = time.monotonic()
        warmed_at = self._warmed.get(key)
        if warmed_at is not None and now - warmed_at < ttl_s:
            yield
            return
        event = self._warming.get(key)
        if event is not None:
            await event.wait()
            yield
            return
        event = self._warming[key] = asyncio.Event()
        try:
            yield
        finally:
            # Success or failure, the siblings go now: a failed warm-up must not stall them.
            del self._warming[key]
            event.set()
            self._warmed[key] = time.monotonic()
            self._warmed.move_to_end(key)
            while len(self._warmed) > self._MAX_REMEMBERED:
                self._warmed.popitem(last=False)


_warmers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, PrefixWarmer] = (
    weakref.WeakKeyDictionary())


def loop_warmer() -> PrefixWarmer:
    loop = asyncio.get_running_loop()
    warmer = _warmers.get(loop)
    if warmer is None:
        warmer = _warmers[loop] = PrefixWarmer()
    return warmer


def warm_up(provider: str, model: str, *prefix_parts: str
            ) -> contextlib.AbstractAsyncContextManager[None]:
    """The turn of one request whose prefix (``prefix_parts``: endpoint, system, shared text)
    is cacheable at ``provider``: first alone, then its siblings together (``PrefixWarmer``)."""
    rules = caching_rules(provider, model)
    digest = hashlib.sha256()
    for part in (provider, model, *prefix_parts):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
    return loop_warmer().turn(digest.hexdigest(), rules.ttl_s if rules is not None else 0.0)
