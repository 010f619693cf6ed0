"""Rolling runs: the cases scored online go to one run directory per time window.

Each window (an hour by default) is an ordinary run in the run store: cases.jsonl grows as
cases are scored, and ``referee view`` shows it live (a run whose writer holds its lock is
"running"); when the window ends, report.json is written and the run is finished like any
other. A restart inside the same window reopens its directory. When another live process
writes the window's directory (several ``serve`` processes on one store), this one takes the
next free name (``-2``, ``-3``...), so no run has two writers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from referee.record import CaseResult, EvalReport, RunTally
from referee.serve._alerts import Alert, WindowGates
from referee.store import RunInUse, RunStore, StoredCases, case_fingerprint

MODEL_ID = "recorded"  # as `referee run --traces`: nothing is re-run


def window_start(now: float, window_s: float) -> float:
    return now - (now % window_s)


def window_name(name: str, start: float, suffix: int = 1) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(start))
    return f"{name}-{stamp}" + (f"-{suffix}" if suffix > 1 else "")


class RollingRuns:
    """The window being written, opened lazily and finished when the next one begins."""

    def __init__(self, runs_dir: Path, *, name: str, window_s: float,
                 judge: dict[str, Any], run_meta: dict[str, Any],
                 metadata: dict[str, Any], on_open: Callable[[str], None],
                 resume_window: str | None = None, gates: WindowGates | None = None) -> None:
        self.runs_dir = runs_dir
        self.name = name
        self.window_s = window_s
        self.judge = judge
        self.run_meta = run_meta
        self.metadata = metadata
        self.on_open = on_open  # the spool's ledger learns the directory before any case
        self.resume_window = resume_window
        self.gates = gates or WindowGates([], 1)
        self.store: RunStore | None = None
        self.started = 0.0
        # The window's case keys in the order stored (meta.json's case_ids), as a dict: one
        # structure answers both "used yet?" and the order.
        self.keys: dict[str, None] = {}
        self.count = 0  # cases stored in the window
        self.tally: RunTally | None = None  # kept as cases are stored, for report.json
        self.sampled_out = 0
        self.skipped_for_budget = 0

    def _report(self, run_id: str, started: float) -> EvalReport:
        return EvalReport(run_id=run_id, name=self.name, eval_set_id=self.name,
                          model_id=MODEL_ID, judge=self.judge, started_at=started,
                          metadata={**self.metadata, "window_s": self.window_s})

    def current(self, now: float) -> RunStore:
        start = window_start(now, self.window_s)
        if self.store is not None and start <= self.started:
            return self.store  # a clock stepped back never reopens a finished window
        self.finish()
        self.store = self._open(start)
        self.started = start
        return self.store

    def _open(self, start: float) -> RunStore:
        suffix = 1
        while True:
            run_id = window_name(self.name, start, suffix)
            run_dir = self.runs_dir / run_id
            try:
                if run_dir.is_dir() and (run_dir / "meta.json").is_file():
                    if run_id != self.resume_window and not _ours(run_dir):
                        suffix += 1
                        continue
                    store = RunStore.reopen(run_dir)
                    self.gates.start(run_id)
                    self.keys = {}
                    for case in store.stream_cases():  # one at a time: a window may be large
                        self.keys[case.eval_id] = None
                        self.gates.count(case)
                    self.count = len(self.keys)
                    self.tally = None  # counted from cases.jsonl when the window finishes
                else:
                    store = RunStore.create(self.runs_dir, self._report(run_id, start),
                                            case_ids=[], extra_meta=self.run_meta)
                    self.keys, self.count = {}, 0
                    self.tally = RunTally()
                    self.gates.start(run_id)
            except RunInUse:
                suffix += 1
                continue
            self.on_open(run_id)
            self.sampled_out = self.skipped_for_budget = 0
            return store

    def unique_key(self, key: str, max_seq: int) -> str:
        """A case key not yet used in this window, reserved at once (cases score
        concurrently): a late part of a trace gets a key of its own."""
        chosen, again = key, 1
        while chosen in self.keys:
            chosen = f"{key}~{max_seq}" + (f".{again}" if again > 1 else "")
            again += 1
        self.keys[chosen] = None
        return chosen

    def append(self, result: CaseResult, now: float) -> list[Alert]:
        """Store a scored case (its index is its place in the window: the store keys on it);
        the alerts its verdicts set off."""
        store = self.current(now)
        result.index = self.count
        store.append_case(result)
        self.keys.setdefault(result.eval_id, None)
        if self.tally is not None:
            self.tally.add(result)
        self.count += 1
        return self.gates.observe(result)

    def sync(self) -> None:
        """The window's cases on disk (fsynced): the ledger may then name them."""
        if self.store is not None:
            self.store.close()  # the next case reopens cases.jsonl

    def finish(self) -> None:
        """Write the window's report.json and give its directory up."""
        store, self.store = self.store, None
        if store is None:
            return
        try:
            report = self._report(store.run_dir.name, self.started)
            meta = store.read_meta()
            report.started_at = float(meta.get("started_at") or self.started)
            report.metadata.update({"sampled_out": self.sampled_out,
                                    "skipped_for_budget": self.skipped_for_budget,
                                    "run_dir": str(store.run_dir)})
            store.close()
            ids = list(self.keys)
            store.update_meta(case_ids=ids, case_fingerprint=case_fingerprint(ids))
            report.finished_at = time.time()
            report.cases = StoredCases(  # type: ignore[assignment]
                store.cases_path, tally=self.tally)
            store.write_report(report)
        finally:
            store.release()


def _ours(run_dir: Path) -> bool:
    """Whether a window directory can be written by this process: nobody live holds it and
    it is unfinished (an earlier process of this spool was stopped inside the window)."""
    store = RunStore(run_dir)
    return not store.has_live_writer() and not store.is_finished
