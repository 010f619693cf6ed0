"""Online scoring (``referee serve``): production traces scored as they arrive.

An OTLP/HTTP receiver spools each accepted request to disk before answering, assembles traces
into cases with the trace import (``referee.adapters``), samples them, scores them with a
suite's criteria through the run engine under a judge spend cap, and writes one rolling run per
window to the run store. ``aiohttp`` serves it; protobuf bodies need the ``serve`` extra.
Imports adapters/, run/, record/ and store/; nothing imports it back except cli.py's wiring.
"""

from __future__ import annotations

from referee._lazy import lazy_getattr

_EXPORTS = {
    "OnlineScorer": "referee.serve._scorer",
    "ServeSettings": "referee.serve._scorer",
    "Sampler": "referee.serve._sampling",
    "SamplingRule": "referee.serve._sampling",
    "build_app": "referee.serve._http",
    "serve": "referee.serve._http",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_getattr(__name__, globals(), _EXPORTS)
