"""A run on disk: written case by case, so an interrupted run loses nothing and can resume.

Layout of one run directory (default ``.referee/runs/<run_id>/``)::

    meta.json     who ran what: suite/eval-set name, model id, judge config (no secrets),
                  versions, timestamps, the case ids and their fingerprint
    cases.jsonl   one finished CaseResult per line, written and flushed as each case ends
    report.json   written once the run finishes: the summary, the counts (``tally``) and a
                  reference to cases.jsonl (``cases_file``) rather than a copy of every case
    .lock         while a process writes the run: its pid and host (one writer per run)
    cases.damaged.jsonl   lines a resume found unreadable and set aside
    versions/<n>/ an earlier scoring, replaced by --rescore or --retry-errors: a whole run
                  directory of its own, read as ``RUN_DIR@N`` (``referee.store._versions``)

A resume appends the cases it runs again, then rewrites cases.jsonl with one line per case.

``load_run`` prefers report.json and otherwise rebuilds the report from meta.json and
cases.jsonl. Damage is handled line by line and run by run: an unreadable line (a torn tail
after a kill, a cut multi-byte character, a garbled record) is left out and named in the
report's ``metadata["damaged"]``, and ``list_runs`` lists a run it cannot read at all as
damaged instead of failing or hiding it. Resuming runs the left-out cases again.

Any OSError while writing becomes ``RunStoreWriteError``, which names the run directory and
says that ``--resume`` completes the run.

A finished run's ``report.cases`` reads cases.jsonl on demand (``StoredCases``), so loading a
run of a million cases holds its counts, not its cases; resume streams the recorded ids. A
report.json that carries its cases inline (older runs, or a report written from an in-memory
list) is read as it is. An interrupted run is rebuilt in memory from cases.jsonl.

Each case line is flushed to the operating system as soon as the case ends, so killing the
process loses nothing. ``fsync`` (which only matters if the machine itself goes down) runs at
most once per ``FSYNC_INTERVAL_S`` and when the run closes: one fsync per case cost more than
every deterministic criterion together on a 2,000-case run.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import shutil
import socket
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from referee import __version__
from referee.content._blobs import externalise_json_line
from referee.errors import InputError, RefereeError
from referee.record import CaseResult, EvalReport, RunTally, judged_labels
from referee.redact import redact_secrets
from referee.store._case_file import StoredCases, scan_offsets
from referee.store._case_line import case_line, read_case_line
from referee.store._versions import (
    VERSION_KEY,
    VERSIONS_DIR,
    describe,
    split_ref,
    version_dir,
    version_number,
)

DEFAULT_RUNS_DIR = Path(".referee") / "runs"
RUNS_DIR_ENV = "REFEREE_RUNS_DIR"
META_FILE = "meta.json"
CASES_FILE = "cases.jsonl"
REPORT_FILE = "report.json"
# People's labels on the run's verdicts (referee.labels): they belong to the run as a whole,
# name the scoring they were made on, and stay at the top level when a scoring is kept.
LABELS_FILE = "labels.jsonl"
RUN_WIDE_FILES = (LABELS_FILE,)
LOCK_FILE = ".lock"
DAMAGED_LINES_FILE = "cases.damaged.jsonl"
# The files the views render beside a run, by format (referee.report.writers writes them): a
# scoring kept under versions/<n>/ takes its files along, and the new scoring renders its own.
RENDERED_FILES = {"json": "results.json", "junit": "junit.xml", "html": "report.html"}
FSYNC_INTERVAL_S = 1.0


def case_fingerprint(case_ids: Iterable[str]) -> str:
    """Identifies the ordered case list, so a resume against different cases is refused."""
    digest = hashlib.sha256("\n".join(case_ids).encode("utf-8")).hexdigest()
    return digest[:16]


def _versions() -> dict[str, str]:
    return {"referee": __version__, "python": platform.python_version()}


def _fsync_write(path: Path, text: str | Iterable[bytes]) -> None:
    """Write ``text`` (or its pieces, as bytes) via a temporary file and rename, so a reader
    never sees half a file.

    The temporary name is unique, so two writers never write into one temporary file.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with open(fd, "wb") as fh:
            if isinstance(text, str):
                fh.write(text.encode("utf-8"))
            else:
                fh.writelines(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class RunStoreWriteError(RefereeError):
    """The run store could not be written (a full disk, a lost mount, no permission).

    The run stops; every case written before is kept, and ``--resume RUN_DIR`` completes it.
    """

    def __init__(self, run_dir: Path, exc: OSError) -> None:
        reason = exc.strerror or str(exc) or type(exc).__name__
        where = f" ({Path(exc.filename).name})" if exc.filename else ""
        super().__init__(
            f"cannot write the run store in {run_dir}{where}: {reason}; the run stopped and "
            f"its finished cases are kept; rerun with --resume {run_dir} to complete it")
        self.run_dir = run_dir
        self.cause = exc


def runs_dir_or_default(runs_dir: str | Path | None = None) -> Path:
    """Where run directories go: ``runs_dir`` when given, else ``$REFEREE_RUNS_DIR``, else
    ``.referee/runs``. The one place that default is worked out: the run options, the store, the
    run index and the CLI all ask here."""
    if runs_dir is not None and str(runs_dir) != "":
        return Path(runs_dir)
    return Path(os.environ.get(RUNS_DIR_ENV) or DEFAULT_RUNS_DIR)


def _cannot_create(run_dir: Path, exc: OSError) -> InputError:
    """Before the first case nothing ran, so this is no interrupted run to resume."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    return InputError(f"cannot create the run directory: {reason}", source=str(run_dir),
                      expected="a runs directory (--out) that can be created and written")


class RunInUse(InputError):
    """Another live process holds the run directory's lock."""


@contextlib.contextmanager
def _writing(run_dir: Path) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        raise RunStoreWriteError(run_dir, exc) from exc


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    except OSError:
        return False
    return True


class RunStore:
    """Reads and writes one run directory.

    A store that writes (``create``/``reopen``) holds the directory's lock file, which names
    the writing process; ``release()`` gives it up. Readers take no lock.
    """

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self._cases_file: Any = None
        self._last_fsync = 0.0
        self._locked = False
        self._lock_fd: int | None = None
        # What reading found broken, one line each ("cases.jsonl line 7: ..."); reports show it.
        self.damage: list[str] = []

    # Construction ------------------------------------------------------------------------
    @classmethod
    def create(cls, runs_dir: str | Path | None, report: EvalReport, *,
               case_ids: list[str], extra_meta: dict[str, Any] | None = None) -> RunStore:
        """Start a new run directory ``<runs_dir>/<report.run_id>`` and write its meta.json."""
        run_dir = runs_dir_or_default(runs_dir) / report.run_id
        if run_dir.exists() and any(run_dir.iterdir()):
            raise InputError("run directory already exists and is not empty", source=str(run_dir))
        store = cls(run_dir)
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
            store.lock()
        except OSError as exc:
            raise _cannot_create(run_dir, exc) from None
        try:
            store.write_meta(report, case_ids=case_ids, extra=extra_meta)
        except BaseException as exc:
            store.unlock()
            with contextlib.suppress(OSError):
                run_dir.rmdir()  # empty again: nothing of this run exists to resume
            if isinstance(exc, RunStoreWriteError):
                raise _cannot_create(run_dir, exc.cause) from None
            raise
        return store

    @classmethod
    def reopen(cls, run_dir: str | Path, *, new_version: bool = False) -> RunStore:
        """Open an interrupted or damaged run for resuming, as its only writer.

        A torn final line is cut off and damaged lines move to cases.damaged.jsonl, so that
        appends stay whole and only the damaged cases run again. With ``new_version`` (a
        re-score, a retry of errors) a finished run's scoring is first kept under
        ``versions/<n>/`` and the top level becomes scoring n + 1.
        """
        store = cls(run_dir)
        store.read_meta()
        store.lock()
        try:
            with _writing(store.run_dir):
                if new_version and store.report_path.is_file():
                    store._keep_version()
                store._set_aside_damaged_lines()
                if store.report_path.is_file():
                    # The run will be finished again; a stale report must not outlive the new cases.
                    store.report_path.unlink()
        except BaseException:
            store.unlock()
            raise
        return store

    def _keep_version(self) -> None:
        """Copy the finished scoring into ``versions/<n>/`` (whole or not at all), then number
        the top level n + 1 and drop its rendered reports, which describe scoring n.

        Copied, not linked: cases.jsonl is appended to in place. A kill before the rename leaves
        a hidden temporary folder that no reader lists; a kill after it, before meta.json says
        n + 1, finds ``versions/<n>`` already whole the next time and keeps it as it is.
        """
        meta = self.read_meta()
        number = version_number(meta)
        target = self.run_dir / VERSIONS_DIR / str(number)
        if not target.is_dir():
            target.parent.mkdir(exist_ok=True)
            staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{number}."))
            try:
                for child in self.run_dir.iterdir():
                    if (child.is_file() and not child.name.startswith(".")
                            and child.name not in RUN_WIDE_FILES):
                        shutil.copy2(child, staging / child.name)
                        with open(staging / child.name, "rb") as fh:
                            os.fsync(fh.fileno())
                os.rename(staging, target)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
            _fsync_dir(target.parent)
        self._replace_meta({**meta, VERSION_KEY: number + 1})
        for name in RENDERED_FILES.values():
            with contextlib.suppress(FileNotFoundError):
                (self.run_dir / name).unlink()

    def compact_cases(self) -> None:
        """Rewrite cases.jsonl with one line per case (its last record), when a resume left
        superseded lines; whole or not at all."""
        self.close()
        path = self.cases_path
        if not path.is_file():
            return
        offsets = scan_offsets(path)
        with open(path, "rb") as fh:
            if len(offsets) == sum(1 for raw in fh if raw.strip()):
                return

        def kept_lines() -> Iterator[bytes]:  # streamed: a large run is never held whole
            with open(path, "rb") as source:
                for start in offsets:
                    source.seek(start)
                    yield source.readline()

        with _writing(self.run_dir):
            _fsync_write(path, kept_lines())

    def _set_aside_damaged_lines(self) -> None:
        path = self.cases_path
        if not path.is_file():
            return
        data = path.read_bytes()
        kept: list[bytes] = []
        damaged: list[bytes] = []
        for raw in data.split(b"\n"):
            if not raw.strip():
                continue
            (kept if _parse_case(raw)[0] is not None else damaged).append(raw)
        if not damaged:
            return
        with open(self.run_dir / DAMAGED_LINES_FILE, "ab") as fh:
            fh.write(b"".join(line + b"\n" for line in damaged))
            fh.flush()
            os.fsync(fh.fileno())
        _fsync_write(path, (line + b"\n" for line in kept))

    # The writer's lock -------------------------------------------------------------------
    @property
    def lock_path(self) -> Path:
        return self.run_dir / LOCK_FILE

    def lock(self) -> None:
        """Become the run's only writer, or refuse at once naming the process that is.

        The lock is the kernel's (``flock`` on ``.lock``), so it dies with its holder: a killed
        or crashed writer leaves nothing to take over, and no two takers can both win. The file
        holds the writer's pid and host, for the message a refused rival prints.
        """
        me = f"{os.getpid()} {socket.gethostname()}\n".encode()
        for _ in range(5):
            fd = os.open(self.lock_path, os.O_CREAT | os.O_RDWR, 0o644)
            try:
                _exclusive_lock(fd)
            except BlockingIOError:
                os.close(fd)
                raise RunInUse(
                    f"the run is being written by {self._lock_holder()} (lock file "
                    f"{self.lock_path}); wait for it to end", source=str(self.run_dir)) from None
            try:
                current = os.stat(self.lock_path).st_ino
            except FileNotFoundError:
                current = None
            if current != os.fstat(fd).st_ino:
                os.close(fd)  # a finishing writer unlinked the file this lock is on: again
                continue
            os.ftruncate(fd, 0)
            os.write(fd, me)
            self._lock_fd = fd
            self._locked = True
            return
        raise RunInUse("could not take the run's lock file; another process keeps taking it",
                       source=str(self.lock_path))

    def _lock_holder(self) -> str:
        """The live holder in words, from the pid and host it wrote into the lock file."""
        try:
            fields = self.lock_path.read_text(encoding="utf-8", errors="replace").split()
        except FileNotFoundError:
            fields = []
        if not fields or not fields[0].isdigit():
            return "another process"  # it has the lock and is writing its pid this instant
        host = fields[1] if len(fields) > 1 else socket.gethostname()
        if host == socket.gethostname() and not _pid_alive(int(fields[0])):
            return "another process"  # a dead writer's pid, not yet overwritten by the new one
        return f"process {fields[0]} on {host}"

    def has_live_writer(self) -> bool:
        """Whether a live process holds the run's lock now (an unfinished run is then running,
        not interrupted). Takes no lock that a starting writer could meet: the shared lock is
        only tried when the lock file names a live process, which then holds it."""
        try:
            fields = self.lock_path.read_text(encoding="utf-8", errors="replace").split()
        except OSError:
            return False
        if (len(fields) >= 2 and fields[0].isdigit() and fields[1] == socket.gethostname()
                and not _pid_alive(int(fields[0]))):
            return False  # the lock file a killed writer left behind
        try:
            fd = os.open(self.lock_path, os.O_RDONLY)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # closing releases the shared lock if it was taken
        return False

    def unlock(self) -> None:
        if self._locked:
            self._locked = False
            # Unlinked while still held, so a rival that opened this file sees it is gone.
            with contextlib.suppress(FileNotFoundError):
                self.lock_path.unlink()
            fd, self._lock_fd = self._lock_fd, None
            if fd is not None:
                os.close(fd)

    @property
    def meta_path(self) -> Path:
        return self.run_dir / META_FILE

    @property
    def cases_path(self) -> Path:
        return self.run_dir / CASES_FILE

    @property
    def report_path(self) -> Path:
        return self.run_dir / REPORT_FILE

    @property
    def is_finished(self) -> bool:
        return self.report_path.is_file()

    # Writing -----------------------------------------------------------------------------
    def write_meta(self, report: EvalReport, *, case_ids: list[str],
                   extra: dict[str, Any] | None = None) -> None:
        meta: dict[str, Any] = {
            "run_id": report.run_id,
            "name": report.name,
            "eval_set_id": report.eval_set_id,
            "model_id": report.model_id,
            "judge": redact_secrets(report.judge),
            "config_used": redact_secrets(report.config_used),
            "metadata": redact_secrets(report.metadata),
            "versions": _versions(),
            "started_at": report.started_at,
            "case_ids": list(case_ids),
            "case_fingerprint": case_fingerprint(case_ids),
        }
        if extra:
            meta.update(redact_secrets(extra))
        with _writing(self.run_dir):
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self._replace_meta(meta)

    def update_meta(self, **fields: Any) -> None:
        """Set fields of meta.json, replacing the file whole."""
        meta = {**self.read_meta(), **fields}
        with _writing(self.run_dir):
            self._replace_meta(meta)

    def _replace_meta(self, meta: dict[str, Any]) -> None:
        _fsync_write(self.meta_path, json.dumps(meta, indent=2, ensure_ascii=False, default=str))

    def append_case(self, result: CaseResult) -> None:
        """Persist one finished case now: a kill right after this call keeps it."""
        # A field at its default is left out, and so is what the line holds twice (the
        # input as the first turn, the trajectories in the trajectory criterion's details);
        # reading puts both back (referee.store._case_line). Images and documents go to
        # blobs/ once, by content hash; the line keeps the hash.
        line = externalise_json_line(case_line(result), self.run_dir) + "\n"
        with _writing(self.run_dir):
            if self._cases_file is None:
                self._cases_file = open(self.cases_path, "a", encoding="utf-8")
                self._last_fsync = time.monotonic()
            fh = self._cases_file
            fh.write(line)
            fh.flush()
            now = time.monotonic()
            if now - self._last_fsync >= FSYNC_INTERVAL_S:
                os.fsync(fh.fileno())
                self._last_fsync = now

    def close(self) -> None:
        """Sync and close cases.jsonl; appending again reopens it. The lock is kept."""
        fh, self._cases_file = self._cases_file, None
        if fh is None:
            return
        with _writing(self.run_dir):
            try:
                fh.flush()
                os.fsync(fh.fileno())
            finally:
                with contextlib.suppress(OSError):
                    fh.close()  # closing flushes again, and fails again, on a full disk

    def writing(self) -> contextlib.AbstractContextManager[None]:
        """Around any other write into the run directory: an OSError becomes RunStoreWriteError."""
        return _writing(self.run_dir)

    def release(self) -> None:
        """Close cases.jsonl as well as a failing disk allows, and give up the lock."""
        try:
            self.close()
        except RunStoreWriteError:
            pass
        finally:
            self.unlock()

    def write_report(self, report: EvalReport) -> Path:
        self.close()
        cases = report.cases
        stored = isinstance(cases, StoredCases) and cases.path == self.cases_path
        data = report.to_dict(with_cases=not stored)
        if isinstance(cases, StoredCases) and stored:
            data["cases_file"] = CASES_FILE
            data["tally"] = cases.tally.to_dict()
        for key in ("judge", "config_used", "metadata"):
            data[key] = redact_secrets(data.get(key, {}))
        # No indent: json's C encoder only runs without one (4x faster on large runs), and the
        # file is 40% smaller; people read runs through `referee view` and the rendered reports.
        with _writing(self.run_dir):
            _fsync_write(self.report_path, json.dumps(data, ensure_ascii=False))
        return self.report_path

    # Reading -----------------------------------------------------------------------------
    def read_meta(self) -> dict[str, Any]:
        try:
            data = json.loads(self.meta_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError("not a referee run directory (meta.json is missing)",
                             source=str(self.run_dir)) from None
        except json.JSONDecodeError as exc:
            raise InputError(exc.msg, source=str(self.meta_path), line=exc.lineno,
                             expected="a JSON object") from None
        except UnicodeDecodeError:
            raise InputError("not UTF-8 text", source=str(self.meta_path),
                             expected="a JSON object") from None
        if not isinstance(data, dict):
            raise InputError("meta.json is not a JSON object", source=str(self.meta_path))
        for name, (fits, expected) in _META_FIELDS.items():
            if data.get(name) is not None and not fits(data[name]):
                raise InputError(f"{type(data[name]).__name__} value", source=str(self.meta_path),
                                 field=name, expected=expected)
        return data

    def read_cases(self) -> list[CaseResult]:
        """Finished cases in the order written; later duplicates win.

        Read line by line: a line that cannot be read (a torn tail after a kill, a cut
        multi-byte character, damage anywhere) is left out and described in ``damage``, and
        the cases on every other line are kept. A resume runs the left-out cases again.
        """
        self.damage = [d for d in self.damage if not d.startswith(CASES_FILE)]
        if not self.cases_path.is_file():
            return []
        data = self.cases_path.read_bytes()
        lines = data.split(b"\n")
        by_id: dict[str, CaseResult] = {}
        for i, raw in enumerate(lines):
            if not raw.strip():
                continue
            result, problem = _parse_case(raw)
            if result is None:
                torn = i == len(lines) - 1  # no newline after it: the write never finished
                what = "torn (the run stopped while writing it)" if torn else f"unreadable: {problem}"
                self.damage.append(f"{CASES_FILE} line {i + 1}: {what}; that case is left out "
                                   f"and runs again on --resume")
                continue
            by_id[result.eval_id] = result
        return list(by_id.values())

    def stream_cases(self) -> Iterator[CaseResult]:
        """The readable case lines in the order written, one at a time (damaged ones skipped:
        a resume sets them aside and runs their cases again)."""
        if not self.cases_path.is_file():
            return
        with open(self.cases_path, "rb") as fh:
            for raw in fh:
                if raw.strip():
                    result = _parse_case(raw)[0]
                    if result is not None:
                        yield result

    def load(self) -> EvalReport:
        if self.report_path.is_file():
            try:
                return self._with_judged_criteria(read_report_file(self.report_path))
            except InputError as exc:
                if not self.meta_path.is_file():
                    raise
                self.damage.append(f"{REPORT_FILE} unreadable ({exc}); shown from {CASES_FILE}")
        return self.rebuild()

    def _with_judged_criteria(self, report: EvalReport) -> EvalReport:
        """``report``, told which criteria a judge scored from meta.json's descriptions where
        its report.json does not say (`referee serve`'s windows write none)."""
        if report.judged_criteria is None and self.meta_path.is_file():
            try:
                report.judged_criteria = judged_labels(self.read_meta().get("criteria"))
            except InputError:
                pass  # an unreadable meta.json records nothing: every result stays queued
        return report

    def rebuild(self) -> EvalReport:
        """The report of an interrupted run: what meta.json and cases.jsonl hold."""
        meta = self.read_meta()
        cases = self.read_cases()
        order = {cid: i for i, cid in enumerate(meta.get("case_ids") or [])}
        cases.sort(key=lambda c: order.get(c.eval_id, len(order) + c.index))
        metadata = {**(meta.get("metadata") or {}), "interrupted": True,
                    "expected_cases": len(order), "run_dir": str(self.run_dir)}
        if self.has_live_writer():
            # Unfinished because it is going on: its last line may be half-written right now.
            metadata["running"] = True
            self.damage = [d for d in self.damage if "torn" not in d]
        if self.damage:
            metadata["damaged"] = list(self.damage)
        return EvalReport(
            run_id=str(meta.get("run_id") or self.run_dir.name),
            name=str(meta.get("name") or ""),
            eval_set_id=str(meta.get("eval_set_id") or ""),
            model_id=str(meta.get("model_id") or ""),
            started_at=float(meta.get("started_at") or time.time()),
            finished_at=None,
            cases=cases,
            judge=meta.get("judge") or {},
            judged_criteria=judged_labels(meta.get("criteria")),
            config_used=meta.get("config_used") or {},
            metadata=metadata,
        )


# A listing (has_live_writer) probes the lock with a shared one for microseconds: a writer
# that meets such a probe tries again for this long before it calls the run taken.
_PROBE_WAIT_S = 0.05


def _exclusive_lock(fd: int) -> None:
    """``flock(LOCK_EX)`` without blocking on a writer; BlockingIOError when one holds it."""
    deadline = time.monotonic() + _PROBE_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.005)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# What every reader of meta.json relies on (null stands for absent): a hand-edited or foreign
# meta.json that breaks it is named here, not a TypeError deep inside list, compare or resume.
_META_FIELDS: dict[str, tuple[Any, str]] = {
    **{name: (lambda v: isinstance(v, str), "a string")
       for name in ("run_id", "name", "eval_set_id", "model_id", "case_fingerprint")},
    **{name: (lambda v: isinstance(v, dict), "a JSON object")
       for name in ("judge", "config_used", "metadata")},
    "started_at": (_is_number, "a number (seconds since the epoch)"),
    "case_ids": (lambda v: isinstance(v, list) and all(isinstance(i, str) for i in v),
                 "a list of case ids (strings)"),
    "criteria": (lambda v: isinstance(v, list) and all(isinstance(c, dict) for c in v),
                 "a list of criterion descriptions (objects)"),
    "runs": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
             "a positive integer"),
}


def _parse_case(raw: bytes) -> tuple[CaseResult | None, str]:
    """One cases.jsonl line: the case, or None and why not (also for bytes that are not UTF-8)."""
    try:
        return read_case_line(raw), ""
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        return None, f"{err['msg']}" + (f" at '{where}'" if where else "")
    except ValueError as exc:
        return None, str(exc)


def read_report_file(path: Path) -> EvalReport:
    """A report JSON file (report.json or the results.json report); anything else is refused.

    Any JSON object would otherwise validate as an empty report, and ``compare`` would call a
    wrong file a run whose cases were all removed.
    """
    expected = "a report.json or results.json written by referee"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(exc.msg, source=str(path), line=exc.lineno, expected=expected) from None
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text", source=str(path), expected=expected) from None
    cases_file = data.get("cases_file") if isinstance(data, dict) else None
    if not isinstance(data, dict) or "run_id" not in data or not (
            isinstance(data.get("cases"), list) or isinstance(cases_file, str)):
        raise InputError("not a referee report (no run_id and list of cases)", source=str(path),
                         expected=expected)
    tally_data = data.pop("tally", None)
    try:
        report = EvalReport.from_dict({k: v for k, v in data.items() if k != "cases_file"})
        tally = RunTally.from_dict(tally_data) if isinstance(tally_data, dict) else None
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(err["msg"], source=str(path),
                         field=".".join(str(p) for p in err["loc"])) from None
    except (TypeError, ValueError) as exc:
        raise InputError(f"unreadable tally: {exc}", source=str(path), field="tally") from None
    if isinstance(cases_file, str) and "cases" not in data:
        if Path(cases_file).name != cases_file:
            raise InputError("cases_file must name a file next to report.json", source=str(path),
                             field="cases_file", expected=CASES_FILE)
        # Read on demand from cases.jsonl: EvalReport takes any sequence of cases at run time.
        report.cases = StoredCases(path.parent / cases_file, tally=tally)  # type: ignore[assignment]
    return report


def load_run(run_dir_or_file: str | Path) -> EvalReport:
    """Load a run directory (finished or interrupted), ``RUN_DIR@N`` (its scoring N, see
    ``referee.store._versions``) or a report JSON file."""
    path, version = split_ref(run_dir_or_file)
    if version is not None:
        if not (path / META_FILE).is_file():
            raise InputError("no such run directory", source=str(path),
                             expected="RUN_DIR@N, where RUN_DIR holds a stored run")
        path = version_dir(path, version, version_number(RunStore(path).read_meta()))
    report = _load_path(path)
    if path.is_dir():
        report.metadata.update(_scorings(path))
    report.run_dir = _run_dir_of(path)
    return report


def _run_dir_of(path: Path) -> Path | None:
    """The run directory ``path`` is, or holds the file of; None for a report file alone."""
    if path.is_dir():
        return path
    return path.parent if (path.parent / META_FILE).is_file() else None


def _scorings(run_dir: Path) -> dict[str, Any]:
    """The scorings of the run ``run_dir`` belongs to, and which one it is (empty for a run
    scored once)."""
    if run_dir.parent.name == VERSIONS_DIR and run_dir.name.isdigit() and (
            run_dir.parent.parent / META_FILE).is_file():
        root, number = run_dir.parent.parent, int(run_dir.name)
    else:
        root, number = run_dir, 0
    try:
        current = version_number(RunStore(root).read_meta())
    except InputError:
        return {}
    found = describe(root, current)
    if found and number:
        found["version"] = number
    return found


def _load_path(path: Path) -> EvalReport:
    if path.is_file():
        if path.name == CASES_FILE or path.name == META_FILE:
            return RunStore(path.parent).load()
        return read_report_file(path)
    if path.is_dir():
        if not (path / META_FILE).is_file() and not (path / REPORT_FILE).is_file():
            runs = sorted(c.name for c in path.iterdir()
                          if c.is_dir() and ((c / META_FILE).is_file() or (c / REPORT_FILE).is_file()))
            if runs:
                raise InputError(
                    f"this is a directory of {len(runs)} run(s), not one run", source=str(path),
                    expected=f"one run directory inside it, e.g. {path / runs[-1]}")
        return RunStore(path).load()
    raise InputError("no such run directory or report file", source=str(path))


@dataclass(frozen=True)
class RunInfo:
    """One stored run as the index lists it, without loading every case's details."""

    run_id: str
    path: Path
    name: str
    model_id: str
    started_at: float
    finished: bool
    total: int
    passed: int
    failed: int
    errors: int
    pass_rate: float
    error_rate: float
    # What is broken in the stored run (unreadable lines or files); empty when it is whole.
    damaged: tuple[str, ...] = ()
    # Unfinished because a live process is writing it (not interrupted).
    running: bool = False
    # Which scoring of the run this is, and every scoring kept (empty when scored once).
    version: int = 1
    versions: tuple[int, ...] = ()

    @classmethod
    def from_report(cls, path: Path, report: EvalReport, finished: bool) -> RunInfo:
        expected = int(report.metadata.get("expected_cases") or 0)
        total = max(report.total, expected) if not finished else report.total
        return cls(
            run_id=report.run_id, path=path, name=report.name, model_id=report.model_id,
            started_at=report.started_at, finished=finished, total=total,
            passed=report.passed, failed=report.failed, errors=report.errors,
            pass_rate=report.pass_rate, error_rate=report.error_rate,
            damaged=tuple(str(d) for d in report.metadata.get("damaged") or ()),
            running=not finished and bool(report.metadata.get("running")),
            version=int(report.metadata.get("version") or 1),
            versions=tuple(report.metadata.get("versions") or ()),
        )

    @classmethod
    def unreadable(cls, path: Path, problem: str) -> RunInfo:
        """A run directory that cannot be read at all: listed, so that it is not lost silently."""
        try:
            started = path.stat().st_mtime
        except OSError:
            started = 0.0
        return cls(run_id=path.name, path=path, name="", model_id="", started_at=started,
                   finished=False, total=0, passed=0, failed=0, errors=0, pass_rate=0.0,
                   error_rate=0.0, damaged=(problem,))


def list_runs(runs_dir: str | Path | None = None) -> list[RunInfo]:
    """Every run under ``runs_dir``, newest first, run by run: one that is damaged, in part
    or wholly, is listed with what is wrong (``damaged``) and never hides the others."""
    base = runs_dir_or_default(runs_dir)
    if not base.is_dir():
        return []
    runs: list[RunInfo] = []
    for child in base.iterdir():
        try:
            if not child.is_dir() or not (child / META_FILE).is_file() and not (child / REPORT_FILE).is_file():
                continue
            store = RunStore(child)
            report = store.load()
            report.metadata.update(_scorings(child))
        except (InputError, OSError, ValueError) as exc:
            runs.append(RunInfo.unreadable(child, f"unreadable: {exc}"))
            continue
        finished = store.is_finished and not report.metadata.get("interrupted")
        runs.append(RunInfo.from_report(child, report, finished))
    runs.sort(key=lambda r: (r.started_at, r.run_id), reverse=True)
    return runs
