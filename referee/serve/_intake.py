"""One path from a received OTLP export to the spool, shared by every transport.

The HTTP and gRPC receivers differ only in how they read a request and word the answer:
whether there is room, how the body decodes and whether it reached the spool are decided here,
so the two transports accept, refuse and ask for a retry on exactly the same grounds.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum

from referee.errors import InputError
from referee.serve._decode import decode
from referee.serve._scorer import Busy, OnlineScorer
from referee.terminal import terminal_safe

DEFAULT_MAX_REQUEST_BYTES = 32 * 1024 * 1024
SPOOL_RETRY_AFTER_S = 5  # a spool that cannot be written (a full disk): ask again this late


class Outcome(Enum):
    ACCEPTED = "accepted"  # on disk: answer success
    INVALID = "invalid"  # not an OTLP export: answer a permanent error (not retried)
    BUSY = "busy"  # nothing kept: answer "retry after"


@dataclass(frozen=True)
class Intake:
    outcome: Outcome
    detail: str = ""  # why an INVALID request is not an export
    retry_after: int = 0  # seconds, for BUSY


async def take(scorer: OnlineScorer, signal: str, content_type: str,
               read: Callable[[], Awaitable[bytes]]) -> Intake:
    """Decode and spool one export request. ``read`` is called only when there is room, so a
    refused request's body need not be read at all."""
    retry_after = scorer.busy()
    if retry_after is not None:
        scorer.metrics.rejected += 1
        return Intake(Outcome.BUSY, retry_after=retry_after)
    body = await read()
    try:
        document = decode(signal, body, content_type)
    except InputError as exc:
        return Intake(Outcome.INVALID, detail=str(exc))
    try:
        await scorer.accept(signal, document)
    except Busy as busy:
        return Intake(Outcome.BUSY, retry_after=busy.retry_after)
    except OSError as exc:  # the spool cannot be written: not kept, so the exporter must retry
        scorer.metrics.spool_write_failures += 1
        print(terminal_safe(f"referee serve: the spool cannot be written ({exc}); "
                            f"asking the exporter to retry"), file=sys.stderr, flush=True)
        return Intake(Outcome.BUSY, retry_after=SPOOL_RETRY_AFTER_S)
    return Intake(Outcome.ACCEPTED)
