"""Judged comparisons the viewer runs in the background while it keeps answering pages.

A job judges two stored runs with ``compare_runs`` in a thread of its own (which runs the
engine on a private event loop), stores each pair beside run B as it is judged, and reports
its progress for the page to poll. One job at a time per pair of runs, and a few in all: each
sends its requests through the judge layer, whose per-endpoint limit bounds them together.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from referee.redact import redact

log = logging.getLogger(__name__)

MAX_RUNNING = 2


class JobRefused(Exception):
    """A judging that cannot start now (one for these runs is running, or too many are)."""


@dataclass
class PairwiseJob:
    id: str
    runs: tuple[str, str]  # the URL names of A and B
    state: Literal["running", "done", "failed"] = "running"
    done: int = 0
    total: int = 0
    error: str = ""
    result: str = ""  # the stored comparison's key, once done
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def advance(self, total: int) -> None:
        with self._lock:
            self.done += 1
            self.total = total

    def status(self) -> dict[str, Any]:
        with self._lock:
            return {"job": self.id, "state": self.state, "done": self.done, "total": self.total,
                    "error": self.error, "result": self.result}


class PairwiseJobs:
    """The viewer's judging jobs, by id, and the latest one for each pair of runs."""

    def __init__(self, max_running: int = MAX_RUNNING) -> None:
        self.max_running = max_running
        self._lock = threading.Lock()
        self._jobs: dict[str, PairwiseJob] = {}
        self._latest: dict[tuple[str, str], str] = {}

    def get(self, job_id: str) -> PairwiseJob | None:
        with self._lock:
            return self._jobs.get(job_id)

    def latest(self, runs: tuple[str, str]) -> PairwiseJob | None:
        with self._lock:
            job_id = self._latest.get(runs)
            return self._jobs.get(job_id) if job_id is not None else None

    def start(self, runs: tuple[str, str], work: Callable[[PairwiseJob], str]) -> PairwiseJob:
        """Run ``work(job)`` (which returns the stored comparison's key) in a thread."""
        with self._lock:
            running = [j for j in self._jobs.values() if j.state == "running"]
            if any(j.runs == runs for j in running):
                raise JobRefused("these two runs are being judged already; wait for that to "
                                 "finish")
            if len(running) >= self.max_running:
                raise JobRefused(f"{len(running)} judged comparisons are running already; "
                                 "wait for one to finish")
            job = PairwiseJob(id=secrets.token_urlsafe(12), runs=runs)
            self._jobs[job.id] = job
            self._latest[runs] = job.id

        def run() -> None:
            try:
                key = work(job)
            except Exception as exc:  # the job's end, shown on the page; the viewer goes on
                log.warning("judged comparison of %s and %s failed", *runs, exc_info=True)
                message = " ".join(redact(str(exc) or type(exc).__name__).split())
                with job._lock:
                    job.state, job.error = "failed", message
                return
            with job._lock:
                job.state, job.result = "done", key

        threading.Thread(target=run, name=f"referee-pairwise-{job.id}", daemon=True).start()
        return job
