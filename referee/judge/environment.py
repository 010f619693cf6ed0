"""Reading the judge layer's on/off environment switches (REFEREE_CACHE, REFEREE_DIRECT_HTTP).

Below the judge configuration and the provider adapters, which both read them.
"""

from __future__ import annotations

import os


def env_switch(name: str, error: type[Exception] = ValueError) -> bool | None:
    """An on/off environment variable: None when unset or empty, True for 1/true/yes/on, False
    for 0/false/no/off; any other value raises ``error`` naming the variable."""
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return None
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise error(f"environment variable {name}={raw!r} is not a boolean "
                "(expected 0/1, true/false, on/off)")
