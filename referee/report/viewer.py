"""A local web viewer over stored runs; its writes are a person's label on a verdict and a
judged (pairwise) comparison of two runs that a person asks for on the compare page.

It listens on 127.0.0.1 only and answers only requests that are plainly its own: the Host
header must name the loopback address and this port (a DNS-rebinding page presents its own
host name), and a request that a browser marks as coming from another origin (Origin or
Sec-Fetch-Site) is refused. Runs are addressed by the name of their directory under the
runs directory, never by a path, so nothing outside it can be read.

Labels (``/run/NAME/labels``, referee.labels) and judged comparisons (``/compare/judge``,
referee.pairwise) are the only writes. Beyond the checks above, each write carries the
per-session token that the page embeds (random at server start, compared in constant time), so
a page of another origin that guessed the port still cannot store one or spend judge requests.
Labels go to the run's labels.jsonl, judged comparisons to run B's comparisons/, never into the
runs' own records. A judged comparison runs in a background thread; the page polls
``/compare/status?job=ID`` and the viewer keeps answering meanwhile.
"""

from __future__ import annotations

import hmac
import html
import json
import logging
import re
import secrets
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from referee.errors import InputError
from referee.record import EvalReport
from referee.report.compare import compare_reports
from referee.report.html import (
    render_html,
    render_index_html,
    render_labelling_html,
)
from referee.report.json_report import render_json
from referee.report.serve_view import (
    online_windows,
    render_serve_html,
    serve_summaries,
    serve_view,
)
from referee.store import (
    META_FILE,
    REPORT_FILE,
    RunInfo,
    RunStore,
    list_runs,
    load_run,
    split_ref,
    version_number,
)

log = logging.getLogger(__name__)

LOOPBACK_HOSTS = ("127.0.0.1", "localhost")
_RUN_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
_SAFE_FETCH_SITES = ("same-origin", "none")
_SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cache-Control": "no-store",
}
TOKEN_HEADER = "X-Referee-Token"
MAX_POST_BYTES = 64 * 1024


class _NotFound(Exception):
    pass


class RunCatalog:
    """Maps URL names to runs: directories directly under ``runs_dir`` plus one pinned target."""

    def __init__(self, runs_dir: Path, target: Path | None = None) -> None:
        self.runs_dir = Path(runs_dir)
        self.pinned: dict[str, Path] = {}
        # The URL name of the page to open first (the pinned run, or RUN@N: one of its scorings).
        self.opening: str | None = None
        if target is not None:
            target, version = split_ref(target)
            if not target.exists():
                raise InputError("no such run directory or report file", source=str(target))
            key = target.name if target.is_dir() else target.stem
            if not _RUN_KEY.match(key):
                key = "target"
            self.pinned[key] = target
            self.opening = key if version is None else f"{key}@{version}"

    def path_of(self, key: str) -> Path:
        """The run (or ``RUN@N``, its scoring N) a URL names."""
        key, at, version = key.partition("@")
        if at:
            if not version.isdigit():
                raise _NotFound(key)
            return Path(f"{self.path_of(key)}@{int(version)}")
        if not _RUN_KEY.match(key):
            raise _NotFound(key)
        if key in self.pinned:
            return self.pinned[key]
        base = self.runs_dir.resolve()
        candidate = base / key
        # resolve() follows symlinks: a link pointing out of the runs directory is not a run here.
        if not candidate.is_dir() or candidate.resolve().parent != base:
            raise _NotFound(key)
        if not (candidate / META_FILE).is_file() and not (candidate / REPORT_FILE).is_file():
            raise _NotFound(key)
        return candidate

    def load(self, key: str) -> EvalReport:
        return load_run(self.path_of(key))

    def runs(self) -> tuple[list[RunInfo], list[str]]:
        base = self.runs_dir.resolve()
        # Only what path_of would serve: a symlink leading out of the runs directory is not listed.
        runs = [r for r in list_runs(self.runs_dir) if r.path.resolve().parent == base]
        keys = [r.path.name for r in runs]
        listed = {r.path.resolve() for r in runs}
        for key, path in self.pinned.items():
            if path.resolve() in listed:
                continue
            try:
                report = load_run(path)
            except (InputError, OSError):
                continue
            finished = path.is_file() or (path / REPORT_FILE).is_file()
            runs.insert(0, RunInfo.from_report(path, report, finished))
            keys.insert(0, key)
        return runs, keys


def _host_allowed(host_header: str | None, port: int) -> bool:
    if not host_header:
        return False
    host, sep, port_text = host_header.strip().rpartition(":")
    if not sep:
        host, port_text = host_header.strip(), ""
    if host.lower() not in LOOPBACK_HOSTS:
        return False
    return port_text == str(port) or (port_text == "" and port == 80)


def _origin_allowed(origin: str | None, port: int) -> bool:
    if origin is None:
        return True
    return origin.strip().lower() in {f"http://{h}:{port}" for h in LOOPBACK_HOSTS}


class _Handler(BaseHTTPRequestHandler):
    server_version = "referee-viewer"
    sys_version = ""
    # Set on the per-server subclass.
    catalog: RunCatalog
    token: str  # the per-session write token
    labeller: str
    judging: Any  # referee.pairwise._jobs.PairwiseJobs: the judged comparisons this viewer runs

    # Plumbing ----------------------------------------------------------------------------
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        log.debug("viewer: " + format, *args)

    def _send(self, status: int, body: str | bytes,
              content_type: str = "text/html; charset=utf-8", csp: str | None = None) -> None:
        data = body.encode("utf-8") if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in _SECURITY_HEADERS.items():
            self.send_header(name, value)
        self.send_header("Content-Security-Policy", csp or "default-src 'none'; frame-ancestors 'none'")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _send_page(self, page: str) -> None:
        # The page's own meta CSP already governs it; the header adds what a meta tag cannot.
        self._send(HTTPStatus.OK, page, csp="frame-ancestors 'none'")

    def _error(self, status: HTTPStatus, message: str) -> None:
        body = (f"<!DOCTYPE html><meta charset=\"utf-8\"><title>{status.value} {status.phrase}</title>"
                f"<h1>{status.value} {status.phrase}</h1><p>{html.escape(message)}</p>")
        self._send(status, body)

    def _trusted(self) -> bool:
        port = int(self.server.server_address[1])  # type: ignore[index]  # an AF_INET server
        if not _host_allowed(self.headers.get("Host"), port):
            self._error(HTTPStatus.FORBIDDEN, "unexpected Host header; open the viewer at 127.0.0.1")
            return False
        if not _origin_allowed(self.headers.get("Origin"), port):
            self._error(HTTPStatus.FORBIDDEN, "cross-origin request refused")
            return False
        site = self.headers.get("Sec-Fetch-Site")
        if site is not None and site.strip().lower() not in _SAFE_FETCH_SITES:
            self._error(HTTPStatus.FORBIDDEN, "cross-site request refused")
            return False
        return True

    # Methods -----------------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        if not self._trusted():
            return
        try:
            self._route()
        except _NotFound:
            self._error(HTTPStatus.NOT_FOUND, "no such page or run")
        except InputError as exc:
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"this run cannot be read: {exc}")
        except Exception:
            log.exception("viewer failed on %s", self.path)
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, "the viewer failed; see its log")

    do_HEAD = do_GET

    def _read_only(self) -> None:
        if self._trusted():
            self._error(HTTPStatus.METHOD_NOT_ALLOWED, "the viewer only stores labels and "
                                                       "judged comparisons")

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _read_only

    def _send_json(self, status: int, value: dict[str, Any]) -> None:
        self._send(status, json.dumps(value), content_type="application/json; charset=utf-8")

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        if not self._trusted():
            return
        parts = [unquote(p) for p in urlsplit(self.path).path.split("/") if p]
        labels = len(parts) == 3 and parts[0] == "run" and parts[2] == "labels"
        if not labels and parts != ["compare", "judge"]:
            self._error(HTTPStatus.METHOD_NOT_ALLOWED, "the viewer only stores labels and "
                                                       "judged comparisons")
            return
        sent = self.headers.get(TOKEN_HEADER, "")
        if not hmac.compare_digest(sent.encode("utf-8", "replace"), self.token.encode("utf-8")):
            self._send_json(HTTPStatus.FORBIDDEN, {"error": "missing or wrong session token; "
                                                            "reload the labelling page"})
            return
        if not (self.headers.get("Content-Type") or "").startswith("application/json"):
            self._send_json(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, {"error": "send application/json"})
            return
        try:
            length = int(self.headers.get("Content-Length") or "0")
        except ValueError:
            length = -1
        if not 0 < length <= MAX_POST_BYTES:
            self._send_json(HTTPStatus.BAD_REQUEST, {"error": "send a JSON body of at most "
                                                              f"{MAX_POST_BYTES} bytes"})
            return
        body = self.rfile.read(length)
        if labels:
            self._store_label(parts[1], body)
        else:
            self._start_judging(body)

    def _store_label(self, key: str, body: bytes) -> None:
        from referee.labels._review import RefusedLabel, describe, label_from_post
        from referee.labels._store import LabelStore

        try:
            run_dir, scoring, report = self._labelled_run(key)
            label = label_from_post(body, report, scoring=scoring, labeller=self.labeller)
            LabelStore(run_dir).append(label)
        except _NotFound:
            self._send_json(HTTPStatus.NOT_FOUND, {"error": "no such run"})
            return
        except RefusedLabel as exc:
            self._send_json(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            return
        except (InputError, OSError) as exc:
            self._send_json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"not stored: {exc}"})
            return
        summary, text = describe(label)
        self._send_json(HTTPStatus.OK, {"summary": summary, "text": text,
                                        "verdict": label.verdict or "", "human": label.human or ""})

    def _start_judging(self, body: bytes) -> None:
        from referee.pairwise._viewer import RefusedJudging, compare_href, start_judging

        try:
            job = start_judging(body, self._stored_run, self.judging)
        except _NotFound:
            self._send_json(HTTPStatus.NOT_FOUND, {"error": "no such run"})
            return
        except RefusedJudging as exc:
            self._send_json(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            return
        except (InputError, OSError) as exc:
            self._send_json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"not started: {exc}"})
            return
        self._send_json(HTTPStatus.ACCEPTED, {**job.status(), "href": compare_href(*job.runs)})

    def _judging_status(self, query: dict[str, list[str]]) -> None:
        from referee.pairwise._viewer import compare_href

        job = self.judging.get((query.get("job") or [""])[0])
        if job is None:
            self._send_json(HTTPStatus.NOT_FOUND, {"error": "no such judged comparison in this "
                                                            "viewer; reload the page"})
            return
        status = job.status()
        a_key, b_key = job.runs
        self._send_json(HTTPStatus.OK, {**status, "href": compare_href(a_key, b_key,
                                                                      status["result"] or None)})

    def _stored_run(self, key: str) -> Any:
        """The run a URL names, with the directory its comparisons are kept in (none for a
        report file)."""
        from referee.pairwise._viewer import StoredRun

        path = self.catalog.path_of(key.partition("@")[0])
        return StoredRun(key, self.catalog.load(key), path if path.is_dir() else None)

    def _compare_page(self, query: dict[str, list[str]]) -> None:
        from referee.pairwise._html import render_judged_compare_html
        from referee.pairwise._viewer import judged_page

        a_key = (query.get("a") or [""])[0]
        b_key = (query.get("b") or [""])[0]
        run_a, run_b = self._stored_run(a_key), self._stored_run(b_key)
        page = judged_page(run_a, run_b, shown_key=(query.get("c") or [""])[0] or None,
                           jobs=self.judging, token=self.token, post_href="/compare/judge",
                           status_href="/compare/status")
        self._send_page(render_judged_compare_html(
            compare_reports(run_a.report, run_b.report), page, a_href="/run/" + quote(a_key),
            b_href="/run/" + quote(b_key), index_href="/"))

    def _labelled_run(self, key: str) -> tuple[Path, int, EvalReport]:
        """The run directory labels go to, the number of the scoring ``key`` names, and it."""
        base, at, version = key.partition("@")
        run_dir = self.catalog.path_of(base)
        if not run_dir.is_dir():
            raise _NotFound(key)  # a report file has no run directory to keep labels in
        scoring = int(version) if at and version.isdigit() else version_number(
            RunStore(run_dir).read_meta())
        return run_dir, scoring, self.catalog.load(key)

    def _labelling_page(self, key: str) -> None:
        from referee.content._gallery import Gallery
        from referee.labels._queue import nothing_to_label
        from referee.labels._review import queue_items
        from referee.labels._store import LabelStore

        run_dir, scoring, report = self._labelled_run(key)
        base_key = quote(key.partition("@")[0])
        items = queue_items(report, LabelStore(run_dir).latest(), gallery=Gallery(
            run_dir, blob_href=lambda sha256: f"/run/{base_key}/blob/{sha256}"))
        self._send_page(render_labelling_html(
            run_name=report.name or key, scoring=scoring, labeller=self.labeller,
            token=self.token, post_href=f"/run/{quote(key)}/labels",
            run_href=f"/run/{quote(key)}", items=items,
            nothing_to_label=nothing_to_label(report)))

    def _blob(self, key: str, sha256: str) -> None:
        """An image or PDF of the run, from blobs/ beside it, as the type its bytes are."""
        from referee.content._blobs import BlobStore
        from referee.content._media import sniff_media_type
        from referee.content._parts import ContentError

        try:
            data = BlobStore(self.catalog.path_of(key.partition("@")[0])).get(sha256)
        except ContentError as exc:
            raise _NotFound(str(exc)) from None
        self._send(HTTPStatus.OK, data,
                   content_type=sniff_media_type(data) or "application/octet-stream")

    def _serve_page(self, name: str) -> None:
        runs, keys = self.catalog.runs()
        windows = online_windows(runs, keys).get(name)
        if not windows:
            raise _NotFound(name)
        self._send_page(render_serve_html(serve_view(name, windows), index_href="/"))

    def _route(self) -> None:
        url = urlsplit(self.path)
        parts = [unquote(p) for p in url.path.split("/") if p]
        catalog = self.catalog
        if not parts:
            runs, keys = catalog.runs()
            self._send_page(render_index_html(runs, runs_dir=str(catalog.runs_dir), keys=keys,
                                              serves=serve_summaries(online_windows(runs, keys))))
        elif parts[0] == "serve" and len(parts) == 2:
            self._serve_page(parts[1])
        elif parts[0] == "run" and len(parts) == 2:
            key = parts[1]
            self._send_page(render_html(catalog.load(key), index_href="/",
                                        run_key=key.partition("@")[0],
                                        label_href=f"/run/{quote(key)}/label"))
        elif parts[0] == "run" and len(parts) == 3 and parts[2] == "label":
            self._labelling_page(parts[1])
        elif parts[0] == "run" and len(parts) == 3 and parts[2] == "json":
            self._send(HTTPStatus.OK, render_json(catalog.load(parts[1])),
                       content_type="application/json; charset=utf-8")
        elif parts[0] == "run" and len(parts) == 4 and parts[2] == "blob":
            self._blob(parts[1], parts[3])
        elif parts == ["compare"]:
            self._compare_page(parse_qs(url.query))
        elif parts == ["compare", "status"]:
            self._judging_status(parse_qs(url.query))
        else:
            raise _NotFound(url.path)


@dataclass
class ViewerHandle:
    """A running viewer: ``url`` opens it, ``close()`` stops it."""

    url: str
    base_url: str
    server: ThreadingHTTPServer
    thread: threading.Thread | None

    def close(self) -> None:
        if self.thread is not None:
            self.server.shutdown()
            self.thread.join(timeout=10)
        self.server.server_close()

    def __enter__(self) -> ViewerHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _make_server(target: Path | None, runs_dir: Path, host: str, port: int,
                 labeller: str | None = None) -> tuple[ThreadingHTTPServer, str, str]:
    if host not in LOOPBACK_HOSTS:
        raise ValueError(f"the viewer listens on 127.0.0.1 only; got host {host!r}")
    from referee.labels._store import default_labeller
    from referee.pairwise._jobs import PairwiseJobs

    catalog = RunCatalog(Path(runs_dir), Path(target) if target is not None else None)
    handler: Callable[..., _Handler] = type("_BoundHandler", (_Handler,), {
        "catalog": catalog, "token": secrets.token_urlsafe(32),
        "labeller": labeller or default_labeller(), "judging": PairwiseJobs()})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    base = f"http://127.0.0.1:{server.server_address[1]}"
    url = base + "/"
    if catalog.opening is not None:
        url = f"{base}/run/{quote(catalog.opening)}"
    return server, base, url


def start_viewer(target: Path | None, runs_dir: Path, host: str = "127.0.0.1",
                 port: int = 0, labeller: str | None = None) -> ViewerHandle:
    """Start the viewer in a background thread (port 0 picks a free port); labels made in it
    name ``labeller`` (default: the OS user)."""
    server, base, url = _make_server(target, runs_dir, host, port, labeller)
    thread = threading.Thread(target=server.serve_forever, name="referee-viewer", daemon=True)
    thread.start()
    return ViewerHandle(url=url, base_url=base, server=server, thread=thread)


def serve(target: Path | None, runs_dir: Path, host: str = "127.0.0.1", port: int = 0,
          labeller: str | None = None) -> None:
    """Run the viewer until Ctrl-C."""
    server, _base, url = _make_server(target, runs_dir, host, port, labeller)
    print(f"referee viewer on {url} (labels and judged comparisons go beside the runs; "
          "Ctrl-C to stop)",
          file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
