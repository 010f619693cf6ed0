"""Provider prompt caching, emulated for the scripted judge by each provider's published rules.

A request's prompt (system text, then the user message) is looked up when it arrives and
stored as its reply goes out, so requests fired together with a cold prefix all miss,
as they do at the providers. What counts as a hit follows ``referee.judge.prompt_caching``:

- OpenAI and Gemini: the longest prefix seen before (OpenAI in 128-token steps), for prompts
  of at least the minimum length;
- Anthropic: only the prefix up to a ``cache_control`` breakpoint, and only when that prefix is
  at least the model's minimum; a miss there is a cache write;
- every entry expires ``ttl_s`` after its last use.

Tokens are ``referee.judge.estimate_tokens`` (4 characters each), so the prefix steps are
fixed character lengths.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field

from referee.judge.prompt_caching import CHARS_PER_TOKEN, CachingRules, estimate_tokens

# Gemini publishes no step; a small one keeps the emulation close without hashing every token.
_MIN_STEP_TOKENS = 16


@dataclass
class CacheUse:
    """What one request got from the cache, and what it will store once answered."""

    cached_tokens: int = 0
    write_tokens: int = 0
    _store: list[str] = field(default_factory=list, repr=False)


class PromptCache:
    """One provider's prompt cache; thread-safe (the server answers on many threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._expires: dict[str, float] = {}

    def _alive(self, key: str, now: float) -> bool:
        expires = self._expires.get(key)
        if expires is None:
            return False
        if expires <= now:
            del self._expires[key]
            return False
        return True

    def begin(self, rules: CachingRules, namespace: str, text: str, breakpoint: int | None,
              now: float) -> CacheUse:
        """Look ``text`` up at time ``now``; ``breakpoint`` ends the marked prefix (Anthropic)."""
        if rules.needs_breakpoint:
            return self._begin_marked(rules, namespace, text, breakpoint, now)
        if estimate_tokens(text) < rules.min_tokens:
            return CacheUse()
        step = max(rules.step_tokens, _MIN_STEP_TOKENS) * CHARS_PER_TOKEN
        digest = hashlib.sha256(namespace.encode("utf-8"))
        keys: list[tuple[int, str]] = []
        for end in range(step, len(text) + 1, step):
            digest.update(text[end - step:end].encode("utf-8", "surrogatepass"))
            if end >= rules.min_tokens * CHARS_PER_TOKEN:
                keys.append((end, digest.copy().hexdigest()))
        with self._lock:
            hit = next(((end, key) for end, key in reversed(keys) if self._alive(key, now)), None)
            if hit is not None:
                for end, key in keys:
                    if end <= hit[0]:
                        self._expires[key] = now + rules.ttl_s  # a hit refreshes its entry
        cached = estimate_tokens(text[:hit[0]]) if hit is not None else 0
        return CacheUse(cached_tokens=cached,
                        _store=[key for end, key in keys if hit is None or end > hit[0]])

    def _begin_marked(self, rules: CachingRules, namespace: str, text: str,
                      breakpoint: int | None, now: float) -> CacheUse:
        if breakpoint is None:
            return CacheUse()
        prefix = text[:breakpoint]
        tokens = estimate_tokens(prefix)
        if tokens < rules.min_tokens:
            return CacheUse()
        key = hashlib.sha256(f"{namespace}\x00{prefix}".encode("utf-8", "surrogatepass")).hexdigest()
        with self._lock:
            if self._alive(key, now):
                self._expires[key] = now + rules.ttl_s
                return CacheUse(cached_tokens=tokens)
        return CacheUse(write_tokens=tokens, _store=[key])

    def commit(self, rules: CachingRules, use: CacheUse, now: float) -> None:
        """The request was answered at ``now``: what it brought to the cache is there now."""
        with self._lock:
            for key in use._store:
                self._expires[key] = now + rules.ttl_s

    def clear(self) -> None:
        with self._lock:
            self._expires.clear()
