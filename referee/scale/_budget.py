"""One judge budget per endpoint across a Ray cluster.

A provider limits the whole account, so N workers that each keep their own limit would send N
times what it allows. Here every endpoint (provider, base URL, key fingerprint) has one named,
detached Ray actor, the *keeper*, holding referee's own ``EndpointLimiter``: the concurrency
window (adaptive, or pinned by an explicit ``max_concurrency``), the rpm/tpm pacing and the
endpoint-wide pause after a 429 with Retry-After. Nothing of the limiter is re-implemented.

Each worker process installs ``ClusterBudget`` (the ``EndpointBudget`` seam) for the endpoints
it meets. A ``ClusterBudget`` keeps the keeper off the path of each call:

* it leases permits in small batches: one call asks for as many as requests are waiting (at most
  ``LEASE_BATCH``); requests arriving meanwhile wait for the next batch;
* it sends the outcomes of finished requests together, ``SETTLE_EVERY_S`` after the first;
* every reply of the keeper carries its pause, so a 429 seen by one worker pauses the others at
  their next lease or report; a worker's own 429 pauses it at once. A leased permit that was not
  used yet is not used during a pause: it goes back after ``STOCK_IDLE_S``.

A permit is leased, not given: a worker holding permits reports at least every
``RENEW_EVERY_S``, and the keeper takes back the permits of a worker it has not heard from in
``lease_ttl_s`` (a killed worker or a lost node), so capacity never leaks away.

No call of a ``ClusterBudget`` blocks the event loop: two daemon threads talk to the keeper and
hand permits to each waiting request's own loop, so it works from any loop or thread.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from referee.judge import retry
from referee.judge.limiter import (
    BudgetSettings,
    EndpointIdentity,
    EndpointLimiter,
    Outcome,
    Permit,
    set_budget_factory,
)
from referee.scale._ray import require_ray

logger = logging.getLogger("referee.scale")

KEEPER_NAMESPACE = "referee"
# The most permits one lease call asks for: enough to amortise the call, few enough that a
# worker does not sit on slots others could use.
LEASE_BATCH = 8
SETTLE_EVERY_S = 0.05
RENEW_EVERY_S = 2.0
DEFAULT_LEASE_TTL_S = 20.0
STOCK_IDLE_S = 0.25
# A keeper that no one has called for this long, holding no permits, ends itself.
KEEPER_IDLE_EXIT_S = 900.0
# A keeper that cannot be reached is looked up (or created) again this many times per call.
KEEPER_ATTEMPTS = 3


def keeper_name(endpoint: EndpointIdentity) -> str:
    """The keeper actor's name: a hash of provider, base URL and key fingerprint, no key."""
    return f"referee-judge-budget-{endpoint.digest}"


@dataclass(frozen=True)
class KeeperState:
    """What every keeper reply carries: the window in force and the pause left."""

    limit: int
    paused_for: float


@dataclass(frozen=True)
class Grant:
    lease_ids: list[int]
    state: KeeperState


@dataclass(frozen=True)
class ClusterBudgetOptions:
    """What a run chooses about its cluster budgets (travels with every shard)."""

    lease_ttl_s: float = DEFAULT_LEASE_TTL_S
    namespace: str = KEEPER_NAMESPACE


class BudgetKeeper:
    """The keeper of one endpoint's budget (run as an async Ray actor; plain Python in tests)."""

    def __init__(self, settings: BudgetSettings, lease_ttl_s: float = DEFAULT_LEASE_TTL_S,
                 idle_exit_s: float = KEEPER_IDLE_EXIT_S) -> None:
        self.limiter = EndpointLimiter(settings)
        self.lease_ttl_s = lease_ttl_s
        self.idle_exit_s = idle_exit_s
        # Ids stay unique across keepers of one endpoint (a keeper may be re-created), so a
        # report about a former keeper's permit can never release one of this keeper's.
        self._ids = itertools.count(random.getrandbits(40) << 20)
        self._permits: dict[int, tuple[str, Permit]] = {}
        self._last_heard: dict[str, float] = {}
        self._last_call = time.monotonic()
        self._reaper: asyncio.Task[None] | None = None
        self.reclaimed = 0
        self.lease_calls = 0
        self.granted = 0

    def _heard(self, holder: str) -> None:
        now = time.monotonic()
        self._last_heard[holder] = self._last_call = now
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._reap_forever())

    def state(self) -> KeeperState:
        return KeeperState(limit=self.limiter.limit, paused_for=self.limiter.paused_for())

    async def lease(self, holder: str, tokens: list[int],
                    outcomes: list[tuple[int, Outcome]]) -> Grant:
        """Up to ``len(tokens)`` permits: the first when the budget allows (this waits), the
        others only if they may start at once."""
        self._heard(holder)
        self._settle(outcomes)
        permits = [await self.limiter.lease(tokens[0])]
        for estimate in tokens[1:]:
            permit = self.limiter.try_lease(estimate)
            if permit is None:
                break
            permits.append(permit)
        self.lease_calls += 1
        self.granted += len(permits)
        ids = []
        for permit in permits:
            lease_id = next(self._ids)
            self._permits[lease_id] = (holder, permit)
            ids.append(lease_id)
        return Grant(ids, self.state())

    async def report(self, holder: str, outcomes: list[tuple[int, Outcome]]) -> KeeperState:
        """Outcomes of finished requests (and permits handed back unused); also says "alive"."""
        self._heard(holder)
        self._settle(outcomes)
        return self.state()

    async def configure(self, settings: BudgetSettings) -> KeeperState:
        if settings != self.limiter.settings:
            self.limiter.configure(settings)
        return self.state()

    async def held(self) -> int:
        """Permits out on lease."""
        return len(self._permits)

    async def stats(self) -> dict[str, int]:
        """Counters for tests and benchmarks."""
        return {"held": len(self._permits), "lease_calls": self.lease_calls,
                "granted": self.granted, "reclaimed": self.reclaimed}

    def _settle(self, outcomes: list[tuple[int, Outcome]]) -> None:
        for lease_id, outcome in outcomes:
            entry = self._permits.pop(lease_id, None)
            if entry is not None:  # unknown: already taken back, or a former keeper's
                self.limiter.settle(entry[1], outcome)

    def reclaim_silent_holders(self) -> int:
        """Take back the permits of holders not heard from in ``lease_ttl_s``."""
        cutoff = time.monotonic() - self.lease_ttl_s
        silent = {h for h, heard in self._last_heard.items() if heard < cutoff}
        for holder in silent:
            del self._last_heard[holder]
        # Also permits granted after their holder went silent (a lease that waited at the
        # keeper while its worker died).
        taken = [i for i, (holder, _) in self._permits.items() if holder not in self._last_heard]
        for lease_id in taken:
            self.limiter.settle(self._permits.pop(lease_id)[1], Outcome("cancelled"))
        if taken:
            logger.warning("judge budget: took back %d permit(s) of %d silent worker(s)",
                           len(taken), len(silent))
        self.reclaimed += len(taken)
        return len(taken)

    async def _reap_forever(self) -> None:
        while True:
            await asyncio.sleep(min(1.0, max(self.lease_ttl_s / 4, 0.05)))
            self.reclaim_silent_holders()
            idle = time.monotonic() - self._last_call
            if not self._permits and idle > self.idle_exit_s:
                # Detached actors outlive the run; an idle keeper frees its worker. A worker
                # that calls it after this looks it up again and gets a fresh one.
                ray = require_ray()
                ray.kill(ray.get_runtime_context().current_actor, no_restart=True)
                return


@dataclass
class ClusterPermit(Permit):
    lease_id: int = 0


@dataclass
class _Waiter:
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[ClusterPermit]
    tokens: int


@dataclass
class _Stocked:
    permit: ClusterPermit
    since: float = field(default_factory=time.monotonic)


class KeeperUnavailable(RuntimeError):
    """The cluster's budget for an endpoint could not be reached."""


class ClusterBudget:
    """A worker process's view of an endpoint's cluster-wide budget (an ``EndpointBudget``)."""

    def __init__(self, settings: BudgetSettings, endpoint: EndpointIdentity,
                 options: ClusterBudgetOptions = ClusterBudgetOptions()) -> None:
        self._settings = settings
        self._endpoint = endpoint
        self._options = options
        self._name = keeper_name(endpoint)
        self._holder = uuid.uuid4().hex
        self._lock = threading.Lock()
        self._keeper: Any = None
        self._waiters: deque[_Waiter] = deque()
        self._stock: list[_Stocked] = []
        self._asking = False
        self._outcomes: list[tuple[int, Outcome]] = []
        self._held = 0  # granted and not yet settled or handed back
        self._active = 0
        self._limit = settings.max_concurrency
        self._paused_until = 0.0
        # Two daemon threads: one waits on lease calls (which may wait for the budget), the
        # other reports outcomes meanwhile, so a worker's own settles can free the slots its
        # pending lease waits for.
        self._want = threading.Event()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []

    # the EndpointBudget protocol
    @property
    def settings(self) -> BudgetSettings:
        return self._settings

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def active(self) -> int:
        return self._active

    def configure(self, settings: BudgetSettings) -> None:
        self._settings = settings
        try:
            self._remote("configure", settings)
        except Exception as exc:  # the next lease looks the keeper up again with these settings
            logger.debug("judge budget configure failed: %s", exc)
            self._keeper = None

    def paused_for(self) -> float:
        return max(self._paused_until - time.monotonic(), 0.0)

    async def lease(self, tokens: int) -> Permit:
        loop = asyncio.get_running_loop()
        while True:
            pause = self.paused_for()
            if pause > 0:
                await retry.sleep(pause)
                continue
            with self._lock:
                if self._stock:
                    permit = self._stock.pop().permit
                    self._active += 1
                    return permit
                waiter = _Waiter(loop, loop.create_future(), tokens)
                self._waiters.append(waiter)
            self._start_threads()
            self._want.set()
            try:
                permit = await waiter.future
            except asyncio.CancelledError:
                with self._lock:
                    if waiter in self._waiters:
                        self._waiters.remove(waiter)
                self._restock(waiter.future)
                raise
            if self.paused_for() > 0:  # a pause began after the grant: not now
                with self._lock:
                    self._stock.append(_Stocked(permit))
                continue
            with self._lock:
                self._active += 1
            return permit

    def settle(self, permit: Permit, outcome: Outcome) -> None:
        if permit.settled:
            return
        permit.settled = True
        with self._lock:
            self._active -= 1
            self._held -= 1
            self._outcomes.append((getattr(permit, "lease_id", 0), outcome))
            if outcome.kind in ("rate_limited", "overloaded") and outcome.retry_after:
                # Our own 429: pause here now; the others learn it from the keeper.
                self._paused_until = max(self._paused_until,
                                         time.monotonic() + outcome.retry_after)
        self._wake.set()

    # the threads
    def _start_threads(self) -> None:
        with self._lock:
            if self._threads:
                return
            self._threads = [
                threading.Thread(target=self._lease_batches, name="referee-budget-lease",
                                 daemon=True),
                threading.Thread(target=self._report, name="referee-budget-report", daemon=True)]
        for thread in self._threads:
            thread.start()

    def _lease_batches(self) -> None:
        """Ask the keeper for as many permits as requests wait (at most LEASE_BATCH), hand
        them out, and ask again while requests wait."""
        while True:
            self._want.wait()
            self._want.clear()
            while True:
                with self._lock:
                    tokens = [w.tokens for w in self._waiters if not w.future.done()][:LEASE_BATCH]
                    if not tokens:
                        break
                    self._asking = True
                    outcomes, self._outcomes = self._outcomes, []
                try:
                    grant: Grant = self._call("lease", self._holder, tokens, outcomes)
                except KeeperUnavailable as error:
                    self._fail_waiters(error)
                    continue
                finally:
                    with self._lock:
                        self._asking = False
                self._hand_out(grant, tokens)

    def _hand_out(self, grant: Grant, tokens: list[int]) -> None:
        now = time.monotonic()
        permits = [ClusterPermit(tokens=t, leased_at=now, lease_id=i)
                   for t, i in zip(tokens, grant.lease_ids)]
        with self._lock:
            self._held += len(permits)
            self._apply_locked(grant.state)
            handed = []
            while permits and self._waiters:
                waiter = self._waiters.popleft()
                if not waiter.future.done():
                    handed.append((waiter, permits.pop(0)))
            self._stock.extend(_Stocked(p) for p in permits)
        for waiter, permit in handed:
            try:
                waiter.loop.call_soon_threadsafe(self._hand, waiter.future, permit)
            except RuntimeError:  # its loop closed meanwhile
                with self._lock:
                    self._stock.append(_Stocked(permit))

    def _hand(self, future: asyncio.Future[ClusterPermit], permit: ClusterPermit) -> None:
        if future.done():  # cancelled while the permit was on its way
            with self._lock:
                self._stock.append(_Stocked(permit))
        else:
            future.set_result(permit)

    def _restock(self, future: asyncio.Future[ClusterPermit]) -> None:
        if future.done() and not future.cancelled():
            with self._lock:
                self._stock.append(_Stocked(future.result()))

    def _fail_waiters(self, error: BaseException) -> None:
        with self._lock:
            failed = list(self._waiters)
            self._waiters.clear()
        for waiter in failed:
            try:
                waiter.loop.call_soon_threadsafe(_fail, waiter.future, error)
            except RuntimeError:
                pass

    def _report(self) -> None:
        """Send outcomes and unused permits back, and say "alive" while holding permits."""
        while True:
            self._wake.wait(RENEW_EVERY_S)
            self._wake.clear()
            time.sleep(SETTLE_EVERY_S)  # let the outcomes of this moment travel together
            now = time.monotonic()
            with self._lock:
                stale = [s for s in self._stock if now - s.since > STOCK_IDLE_S]
                for entry in stale:
                    self._stock.remove(entry)
                self._held -= len(stale)
                outcomes = self._outcomes + [(s.permit.lease_id, Outcome("cancelled"))
                                             for s in stale]
                self._outcomes = []
                busy = self._held > 0 or self._asking or bool(self._stock)
            if not outcomes and not busy:
                continue
            try:
                self._apply(self._call("report", self._holder, outcomes))
            except KeeperUnavailable as exc:  # its successor knows none of these permits
                logger.debug("judge budget report failed: %s", exc)
            if self._stock:
                self._wake.set()  # come back for the stock once it is stale

    def _apply(self, state: KeeperState) -> None:
        with self._lock:
            self._apply_locked(state)

    def _apply_locked(self, state: KeeperState) -> None:
        self._limit = state.limit
        if state.paused_for > 0:
            self._paused_until = max(self._paused_until, time.monotonic() + state.paused_for)

    # the keeper
    def _remote(self, method: str, *args: Any) -> Any:
        keeper = self._keeper
        if keeper is None:
            keeper = self._keeper = _keeper_handle(self._name, self._settings, self._options)
        return getattr(keeper, method).remote(*args)

    def _call(self, method: str, *args: Any) -> Any:
        """A keeper call, waited for (no timeout: a lease may rightly wait out a long pause; a
        keeper that dies raises). A lost keeper is looked up, or created, again."""
        ray = require_ray()
        for attempt in range(1, KEEPER_ATTEMPTS + 1):
            try:
                return ray.get(self._remote(method, *args))
            except Exception as exc:
                self._keeper = None
                if attempt == KEEPER_ATTEMPTS:
                    raise KeeperUnavailable(
                        f"the cluster's judge budget for {self._endpoint.provider} at "
                        f"{self._endpoint.base_url} could not be reached: "
                        f"{type(exc).__name__}: {exc}"[:400]) from None
        raise AssertionError("unreachable")


def _fail(future: asyncio.Future[Any], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


_keeper_classes: dict[str, Any] = {}


def _keeper_handle(name: str, settings: BudgetSettings, options: ClusterBudgetOptions) -> Any:
    """The endpoint's keeper, created by whoever asks first (detached: it outlives any one
    worker, so a killed worker takes none of the budget's state with it)."""
    ray = require_ray()
    actor = _keeper_classes.get("keeper")
    if actor is None:
        # No CPU: it only counts; async: many workers' calls interleave while one waits.
        actor = _keeper_classes["keeper"] = ray.remote(num_cpus=0, max_restarts=0)(BudgetKeeper)
    handle = actor.options(name=name, namespace=options.namespace, lifetime="detached",
                           get_if_exists=True, max_concurrency=1000).remote(
        settings, options.lease_ttl_s)
    if settings.explicit:
        # The last explicit setting for an endpoint wins, as in one process.
        handle.configure.remote(settings)
    return handle


def use_cluster_budgets(options: ClusterBudgetOptions | None) -> None:
    """On a worker: endpoints first used from now on get the cluster's budget (None: local)."""
    if options is None:
        set_budget_factory(None)
        return
    set_budget_factory(lambda settings, endpoint: ClusterBudget(settings, endpoint, options))
