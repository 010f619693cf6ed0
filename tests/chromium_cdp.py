"""Driving headless Chromium over the DevTools protocol: real key presses and page reloads,
for tests that must act on a page rather than only read its DOM."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from chromium_support import browser_env, find_chromium
from websockets.sync.client import connect

KEY_CODES = {"ArrowDown": 40, "ArrowUp": 38, "Escape": 27, "Enter": 13}


class Browser:
    """One headless Chromium with one page; ``with Browser(tmp_path) as page: page.goto(url)``."""

    def __init__(self, tmp_path: Path) -> None:
        profile = tmp_path / "cdp-profile"
        profile.mkdir(exist_ok=True)
        self.proc = subprocess.Popen(
            [find_chromium(), "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--no-first-run", "--disable-extensions", f"--user-data-dir={profile}",
             "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=browser_env(tmp_path))
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not port_file.is_file() or not port_file.read_text().strip():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.1)
        port = int(port_file.read_text().splitlines()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as resp:
            targets = json.load(resp)
        page = next(t for t in targets if t.get("type") == "page")
        self.ws = connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=30)
        self.next_id = 0
        self.call("Page.enable")
        self.call("Runtime.enable")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=60))
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, awaitPromise=True,
                           returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 20.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {expression}")
            time.sleep(0.05)

    def goto(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete' && document.body "
                      "&& document.body.getAttribute('data-js') === 'on'")

    def reload(self) -> None:
        self.evaluate("document.body.setAttribute('data-js', 'stale')")
        self.call("Page.reload", ignoreCache=True)
        self.wait_for("document.readyState === 'complete' && document.body "
                      "&& document.body.getAttribute('data-js') === 'on'")

    def press(self, key: str, *, ctrl: bool = False) -> None:
        """A trusted key press, as the keyboard makes it."""
        code = KEY_CODES.get(key, ord(key.upper()) if len(key) == 1 else 0)
        base: dict[str, Any] = {"key": key, "windowsVirtualKeyCode": code,
                                "modifiers": 2 if ctrl else 0}
        text = {"text": key} if len(key) == 1 and not ctrl else {}
        self.call("Input.dispatchKeyEvent", type="keyDown", **base, **text)
        self.call("Input.dispatchKeyEvent", type="keyUp", **base)

    def type_text(self, text: str) -> None:
        self.call("Input.insertText", text=text)

    def close(self) -> None:
        ws = getattr(self, "ws", None)
        if ws is not None:
            ws.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=15)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
