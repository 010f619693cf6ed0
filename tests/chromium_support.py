"""Where the browser tests find headless Chromium, and what they say when there is none.

No PyPI package ships a Chromium the tests could install with the `test` extra (Playwright
downloads its browsers at run time), so it comes from the system: `apt-get install chromium`.
On a developer's machine without it the browser tests skip, and the session ends with one line
saying how to install it; with CI set they fail instead, so CI never passes without them.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
BROWSER_MISSING = ("headless Chromium is not installed (none of chromium, chromium-browser, "
                   "google-chrome on PATH): the HTML report and viewer tests need it; install it "
                   "with `apt-get install chromium`")


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def find_chromium() -> str:
    """The browser's path; otherwise the test skips (fails with CI set) with BROWSER_MISSING."""
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    if in_ci():
        pytest.fail(f"{BROWSER_MISSING} (CI is set: the browser tests never skip there)",
                    pytrace=False)
    pytest.skip(BROWSER_MISSING)


def browser_env(tmp_path: Path) -> dict[str, str]:
    """The environment with a home of the browser's own under ``tmp_path``: Chromium keeps
    dconf and crash data in the user's home and cache whatever its profile directory, and no
    test may write there."""
    home = tmp_path / "browser-home"
    env = dict(os.environ)
    for name, folder in (("HOME", ""), ("XDG_CACHE_HOME", ".cache"),
                         ("XDG_CONFIG_HOME", ".config"), ("XDG_DATA_HOME", ".local/share"),
                         ("XDG_STATE_HOME", ".local/state")):
        (home / folder).mkdir(parents=True, exist_ok=True)
        env[name] = str(home / folder)
    return env
