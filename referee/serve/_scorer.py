"""The online scorer: durable intake, assembly, sampling, the spend cap, scoring, the store.

Nothing here speaks HTTP (``_http.py`` does), so the whole path from an accepted request to a
stored verdict is one object that a test, or another transport, can drive.
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from referee.adapters._base import RecordedRun
from referee.adapters._otel import read_otlp
from referee.adapters._traces import pair_runs
from referee.case import EvalCase
from referee.errors import InputError, describe_exception
from referee.execution import ExecutionResult
from referee.record import CaseResult
from referee.redact import redact
from referee.run.describe import describe_run
from referee.run.engine import Engine, ModelCaller
from referee.serve._alerts import Alert, AlertRule, WindowGates
from referee.serve._assembly import Assembler, ReadyCase
from referee.serve._budget import SpendCap, capped_criteria
from referee.serve._metrics import ServeMetrics
from referee.serve._sampling import Sampler
from referee.serve._spool import LedgerState, Spool, SpoolRecord
from referee.serve._windows import RollingRuns
from referee.store import RunStore
from referee.terminal import terminal_safe

SERVE_KEY = "serve"
# How often the run store is synced and the ledger then written: the ledger lags the store by
# this much, and a restart finds the cases in between in the store.
LEDGER_SYNC_S = 0.5  # a case's metadata: the trace items it covers, how it was sampled


@dataclass(frozen=True)
class ServeSettings:
    spool: Path
    runs_dir: Path
    name: str = "online"
    window_s: float = 3_600.0
    quiet_period: float = 5.0
    conversation_quiet: float = 30.0
    trace_timeout: float = 300.0
    concurrency: int = 8
    max_pending_spans: int = 100_000
    max_queue: int = 1_000
    sampler: Sampler = field(default_factory=Sampler)
    spend_per_hour: float | None = None
    spend_per_day: float | None = None
    alerts: tuple[AlertRule, ...] = ()
    alert_min_cases: int = 20
    webhook: str | None = None
    tick_s: float = 0.1


class Busy(Exception):
    """The queue is full: answer 429/503 with this Retry-After, and keep nothing."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"busy; retry after {retry_after}s")
        self.retry_after = retry_after


def _count(document: dict[str, Any], outer: str, middle: str, inner: str) -> int:
    return sum(len((scope or {}).get(inner) or [])
               for resource in document.get(outer) or []
               for scope in (resource or {}).get(middle) or [])


class OnlineScorer:
    def __init__(self, criteria: Sequence[Any], settings: ServeSettings, *,
                 cases: Sequence[EvalCase] | None = None) -> None:
        self.settings = settings
        self.criteria = list(criteria)
        self.cases = {case.eval_id: case for case in cases or ()}
        description = describe_run(self.criteria)
        self.engine = Engine(self.criteria, concurrency=settings.concurrency)
        self._capped = capped_criteria(self.criteria, "")
        self._capped_engine = Engine(self._capped, concurrency=settings.concurrency,
                                     settings_checked=True)
        self.assembler = Assembler(quiet_period=settings.quiet_period,
                                   trace_timeout=settings.trace_timeout,
                                   conversation_quiet=settings.conversation_quiet)
        self.spool = Spool(settings.spool)
        self.spool.on_durable = self._durable
        self.metrics = ServeMetrics()
        self.budget = SpendCap(per_hour=settings.spend_per_hour, per_day=settings.spend_per_day)
        self.queue: asyncio.Queue[ReadyCase] = asyncio.Queue()
        self.in_flight = 0
        self._case_seconds = 0.0  # a running mean, for Retry-After
        self._tasks: list[asyncio.Task[None]] = []
        self._caller: Any = None
        self._judge = description.judge
        self._run_meta = {"criteria": description.criteria}
        self.windows: RollingRuns | None = None
        # Called with each alert after it is reported (the CLI's --exit-on-alert stops here).
        self.on_alert: Callable[[Alert], None] = lambda alert: None
        self._webhooks: set[asyncio.Task[None]] = set()

    # Lifecycle ----------------------------------------------------------------------------
    async def start(self) -> None:
        state, records = self.spool.open()
        self._reconcile(state)
        for record in records:
            self.assembler.add(record, scored=state.scored)
        self.budget = SpendCap(per_hour=self.settings.spend_per_hour,
                               per_day=self.settings.spend_per_day, history=state.spend)
        self.windows = RollingRuns(
            self.settings.runs_dir, name=self.settings.name, window_s=self.settings.window_s,
            judge=self._judge, run_meta=self._run_meta,
            metadata={"online": True, "spool": str(self.settings.spool)},
            on_open=self.spool.record_window, resume_window=state.window,
            gates=WindowGates(self.settings.alerts, self.settings.alert_min_cases))
        await self.engine.prepare()
        await self._capped_engine.prepare()
        self._caller = ModelCaller()
        self._tasks = [asyncio.create_task(self._tick())] + [
            asyncio.create_task(self._work()) for _ in range(self.settings.concurrency)]

    def _reconcile(self, state: LedgerState) -> None:
        """Cases the run store has and the ledger lacks (killed between the two writes)."""
        if state.window is None:
            return
        store = RunStore(self.settings.runs_dir / state.window)
        for case in store.stream_cases():
            covered = (case.metadata.get(SERVE_KEY) or {}).get("scored") or {}
            missing = {tid: int(seq) for tid, seq in covered.items()
                       if state.scored.get(tid, -1) < int(seq)}
            if missing:
                state.scored.update(missing)
                self.spool.record_scored(missing, case=case.eval_id, outcome="scored")

    async def stop(self) -> None:
        """Stop scoring; a case cut off mid-way is not recorded and is scored after a restart."""
        if self._webhooks:  # alerts already fired still reach their webhook
            await asyncio.wait(list(self._webhooks), timeout=15)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self.windows is not None:
            self.windows.finish()  # synced: the ledger may name every case now
        self.spool.flush_ledger()
        self.spool.close()
        if self._caller is not None:
            self._caller.close()

    async def drain(self, timeout: float = 30.0) -> None:
        """Wait until everything received is scored and in the ledger (tests, benchmarks)."""
        deadline = time.monotonic() + timeout
        while (self.assembler.pending_items or self.spool.ledger_pending) \
                and time.monotonic() < deadline:
            await asyncio.sleep(self.settings.tick_s)

    # Intake -------------------------------------------------------------------------------
    def busy(self) -> int | None:
        """Retry-After seconds when no more may be taken now, else None."""
        if self.assembler.pending_items < self.settings.max_pending_spans \
                and self.queue.qsize() < self.settings.max_queue:
            return None
        waiting = self.queue.qsize() + self.in_flight
        seconds = waiting * (self._case_seconds or 0.1) / self.settings.concurrency
        return max(1, min(30, math.ceil(seconds)))

    async def accept(self, signal: str, document: dict[str, Any]) -> None:
        """Spool a decoded request; returns once it is on disk. Raises Busy when full."""
        retry_after = self.busy()
        if retry_after is not None:
            self.metrics.rejected += 1
            raise Busy(retry_after)
        await self.spool.append(signal, document)

    def _durable(self, record: SpoolRecord) -> None:
        self.metrics.spans_received += _count(record.document, "resourceSpans", "scopeSpans",
                                              "spans")
        self.metrics.log_records_received += _count(record.document, "resourceLogs",
                                                    "scopeLogs", "logRecords")
        self.assembler.add(record, now=time.time())

    # Scoring ------------------------------------------------------------------------------
    async def _tick(self) -> None:
        synced = scanned = time.monotonic()
        # A scan visits every open trace: a fifth of the quiet period is soon enough.
        scan_every = min(self.settings.quiet_period / 5, 1.0)
        while True:
            room = self.settings.max_queue - self.queue.qsize()
            if room > 0 and time.monotonic() - scanned >= scan_every:
                scanned = time.monotonic()
                for ready in self.assembler.take_ready(time.time(), room):
                    self.queue.put_nowait(ready)
            if self.spool.ledger_pending and time.monotonic() - synced >= LEDGER_SYNC_S:
                self._sync_ledger()
                synced = time.monotonic()
            await asyncio.sleep(self.settings.tick_s)

    def _sync_ledger(self) -> None:
        """The run store first, then the ledger lines that name its cases."""
        if self.windows is not None:
            self.windows.sync()
        self.spool.flush_ledger()

    async def _work(self) -> None:
        while True:
            ready = await self.queue.get()
            self.in_flight += 1
            try:
                started = time.perf_counter()
                await self._score(ready)
                took = time.perf_counter() - started
                self._case_seconds = took if not self._case_seconds else (
                    0.9 * self._case_seconds + 0.1 * took)
            except Exception as exc:
                # Not in the ledger, so still in the spool: a restart scores it.
                self.metrics.scoring_failures += 1
                print(terminal_safe(redact(
                    f"referee serve: case {ready.key} not scored ({describe_exception(exc)}); "
                    f"it stays in the spool and is scored after a restart")),
                    file=sys.stderr, flush=True)
            finally:
                self.in_flight -= 1
            self.assembler.release([ready])

    def _runs(self, ready: ReadyCase) -> list[RecordedRun]:
        source = f"received trace {ready.trace_ids[0]}"
        try:
            return read_otlp(ready.documents(), source)
        except InputError as exc:  # one bad request never stops the others being scored
            return [RecordedRun(ready.key, ExecutionResult(error=str(exc)), source)]

    def _case_of(self, run: RecordedRun) -> EvalCase:
        paired = self.cases.get(run.run_id or "")
        if paired is not None:
            return paired
        return pair_runs([run])[0][0][0]

    async def _score(self, ready: ReadyCase) -> None:
        assert self.windows is not None
        decision = self.settings.sampler.decide(ready.key, ready.facts)
        if not decision.sampled:
            self.metrics.sampled_out[decision.reason] += 1
            self.windows.current(time.time())
            self.windows.sampled_out += 1
            self.spool.record_scored(ready.scored_seqs, case=ready.key, outcome="sampled_out")
            return
        runs = self._runs(ready)
        if not runs:  # log records whose spans were scored before they came: nothing to score
            self.metrics.without_spans += 1
            self.spool.record_scored(ready.scored_seqs, case=ready.key, outcome="no_spans")
        for run in runs:
            case = self._case_of(run)
            execution = run.execution

            async def execute(case: EvalCase, caller: Any,
                              execution: ExecutionResult = execution) -> ExecutionResult:
                return execution

            reason = self.budget.exhausted()
            engine = self.engine
            if reason is not None:
                for stand_in in self._capped:
                    if hasattr(stand_in, "reason"):
                        stand_in.reason = reason
                engine = self._capped_engine
            now = time.time()
            self.windows.current(now)  # open (or reopen) the window: its keys are known then
            store_key = self.windows.unique_key(run.run_id or ready.key,
                                                max(ready.scored_seqs.values()))
            result: CaseResult = await engine.run_case(
                case, execute, self._caller, key=store_key)
            result.metadata = {**result.metadata, SERVE_KEY: {
                "scored": ready.scored_seqs, "sampling": decision.reason,
                "received_at": min(t.first_seen for t in ready.traces)}}
            alerts = self.windows.append(result, time.time())  # the window it ends in
            if reason is not None:
                self.windows.skipped_for_budget += 1
            spend = self.budget.add(result)
            self.metrics.observe(result)
            self.spool.record_scored(ready.scored_seqs, case=store_key, outcome="scored",
                                     spend=spend)
            for alert in alerts:
                self._fire(alert)

    def _fire(self, alert: Alert) -> None:
        self.metrics.alerts[alert.criterion] += 1
        print(terminal_safe(redact(f"referee serve: alert: {alert.describe()}")),
              file=sys.stderr, flush=True)
        if self.settings.webhook:
            task = asyncio.create_task(self._post(self.settings.webhook, alert.payload()))
            self._webhooks.add(task)
            task.add_done_callback(self._webhooks.discard)
        self.on_alert(alert)

    async def _post(self, url: str, payload: dict[str, Any]) -> None:
        import aiohttp

        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
                async with session.post(url, json=payload) as reply:
                    if reply.status >= 300:
                        raise RuntimeError(f"HTTP {reply.status}")
        except Exception as exc:
            self.metrics.webhook_failures += 1
            print(terminal_safe(redact(f"referee serve: the alert webhook failed "
                                       f"({describe_exception(exc)})")),
                  file=sys.stderr, flush=True)

    # Reading ------------------------------------------------------------------------------
    def metrics_text(self) -> str:
        return self.metrics.render(
            {"queue_depth": self.queue.qsize(), "cases_in_flight": self.in_flight,
             "pending_spans": self.assembler.pending_items,
             "pending_spans_peak": self.assembler.peak_pending_items,
             "max_pending_spans": self.settings.max_pending_spans,
             "open_traces": len(self.assembler.traces),
             "spool_segments": self.spool.segment_count(),
             "judge_spend_last_hour_usd": self.budget.spent()[0],
             "judge_spend_last_day_usd": self.budget.spent()[1],
             "judge_spend_cap_hour_usd": self.settings.spend_per_hour or 0,
             "judge_spend_cap_day_usd": self.settings.spend_per_day or 0},
            self.budget.total_usd, self.budget.unpriced_requests)
