"""Persistent SQLite cache of judge replies.

One file, shared by every process and thread. The key covers everything that shapes a reply,
including the sample index, so repeated samples of the same prompt stay distinct. Failures are
never stored. A cache that cannot be used (corrupt, locked, unwritable) degrades to live calls
with a single warning.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import platformdirs

from referee.judge.environment import env_switch

logger = logging.getLogger("referee.judge")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS judge_replies (
    key TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    text TEXT NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    created_at REAL NOT NULL
)
"""
# Where each reply came from (endpoint_label), in a table of its own: judge_replies keeps the
# shape every earlier release writes, so processes of mixed versions still share one file.
# A reply without a row here was stored before endpoints were recorded.
_ENDPOINT_SCHEMA = """
CREATE TABLE IF NOT EXISTS judge_reply_endpoints (
    key TEXT PRIMARY KEY,
    endpoint TEXT NOT NULL
)
"""


def _ensure_schema(conn: sqlite3.Connection) -> None:
    conn.execute(_SCHEMA)
    conn.execute(_ENDPOINT_SCHEMA)


def endpoint_label(base_url: str) -> str:
    """How a judge endpoint is recorded beside its replies: the base URL without a password,
    query or trailing slash ("" for the provider's own API). The key itself is never stored."""
    from urllib.parse import urlsplit, urlunsplit

    from referee.redact import mask_url

    url = mask_url(base_url.strip())
    if not url:
        return ""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(query="", fragment="")).rstrip("/")


def default_cache_path() -> Path:
    directory = os.environ.get("REFEREE_CACHE_DIR", "").strip()
    base = Path(directory).expanduser() if directory else Path(
        platformdirs.user_cache_dir("referee", appauthor=False))
    return base / "judge_cache.sqlite3"


def cache_enabled_by_env() -> bool | None:
    return env_switch("REFEREE_CACHE")


# The key's JSON is the stdlib's with these options: caches written by earlier releases are
# keyed by exactly these bytes. Built once: json.dumps with options builds an encoder per call.
_KEY_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                                default=str)


def cache_key(**request: Any) -> str:
    """A stable hash of the request; credentials are never part of it."""
    return hashlib.sha256(_key_json(request)).hexdigest()


def _key_json(request: dict[str, Any]) -> bytes:
    """``_KEY_ENCODER``'s bytes for ``request``, by orjson where the two write the same bytes.

    orjson writes a judge request's key in a fifth of the stdlib's time (1.3-1.9 us against
    6.8-7.1 us, ``python -m benchmarks.micro_costs``), once per judge request. The two agree
    on strings, integers, booleans, None and on floats written without an exponent; a float the stdlib writes with one
    (1e-05), anything orjson refuses (a lone surrogate, an integer past 64 bits, a value only
    ``default=str`` can write) and any nested value go to the stdlib, which set the format.
    A lone surrogate (a model's output may hold one) is kept as is (surrogatepass): it must
    key the request, not fail it.
    """
    for value in request.values():
        kind = type(value)
        if kind is float:
            if value and not _PLAIN_FLOAT_MIN <= abs(value) < _PLAIN_FLOAT_MAX:
                return _stdlib_key_json(request)
        elif kind not in _FLAT_TYPES:
            return _stdlib_key_json(request)
    try:
        return orjson.dumps(request, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # orjson.JSONEncodeError
        return _stdlib_key_json(request)


def _stdlib_key_json(request: dict[str, Any]) -> bytes:
    return _KEY_ENCODER.encode(request).encode("utf-8", "surrogatepass")


_FLAT_TYPES = frozenset({str, int, bool, type(None)})
# repr() writes a float in plain digits from 1e-4 up to 1e16; outside, with an exponent that
# orjson spells differently (1e-05 against 1e-5).
_PLAIN_FLOAT_MIN, _PLAIN_FLOAT_MAX = 1e-4, 1e16


def _is_lock_error(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and (
        "locked" in str(exc).lower() or "busy" in str(exc).lower())


@dataclass(frozen=True)
class CachedReply:
    text: str
    input_tokens: int
    output_tokens: int


class JudgeCache:
    """Thread-safe access to one cache file; the file itself is safe across processes (WAL)."""

    # Lookups run on the event loop, so a lock held elsewhere may stall it only briefly, and
    # after one such stall the cache is skipped for a while instead of stalling every call.
    BUSY_TIMEOUT_S = 0.25
    LOCK_COOLDOWN_S = 30.0

    # Replies are written in batches, at most this long after the first of them: a transaction
    # per reply cost the event loop more CPU than anything else the judge layer does per call.
    WRITE_DELAY_S = 0.1

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._broken = False
        self._warned = False
        self._skip_until = 0.0
        # Rows put but not yet written, by key; get() reads them, flush() writes them (the
        # writer thread once _due, a monotonic time, has passed).
        self._pending: dict[str, tuple[Any, ...]] = {}
        self._due = 0.0

    def _warn(self, what: str, exc: BaseException) -> None:
        if not self._warned:
            self._warned = True
            logger.warning("judge cache %s %s (%s: %s); continuing with live calls",
                           self.path, what, type(exc).__name__, exc)

    def _connect(self) -> sqlite3.Connection | None:
        if self._broken or time.monotonic() < self._skip_until:
            return None
        if self._conn is not None:
            return self._conn
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(self.path), timeout=self.BUSY_TIMEOUT_S,
                                   check_same_thread=False,
                                   isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            # A lost cache entry costs one judge call; an fsync per reply blocks the event loop
            # on every judge call. In WAL mode NORMAL keeps the file consistent without it.
            conn.execute("PRAGMA synchronous=NORMAL")
            _ensure_schema(conn)
        except (sqlite3.Error, OSError) as exc:
            if _is_lock_error(exc):
                self._locked(exc)
                return None
            self._broken = True
            self._warn("is unusable", exc)
            return None
        self._conn = conn
        return conn

    def get(self, key: str) -> CachedReply | None:
        with self._lock:
            waiting = self._pending.get(key)
            if waiting is not None:
                return CachedReply(text=waiting[3], input_tokens=waiting[4],
                                   output_tokens=waiting[5])
            conn = self._connect()
            if conn is None:
                return None
            try:
                row = conn.execute(
                    "SELECT text, input_tokens, output_tokens FROM judge_replies WHERE key = ?",
                    (key,)).fetchone()
            except sqlite3.Error as exc:
                self._failed(exc)
                return None
        if row is None:
            return None
        return CachedReply(text=row[0], input_tokens=int(row[1]), output_tokens=int(row[2]))

    def put(self, key: str, *, provider: str, model: str, text: str, input_tokens: int,
            output_tokens: int, endpoint: str | None = None) -> None:
        """Store a reply: readable here at once, written to the file within WRITE_DELAY_S (by
        :meth:`flush`, which the end of a referee run, :meth:`close` and exit also call).
        ``endpoint`` (a base URL, "" for the provider's own API) is recorded as
        :func:`endpoint_label` writes it, for ``referee cache stats``/``clear``."""
        with self._lock:
            if self._broken or time.monotonic() < self._skip_until:
                return
            self._pending[key] = (key, provider, model, text, int(input_tokens),
                                  int(output_tokens), time.time(),
                                  None if endpoint is None else endpoint_label(endpoint))
            if len(self._pending) == 1:  # the first of a batch: the writer thread takes it
                self._due = time.monotonic() + self.WRITE_DELAY_S
                _schedule(self)

    def flush(self) -> None:
        """Write the replies put since the last flush, in one transaction."""
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        rows, self._pending = list(self._pending.values()), {}
        with _writer_wakeup:
            _unflushed.discard(self)
        if not rows:
            return
        conn = self._connect()
        if conn is None:
            return
        try:
            with conn:  # one transaction: rolled back whole on an error
                conn.execute("BEGIN")
                conn.executemany(
                    "INSERT OR REPLACE INTO judge_replies VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [row[:7] for row in rows])
                conn.executemany(
                    "INSERT OR REPLACE INTO judge_reply_endpoints VALUES (?, ?)",
                    [(row[0], row[7]) for row in rows if row[7] is not None])
        except sqlite3.Error as exc:
            self._failed(exc)

    def _locked(self, exc: BaseException) -> None:
        self._skip_until = time.monotonic() + self.LOCK_COOLDOWN_S
        self._warn("is locked", exc)

    def _failed(self, exc: sqlite3.Error) -> None:
        if _is_lock_error(exc):
            self._locked(exc)
            return
        self._broken = True
        self._warn("is unusable", exc)
        self.close_unlocked()

    def close_unlocked(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
            self._conn = None

    def close(self) -> None:
        with self._lock:
            self._flush_locked()
            self.close_unlocked()


# Caches holding replies not yet written, and the one thread that writes them when due (at the
# end of a run and at exit flush_caches() writes them at once, so that the file is complete
# whenever referee is done with it). Lock order: a cache's own lock, then _writer_wakeup.
_unflushed: set[JudgeCache] = set()
_writer_wakeup = threading.Condition()
_writer: threading.Thread | None = None


def _schedule(cache: JudgeCache) -> None:
    global _writer
    with _writer_wakeup:
        _unflushed.add(cache)
        if _writer is None or not _writer.is_alive():  # first use, or a forked child
            _writer = threading.Thread(target=_write_when_due, name="referee-judge-cache",
                                       daemon=True)
            _writer.start()
        _writer_wakeup.notify()


def _write_when_due() -> None:
    while True:
        with _writer_wakeup:
            while True:
                now = time.monotonic()
                due = [c for c in _unflushed if c._due <= now]
                if due:
                    break
                soonest = min((c._due for c in _unflushed), default=None)
                _writer_wakeup.wait(None if soonest is None else soonest - now)
        for cache in due:
            cache.flush()


def flush_caches() -> None:
    """Write every cache's pending replies to its file now."""
    with _writer_wakeup:
        caches = list(_unflushed)
    for cache in caches:
        cache.flush()


atexit.register(flush_caches)


_caches: dict[Path, JudgeCache] = {}
_caches_lock = threading.Lock()


# Where each (path argument, setting) pair led: every judge call asks, and building the path
# each time cost more than the cache lookup itself. The key holds all the path depends on.
_resolved: dict[tuple[str, ...], JudgeCache] = {}


def _cache_file(path: str | Path | None) -> Path:
    """The absolute file a cache path names (None or "": the default cache file)."""
    return (Path(path).expanduser() if path else default_cache_path()).absolute()


def get_cache(path: str | Path | None = None) -> JudgeCache:
    """The shared cache object for a file (default: the user cache dir or REFEREE_CACHE_DIR)."""
    env = os.environ
    key = (str(path or ""), env.get("REFEREE_CACHE_DIR", ""), env.get("XDG_CACHE_HOME", ""),
           env.get("HOME", ""), os.getcwd())
    cache = _resolved.get(key)
    if cache is not None:
        return cache
    resolved = _cache_file(path)
    with _caches_lock:
        cache = _caches.get(resolved)
        if cache is None:
            cache = _caches[resolved] = JudgeCache(resolved)
        _resolved[key] = cache
        return cache


@dataclass(frozen=True)
class CacheMerge:
    """What ``merge_caches`` did: replies copied, and replies the destination already had."""

    added: int
    already_present: int
    total: int  # replies in the destination afterwards


def merge_caches(sources: list[str | Path], into: str | Path) -> CacheMerge:
    """Copy into ``into`` every reply of ``sources`` it lacks (created if missing).

    Each node of a cluster keeps its own cache file (SQLite's WAL is not safe on a network
    filesystem); this joins them afterwards. It is safe because a key is the hash of the whole
    request: one key means one request, so rows are copied by key and, where both files hold a
    key, the destination keeps its own reply. Run it while no process writes the files.
    """
    flush_caches()  # replies this process stored are part of its file
    destination = Path(into).expanduser().absolute()
    paths = [Path(source).expanduser().absolute() for source in sources]
    for path in paths:
        if path == destination:
            raise ValueError(f"{path}: a cache cannot be merged into itself")
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such judge cache file")
    destination.parent.mkdir(parents=True, exist_ok=True)
    try:
        conn = sqlite3.connect(str(destination), isolation_level=None)
    except sqlite3.Error as exc:  # a directory in its place, no permission
        raise ValueError(f"{destination}: cannot open as a judge cache ({exc})") from None
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        _ensure_schema(conn)
        before = conn.execute("SELECT count(*) FROM judge_replies").fetchone()[0]
        offered = 0
        for path in paths:
            try:
                conn.execute("ATTACH DATABASE ? AS source", (str(path),))
            except sqlite3.DatabaseError as exc:
                raise ValueError(f"{path}: not a referee judge cache ({exc})") from None
            try:
                offered += conn.execute("SELECT count(*) FROM source.judge_replies").fetchone()[0]
                conn.execute(
                    "INSERT OR IGNORE INTO main.judge_replies (key, provider, model, text, "
                    "input_tokens, output_tokens, created_at) SELECT key, provider, model, text, "
                    "input_tokens, output_tokens, created_at FROM source.judge_replies")
                if conn.execute("SELECT 1 FROM source.sqlite_master WHERE type = 'table' AND "
                                "name = 'judge_reply_endpoints'").fetchone():
                    # Endpoints travel with their replies (a file written before endpoints
                    # were recorded has none to copy).
                    conn.execute("INSERT OR IGNORE INTO main.judge_reply_endpoints "
                                 "SELECT key, endpoint FROM source.judge_reply_endpoints")
            except sqlite3.DatabaseError as exc:
                raise ValueError(f"{path}: not a referee judge cache ({exc})") from None
            finally:
                conn.execute("DETACH DATABASE source")
        after = conn.execute("SELECT count(*) FROM judge_replies").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        raise ValueError(f"{destination}: not a usable judge cache ({exc})") from None
    finally:
        conn.close()
    return CacheMerge(added=after - before, already_present=offered - (after - before),
                      total=after)


@dataclass(frozen=True)
class CacheFilter:
    """Which replies ``cache_stats``/``clear_cache`` look at; every part given must match.

    ``model`` and ``endpoint`` are glob patterns (``llama3*``); ``endpoint`` is matched as
    :func:`endpoint_label` records it, and ``"default"`` means the provider's own API. Replies
    stored before endpoints were recorded match no endpoint filter. ``older_than_s``: stored
    more than that many seconds ago.
    """

    model: str | None = None
    provider: str | None = None
    endpoint: str | None = None
    older_than_s: float | None = None

    def where(self, now: float) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        values: list[Any] = []
        if self.model is not None:
            clauses.append("r.model GLOB ?")
            values.append(self.model)
        if self.provider is not None:
            clauses.append("r.provider = ?")
            values.append(self.provider)
        if self.endpoint is not None:
            wanted = "" if self.endpoint.strip().lower() == "default" else endpoint_label(
                self.endpoint)
            clauses.append("e.endpoint GLOB ?" if wanted else "e.endpoint = ?")
            values.append(wanted)
        if self.older_than_s is not None:
            clauses.append("r.created_at < ?")
            values.append(now - self.older_than_s)
        return (" WHERE " + " AND ".join(clauses) if clauses else ""), values

    @property
    def empty(self) -> bool:
        return all(v is None for v in (self.model, self.provider, self.endpoint,
                                       self.older_than_s))


@dataclass(frozen=True)
class CacheGroup:
    """The replies of one judge (provider, endpoint, model) in a cache file."""

    provider: str
    endpoint: str | None  # "" the provider's own API; None not recorded (an older reply)
    model: str
    replies: int
    oldest: float
    newest: float


@dataclass(frozen=True)
class CacheStats:
    path: Path
    exists: bool
    total: int  # replies in the file
    matching: int  # replies the filter selects
    size_bytes: int
    groups: tuple[CacheGroup, ...]  # of the matching replies, most replies first


_REPLIES_WITH_ENDPOINTS = ("judge_replies AS r LEFT JOIN judge_reply_endpoints AS e "
                           "ON e.key = r.key")


def _open_existing(path: Path) -> sqlite3.Connection:
    try:
        conn = sqlite3.connect(f"{path.as_uri()}?mode=rw", uri=True, isolation_level=None,
                               timeout=5.0)
    except sqlite3.DatabaseError as exc:
        raise ValueError(f"{path}: not a usable judge cache ({exc})") from None
    try:
        tables = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND "
                              "name = 'judge_replies'").fetchall()
        if not tables:
            raise ValueError(f"{path}: not a referee judge cache (no judge_replies table)")
        _ensure_schema(conn)
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise ValueError(f"{path}: not a referee judge cache ({exc})") from None
    except ValueError:
        conn.close()
        raise
    return conn


def cache_stats(path: str | Path | None = None, where: CacheFilter = CacheFilter()) -> CacheStats:
    """How many replies a cache file holds, in all and by judge (provider, endpoint, model)."""
    flush_caches()
    resolved = _cache_file(path)
    if not resolved.is_file():
        return CacheStats(resolved, False, 0, 0, 0, ())
    conn = _open_existing(resolved)
    try:
        sql, values = where.where(time.time())
        total = conn.execute("SELECT count(*) FROM judge_replies").fetchone()[0]
        rows = conn.execute(
            "SELECT r.provider, e.endpoint, r.model, count(*), min(r.created_at), "
            f"max(r.created_at) FROM {_REPLIES_WITH_ENDPOINTS}{sql} "
            "GROUP BY r.provider, e.endpoint, r.model "
            "ORDER BY count(*) DESC, r.provider, e.endpoint, r.model", values).fetchall()
    except sqlite3.DatabaseError as exc:
        raise ValueError(f"{resolved}: not a usable judge cache ({exc})") from None
    finally:
        conn.close()
    groups = tuple(CacheGroup(*row) for row in rows)
    size = sum(p.stat().st_size for p in (resolved, Path(f"{resolved}-wal")) if p.is_file())
    return CacheStats(resolved, True, total, sum(g.replies for g in groups), size, groups)


def clear_cache(path: str | Path | None = None,
                where: CacheFilter = CacheFilter()) -> tuple[int, int]:
    """Delete the replies ``where`` selects (every reply without a filter) from a cache file:
    (removed, left). The next identical request asks the judge again."""
    flush_caches()
    resolved = _cache_file(path)
    if not resolved.is_file():
        return 0, 0
    with _caches_lock:  # this process's own copy must not serve what was removed
        open_here = _caches.get(resolved)
    conn = _open_existing(resolved)
    try:
        sql, values = where.where(time.time())
        with conn:  # one transaction
            conn.execute("BEGIN")
            conn.execute("CREATE TEMP TABLE doomed AS SELECT r.key AS key FROM "
                         f"{_REPLIES_WITH_ENDPOINTS}{sql}", values)
            removed = conn.execute("DELETE FROM judge_replies WHERE key IN "
                                   "(SELECT key FROM doomed)").rowcount
            conn.execute("DELETE FROM judge_reply_endpoints WHERE key IN "
                         "(SELECT key FROM doomed) OR key NOT IN (SELECT key FROM judge_replies)")
            conn.execute("DROP TABLE doomed")
        left = conn.execute("SELECT count(*) FROM judge_replies").fetchone()[0]
        if removed:
            try:  # give the space back; skipped while another process has the file open
                conn.execute("VACUUM")
            except sqlite3.OperationalError:
                pass
    except sqlite3.DatabaseError as exc:
        raise ValueError(f"{resolved}: not a usable judge cache ({exc})") from None
    finally:
        conn.close()
    if open_here is not None:
        open_here.close()  # reconnects on its next use
    return removed, left
