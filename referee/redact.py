"""Secrets out of every text referee stores or shows: one home for redaction.

Three things are removed:

* the literal value of every key referee was given or read: ``JudgeConfig(api_key=...)``,
  the providers' key variables in the environment, and passwords written into a base URL;
* anything shaped like a provider key (``sk-...``, ``AIza...``), whoever's it is;
* the password part of any URL (``http://user:PASS@host`` becomes ``http://user:***@host``).

Redaction always runs on the whole text, before it is cut to length: a key cut in half by a
length limit no longer matches anything and would survive in part.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Iterator
from typing import Annotated, Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import AfterValidator

MASK = "***"

# The variables referee (or the SDKs it drives) reads keys and tokens from.
KEY_ENV_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "GOOGLE_API_KEY",
                "GEMINI_API_KEY")
BASE_URL_ENV_VARS = ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")

# Shorter values would turn ordinary words into "***" wherever they occur.
MIN_SECRET_CHARS = 6

# Key-shaped tokens (OpenAI/Anthropic "sk-...", Google "AIza...").
_KEY_SHAPED = re.compile(r"\b(?:sk-[A-Za-z0-9_\-]{8,}|AIza[A-Za-z0-9_\-]{20,})")
# scheme://user:password@ — the password is everything up to the last '@' of the authority.
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s/:@]*:)"
                           r"(?P<password>[^\s/@]+)(?=@)")
# Keys whose values must never reach disk, matched case-insensitively anywhere in a mapping.
_SECRET_KEY = re.compile(r"(api[_-]?key|secret|token$|password|authorization|credential)", re.I)

_lock = threading.Lock()
_remembered: set[str] = set()


def remember_secret(value: str | None) -> None:
    """Redact ``value`` from now on wherever referee stores or prints text."""
    if value and len(value.strip()) >= MIN_SECRET_CHARS:
        with _lock:
            _remembered.add(value.strip())


def url_password(url: str | None) -> str | None:
    """The password in a URL's userinfo, or None."""
    if not url or "@" not in url:
        return None
    try:
        return urlsplit(url.strip()).password or None
    except ValueError:
        return None


def mask_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (user name and host stay readable)."""
    password = url_password(url)
    if password is None:
        return url
    parts = urlsplit(url.strip())
    user = parts.username or ""
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port is not None else ""
    return urlunsplit(parts._replace(netloc=f"{user}:{MASK}@{host}{port}"))


def _remember_url_password(url: str) -> str:
    remember_secret(url_password(url))
    return url.strip()


# The type of a ``base_url`` field: a password written into it becomes a remembered secret.
BaseURL = Annotated[str, AfterValidator(_remember_url_password)]


def mask_url_fields(fields: Iterable[tuple[str | None, Any]]) -> Iterator[tuple[str | None, Any]]:
    """A pydantic model's ``__repr_args__`` with the password of its ``base_url`` masked."""
    for name, value in fields:
        yield name, (mask_url(value) if name == "base_url" and isinstance(value, str)
                     else value)


def mask_url_passwords(text: str) -> str:
    """``text`` with the password of every URL in it shown as ``***``."""
    return _URL_PASSWORD.sub(lambda m: m.group("head") + MASK, text)


def known_secrets() -> list[str]:
    """Every literal secret to remove, longest first (so a key that contains another goes whole)."""
    found: set[str] = set()
    with _lock:
        found.update(_remembered)
    for name in KEY_ENV_VARS:
        value = os.environ.get(name, "").strip()
        if len(value) >= MIN_SECRET_CHARS:
            found.add(value)
    for name in BASE_URL_ENV_VARS:
        password = url_password(os.environ.get(name))
        if password and len(password) >= MIN_SECRET_CHARS:
            found.add(password)
    return sorted(found, key=len, reverse=True)


def redact(text: str) -> str:
    """``text`` without any known secret, key-shaped token or URL password."""
    if not text:
        return text
    for secret in known_secrets():
        if secret in text:
            text = text.replace(secret, MASK)
    return _KEY_SHAPED.sub(MASK, mask_url_passwords(text))


def redacted_head(text: str, limit: int) -> tuple[str, int]:
    """``text`` cut to its first ``limit`` characters, and how many characters were left out
    (0: nothing was cut). A text that is cut is masked first: a key cut in half would no longer
    match, and its first half would be shown."""
    if len(text) <= limit:
        return text, 0
    text = redact(text)
    return text[:limit], max(len(text) - limit, 0)


# The type of an error text (a case's, a run's, a criterion's): whatever raised it (the model
# under test, a user's criterion, an SDK echoing its key in a 401) never knew to keep keys out.
RedactedText = Annotated[str, AfterValidator(redact)]


def clip(text: str, limit: int, *, one_line: bool = True) -> str:
    """Redacted first, then cut to ``limit`` characters (ending in "...")."""
    text = redact(text)
    if one_line:
        text = " ".join(text.split())
    return text if len(text) <= limit else text[: max(limit - 3, 0)] + "..."


def redact_secrets(value: Any) -> Any:
    """A copy of ``value`` with every secret-looking key dropped (API keys, tokens, headers),
    and secrets removed from the strings that remain (a base URL's password, say)."""
    if isinstance(value, dict):
        return {
            k: redact_secrets(v) for k, v in value.items()
            if not (isinstance(k, str) and _SECRET_KEY.search(k))
        }
    if isinstance(value, (list, tuple)):
        return [redact_secrets(v) for v in value]
    if isinstance(value, str):
        return redact(value)
    return value
