"""``referee run --detach``: the run goes on until its judge requests are all in batches the
provider has accepted, then stops, leaving them running (a resume collects them)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from referee.judge.batch._transport import loop_dispatchers

T = TypeVar("T")

CHECK_EVERY_S = 0.05


class Detached(Exception):
    """The run stopped with its judge batches submitted; ``batches`` of them."""

    def __init__(self, batches: int) -> None:
        super().__init__(f"{batches} judge batch(es) submitted")
        self.batches = batches


async def run_until_submitted(work: Coroutine[Any, Any, T], settle_s: float) -> T:
    """``work``'s result when it ends first; Detached once every judge request of the run is
    in an accepted batch and no new one has come for ``settle_s`` (the requests the first
    answers make possible go out when the run resumes). Nothing submitted is cancelled."""
    task = asyncio.ensure_future(work)
    settled_since: float | None = None
    while not task.done():
        await asyncio.wait({task}, timeout=CHECK_EVERY_S)
        if task.done():
            break
        dispatchers = loop_dispatchers()
        if dispatchers and all(d.settled_at_provider for d in dispatchers):
            settled_since = settled_since or time.monotonic()
            if time.monotonic() - settled_since >= settle_s:
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
                else:  # it ended on its own while being stopped
                    return task.result()
                raise Detached(sum(d.batches_submitted + d.batches_followed
                                   for d in dispatchers))
        else:
            settled_since = None
    return task.result()
