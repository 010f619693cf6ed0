"""Run a coroutine to completion from synchronous code, even inside a running event loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from referee.judge.client import close_loop_clients

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` when no loop is running; otherwise a private loop on a worker thread.

    Jupyter and pytest-asyncio already run a loop on this thread, where ``asyncio.run`` refuses
    to start. Blocking that loop while the worker finishes is what a sync call means there.
    """
    outcome: dict[str, Any] = {}

    async def main() -> None:
        # The value travels outside the task: asyncio.run's SIGINT bookkeeping ends up calling
        # repr() on the main task, which would render a whole report (seconds on large runs).
        try:
            outcome["value"] = await coro
        finally:
            await close_loop_clients()  # this loop ends here, and its judge connections with it

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(main())
        return outcome["value"]

    def worker() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:  # re-raised on the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=worker, name="referee-sync-runner", daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
