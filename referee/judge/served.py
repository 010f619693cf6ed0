"""Which model version the provider says served each judge reply.

A judge is named by an alias (``gpt-4o-mini``, ``claude-haiku-4-5``) that the provider may point
at a new snapshot any day; its replies name the snapshot that answered (OpenAI's ``model`` and
``system_fingerprint``, Anthropic's ``model``, Gemini's ``modelVersion``). The judge layer notes
every fresh reply's served model in the log of the scope it is made in; the engine opens one
scope per criterion evaluation and keeps what it saw in the result's details, from where a run
and a calibration collect it. A reply replayed from the reply cache names no version.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

# The criterion result's details key: {"provider/model": {"models": {served: replies},
# "fingerprints": {fingerprint: replies}}}.
SERVED_KEY = "judge_served"


class ServedLog:
    """Served models and fingerprints counted by the judge (``provider/model``) that was asked.

    Safe to share between threads: a sync evaluator's judge calls may run on a worker thread
    with a copy of the scope's context, which holds this same log.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._models: dict[str, Counter[str]] = {}
        self._fingerprints: dict[str, Counter[str]] = {}

    def note(self, judge: str, model: str | None, fingerprint: str | None = None,
             replies: int = 1) -> None:
        with self._lock:
            if model:
                self._models.setdefault(judge, Counter())[model] += replies
            if fingerprint:
                self._fingerprints.setdefault(judge, Counter())[fingerprint] += replies

    def merge(self, details: Any) -> None:
        """Add a ``details[SERVED_KEY]`` record (as ``as_details`` writes it)."""
        if not isinstance(details, Mapping):
            return
        for judge, seen in details.items():
            if not isinstance(seen, Mapping):
                continue
            with self._lock:
                for key, table in (("models", self._models),
                                   ("fingerprints", self._fingerprints)):
                    counts = seen.get(key)
                    if not isinstance(counts, Mapping):
                        continue
                    for name, replies in counts.items():
                        if isinstance(replies, int) and replies > 0:
                            table.setdefault(str(judge), Counter())[str(name)] += replies

    def __bool__(self) -> bool:
        with self._lock:
            return bool(self._models or self._fingerprints)

    def models(self, judge: str) -> list[str]:
        """The served models of ``judge``'s replies, the most frequent first."""
        with self._lock:
            return [name for name, _ in _ranked(self._models.get(judge, Counter()))]

    def fingerprints(self, judge: str) -> list[str]:
        with self._lock:
            return [name for name, _ in _ranked(self._fingerprints.get(judge, Counter()))]

    def as_details(self) -> dict[str, dict[str, dict[str, int]]]:
        with self._lock:
            judges = sorted(set(self._models) | set(self._fingerprints))
            out: dict[str, dict[str, dict[str, int]]] = {}
            for judge in judges:
                record = {"models": dict(_ranked(self._models.get(judge, Counter())))}
                if self._fingerprints.get(judge):
                    record["fingerprints"] = dict(_ranked(self._fingerprints[judge]))
                out[judge] = record
            return out


def _ranked(counts: Counter[str]) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


_CURRENT: ContextVar[ServedLog | None] = ContextVar("referee_judge_served", default=None)


@contextlib.contextmanager
def recording_served() -> Iterator[ServedLog]:
    """Judge replies received inside (and in tasks started inside) are noted in the log."""
    log = ServedLog()
    token = _CURRENT.set(log)
    try:
        yield log
    finally:
        _CURRENT.reset(token)


def note_served(judge: str, model: str | None, fingerprint: str | None) -> None:
    """Called by the judge layer for each reply the provider sent (not for cached ones)."""
    log = _CURRENT.get()
    if log is not None:
        log.note(judge, model, fingerprint)


def collect_served(results: Iterable[Any], into: ServedLog | None = None) -> ServedLog:
    """What criterion results (and the runs of a case run several times) recorded."""
    log = into if into is not None else ServedLog()
    for result in results:
        log.merge(getattr(result, "details", {}).get(SERVED_KEY))
    return log
