"""A concurrency limit that holds across event loops and threads.

The engine may run on a private loop in a worker thread while a user's own loop runs
elsewhere; an asyncio.Semaphore binds to one loop, so the shared per-endpoint limit is built
on a thread lock and per-waiter futures woken on their own loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque


class EndpointLimiter:
    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"concurrency limit must be at least 1, got {limit}")
        self._lock = threading.Lock()
        self._limit = limit
        self._active = 0
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def active(self) -> int:
        return self._active

    def set_limit(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"concurrency limit must be at least 1, got {limit}")
        with self._lock:
            self._limit = limit
            grants = self._grant_waiters_locked()
        self._dispatch(grants)

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._active < self._limit and not self._waiters:
                self._active += 1
                return
            future: asyncio.Future[None] = loop.create_future()
            entry = (loop, future)
            self._waiters.append(entry)
        try:
            await future
        except asyncio.CancelledError:
            with self._lock:
                try:
                    self._waiters.remove(entry)
                    queued = True
                except ValueError:
                    queued = False
            if not queued and future.done() and not future.cancelled():
                # The slot was handed over just before the cancellation landed.
                self.release()
            raise

    def release(self) -> None:
        with self._lock:
            self._active -= 1
            grants = self._grant_waiters_locked()
        self._dispatch(grants)

    def _grant_waiters_locked(self) -> list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]:
        grants = []
        while self._waiters and self._active < self._limit:
            loop, future = self._waiters.popleft()
            if loop.is_closed() or future.done():
                continue
            self._active += 1
            grants.append((loop, future))
        return grants

    def _dispatch(self, grants: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]) -> None:
        for loop, future in grants:
            try:
                loop.call_soon_threadsafe(self._wake, future)
            except RuntimeError:  # the loop closed in between; give the slot back
                self.release()

    def _wake(self, future: asyncio.Future[None]) -> None:
        if future.done():  # cancelled while the grant was in flight
            self.release()
        else:
            future.set_result(None)

    async def __aenter__(self) -> "EndpointLimiter":
        await self.acquire()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.release()
