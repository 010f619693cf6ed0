"""Benchmark referee against multivon-eval and deepeval on the same workloads and judge.

    python -m benchmarks.run                     # everything (tens of minutes on 2 cores)
    python -m benchmarks.run --quick             # small sizes, a few minutes
    python -m benchmarks.run --workloads W1,W3 --systems referee,multivon-eval --latency-ms 50

One scripted judge (referee.testing.ScriptedJudgeServer) runs on 127.0.0.1 in this process and
answers every system's own prompts (benchmarks.replies) after a fixed latency. Each
(workload, system) pair runs in a fresh subprocess, so peak RSS is that system's alone; judge
requests and tokens are counted at the server. The peers are installed on first use into a
separate virtualenv (benchmarks.peers); referee runs in the current interpreter.

Workloads: W1 RAG suite (Faithfulness, Hallucination, Relevance, AnswerAccuracy over cases with
context and a reference answer); W2 agent suite (trajectory IN_ORDER with args, tool-name match,
ROUGE, keywords; no judge); W3 W1 re-run with the judge cache warm; W4 W1 at several sizes;
W5 long-context RAG (~1,500 tokens of context per case), the judge bill under each provider's
prompt-caching rules (referee runs once per judge wire: OpenAI, Anthropic, Gemini); W6 W1
against a judge that enforces a rate limit (1,200 and 6,000 requests per minute).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmarks.billing import BILL_HEADER, BILLING_PROVIDERS, Bill, bill, bill_columns
from benchmarks.measure import read_result
from benchmarks.peers import DEFAULT_VENV, REPO_ROOT, ensure_peers
from benchmarks.replies import reply_for

SYSTEMS = ("referee", "referee-batched", "referee-case-batched", "multivon-eval", "deepeval")
WORKLOADS = ("W1", "W2", "W3", "W4", "W5", "W6", "CPU")
# W6's enforced limits: requests per minute, and as many tokens per minute as this many tokens
# per request allow (a little above what referee's W1 requests need, so both limits matter).
W6_TOKENS_PER_REQUEST = 250

# How many judge requests each system keeps in flight at its default settings; the ideal time
# of a judge-bound run is requests x latency / this.
DEFAULT_REQUEST_CONCURRENCY = {
    "referee": 64,            # the adaptive ceiling per endpoint (JudgeConfig.max_concurrency unset)
    "referee-batched": 64,
    "referee-case-batched": 64,
    "multivon-eval": 8,       # suite.run workers=min(8, cases); one call at a time per worker
    "deepeval": 20,           # AsyncConfig.max_concurrent (test cases in flight)
}
_RUNNER_MODULE = {
    "referee": "benchmarks.systems.referee_runner",
    "referee-batched": "benchmarks.systems.referee_runner",
    "referee-case-batched": "benchmarks.systems.referee_runner",
    "multivon-eval": "benchmarks.systems.multivon_eval",
    "deepeval": "benchmarks.systems.deepeval_runner",
}
# deepeval has no deterministic ROUGE/keyword/argument checks outside its tracing layer.
_SUPPORTS_AGENT = {"referee", "multivon-eval"}


@dataclass
class Sizes:
    rag: int = 200
    agent: int = 2000
    scaling: tuple[int, ...] = (50, 200, 1000)
    long_rag: int = 100
    # W6: (enforced requests per minute, cases), each about 16 s of requests at the limit.
    rate_limited: tuple[tuple[int, int], ...] = ((1200, 20), (6000, 100))

    @classmethod
    def quick(cls) -> Sizes:
        return cls(rag=20, agent=200, scaling=(10, 20, 50), long_rag=10,
                   rate_limited=((1200, 10), (6000, 30)))


@dataclass
class Row:
    workload: str
    system: str
    cases: int
    wall_s: float
    cpu_s: float
    judge_requests: int
    judge_tokens: int
    max_in_flight: int
    rss_peak_kb: int
    rss_baseline_kb: int
    report_bytes: int
    evaluations: int
    passed_evaluations: int
    errored_evaluations: int
    settings: str
    criteria_only_evaluations: int = 0
    criteria_only_cpu_s: float = 0.0
    ideal_s: float | None = None
    efficiency: float | None = None
    errored_cases: int = 0
    # W6: the enforced limits, the 429s the server sent, and how much of the limit was used.
    limit_rpm: float | None = None
    limit_tpm: float | None = None
    rate_limited: int = 0
    throughput: float | None = None
    # CPU: the steady-state CPU time of the referee process per judge request it made, and of
    # its event-loop thread alone (the process's figure less the other threads' work).
    cpu_ms_per_request: float | None = None
    loop_cpu_ms_per_request: float | None = None
    ratio_to_referee: float | None = None
    notes: list[str] = field(default_factory=list)
    error: str | None = None  # the run produced no measurement: why
    bill: Bill | None = None  # the judge bill (benchmarks.billing), counted at the server

    @property
    def rss_per_case_kb(self) -> float:
        return max(self.rss_peak_kb - self.rss_baseline_kb, 0) / max(self.cases, 1)

    @property
    def report_per_case_bytes(self) -> float:
        return self.report_bytes / max(self.cases, 1)

    @property
    def evaluations_per_cpu_s(self) -> float:
        """(case, criterion) evaluations per CPU-second of the whole run: W2's per-core rate."""
        return self.evaluations / self.cpu_s if self.cpu_s > 0 else 0.0

    @property
    def criteria_only_per_cpu_s(self) -> float:
        if self.criteria_only_cpu_s <= 0:
            return 0.0
        return self.criteria_only_evaluations / self.criteria_only_cpu_s


class CountingResponder:
    """The server's reply callback: the scripted text after the latency, tokens tallied."""

    def __init__(self, latency_s: float) -> None:
        from referee.testing.script import Reply, token_counts

        self._reply_cls, self._token_counts = Reply, token_counts
        self.latency_s = latency_s
        self._lock = threading.Lock()
        self.tokens = 0
        self.failures: list[str] = []

    def __call__(self, request: Any) -> Any:
        try:
            text = reply_for(request.body, system=request.system, prompt=request.prompt)
        except ValueError as exc:
            # A reply the system cannot parse would benchmark its error path; record it loudly.
            with self._lock:
                self.failures.append(str(exc)[:300])
            text = "unscripted prompt"
        reply = self._reply_cls(text=text, latency_s=self.latency_s)
        used_in, used_out = self._token_counts(reply, request)
        with self._lock:
            self.tokens += used_in + used_out
        return reply

    def reset(self) -> None:
        with self._lock:
            self.tokens = 0
            self.failures.clear()


class Harness:
    def __init__(self, *, latency_ms: float, sizes: Sizes, peer_python: Path | None,
                 timeout_s: float, log: Callable[[str], None],
                 profile_dir: Path | None = None, structured_output: bool = False) -> None:
        from referee.testing import ScriptedJudgeServer

        self.sizes = sizes
        self.latency_s = latency_ms / 1000.0
        self.peer_python = peer_python
        self.timeout_s = timeout_s
        self.log = log
        self.profile_dir = profile_dir
        self.structured_output = structured_output
        self.responder = CountingResponder(self.latency_s)
        self.server = ScriptedJudgeServer(reply=self.responder)
        self.workdir = Path(tempfile.mkdtemp(prefix="referee-bench-"))
        self.rows: list[Row] = []
        self._runs = 0
        # W1 runs referee with its default cache on; W3 re-runs against what W1 wrote.
        self._warm_caches: dict[tuple[str, int], Path] = {}

    def __enter__(self) -> Harness:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _python_for(self, system: str) -> str:
        if system.startswith("referee"):
            return sys.executable
        if self.peer_python is None:
            raise RuntimeError(f"{system} needs the benchmark virtualenv (do not pass --no-install "
                               "without an existing one)")
        return str(self.peer_python)

    def run_one(self, workload: str, system: str, kind: str, cases: int, *,
                cache_dir: Path | None = None, record: bool = True,
                provider: str = "openai", warmup_cases: int = 0) -> Row:
        self._runs += 1
        tag = f"{workload}-{system}-{cases}-{self._runs}"
        report, out = self.workdir / f"{tag}.report.json", self.workdir / f"{tag}.out.json"
        cwd = self.workdir / tag
        cwd.mkdir()
        command = [self._python_for(system), "-m", _RUNNER_MODULE[system], "--workload", kind,
                   "--cases", str(cases), "--base-url", self.server.base_url(provider),
                   "--report", str(report), "--out", str(out)]
        if provider != "openai":
            command += ["--provider", provider]
        if system == "referee-case-batched":
            command.append("--case-batched")
        if cache_dir is not None:
            command += ["--cache-dir", str(cache_dir)]
        if system == "referee-batched":
            command.append("--batched")
        if warmup_cases:
            command += ["--warmup-cases", str(warmup_cases)]
        if self.structured_output and system.startswith("referee"):
            command.append("--structured-output")
        if self.profile_dir is not None and system.startswith("referee"):
            self.profile_dir.mkdir(parents=True, exist_ok=True)
            command += ["--profile", str((self.profile_dir / f"{tag}.prof").resolve())]
        env = {k: v for k, v in os.environ.items()
               if k not in ("OPENAI_BASE_URL", "JUDGE_PROVIDER", "JUDGE_MODEL", "REFEREE_CACHE",
                            "REFEREE_CACHE_DIR", "MULTIVON_JUDGE_CACHE", "MULTIVON_CACHE_DIR")}
        env.update(PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")])),
                   OPENAI_API_KEY="sk-loopback", PYTHONHASHSEED="0")
        self.server.reset_record()
        self.server.clear_prompt_cache()  # every run starts with the provider's cache cold
        self.responder.reset()
        self.log(f"  {workload:<3} {system:<16} {cases:>5} cases ...")
        try:
            done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                                  timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            return self._failed(workload, system, cases, f"no result within {self.timeout_s:g}s",
                                record)
        if done.returncode != 0:
            # One system failing must not cost the other rows: report it and carry on.
            self.log(done.stderr[-3000:])
            last = next((line for line in reversed(done.stderr.splitlines()) if line.strip()), "")
            return self._failed(workload, system, cases,
                                f"exit status {done.returncode}: {last.strip()[:160]}", record)
        data = read_result(out)
        row = Row(workload=workload, system=system, cases=cases, wall_s=data["wall_s"],
                  cpu_s=data["cpu_s"], judge_requests=self.server.request_count,
                  judge_tokens=self.responder.tokens, max_in_flight=self.server.max_in_flight,
                  rss_peak_kb=data["rss_peak_kb"], rss_baseline_kb=data["rss_baseline_kb"],
                  report_bytes=data["report_bytes"], evaluations=data["evaluations"],
                  passed_evaluations=data["passed_evaluations"],
                  errored_evaluations=data["errored_evaluations"], settings=data["settings"],
                  errored_cases=data.get("errored_cases", 0),
                  cpu_ms_per_request=(1000 * data["cpu_s"] / data["live_judge_requests"]
                                      if data.get("live_judge_requests") else None),
                  loop_cpu_ms_per_request=(
                      1000 * data["thread_cpu_s"] / data["live_judge_requests"]
                      if data.get("live_judge_requests") and data.get("thread_cpu_s") else None),
                  rate_limited=self.server.rate_limited_count,
                  criteria_only_evaluations=data.get("criteria_only_evaluations", 0),
                  criteria_only_cpu_s=data.get("criteria_only_cpu_s", 0.0),
                  notes=list(data.get("notes", [])), bill=bill(self.server.requests))
        if self.responder.failures:
            row.notes.append(f"{len(self.responder.failures)} unscripted prompt(s): "
                             f"{self.responder.failures[0]}")
        if kind != "agent" and row.judge_requests:
            row.ideal_s = (row.judge_requests * self.latency_s
                           / DEFAULT_REQUEST_CONCURRENCY[system])
            row.efficiency = row.ideal_s / row.wall_s if row.wall_s > 0 else None
        if record:
            self.rows.append(row)
        return row

    def _failed(self, workload: str, system: str, cases: int, why: str, record: bool) -> Row:
        self.log(f"  {workload:<3} {system:<16} FAILED: {why}")
        row = Row(workload=workload, system=system, cases=cases, wall_s=0.0, cpu_s=0.0,
                  judge_requests=self.server.request_count, judge_tokens=self.responder.tokens,
                  max_in_flight=self.server.max_in_flight, rss_peak_kb=0, rss_baseline_kb=0,
                  report_bytes=0, evaluations=0, passed_evaluations=0, errored_evaluations=0,
                  settings="", error=why)
        if record:
            self.rows.append(row)
        return row

    # Workloads ---------------------------------------------------------------------------
    def w1(self, systems: list[str]) -> None:
        for system in systems:
            cache = self.fresh_cache(system) if system.startswith("referee") else None
            self.run_one("W1", system, "rag", self.sizes.rag, cache_dir=cache)
            if cache is not None:
                self._warm_caches[(system, self.sizes.rag)] = cache

    def w2(self, systems: list[str]) -> None:
        for system in systems:
            if system in _SUPPORTS_AGENT:
                self.run_one("W2", system, "agent", self.sizes.agent)
            elif system == "referee-batched":
                self.log(f"  W2  {system:<16} skipped (batching changes judged evaluators only)")
            else:
                self.log(f"  W2  {system:<16} skipped (no deterministic agent criteria)")

    def w3(self, systems: list[str]) -> None:
        for system in systems:
            cache = self._warm_caches.get((system, self.sizes.rag))
            if cache is None:
                cache = self.fresh_cache(system)
                self.log(f"  W3  {system:<16} filling its judge cache (not reported)")
                self.run_one("W3", system, "rag", self.sizes.rag, cache_dir=cache, record=False)
            self.run_one("W3", system, "rag", self.sizes.rag, cache_dir=cache)

    def w4(self, systems: list[str]) -> None:
        for size in self.sizes.scaling:
            for system in systems:
                # W4 at W1's size is W1 itself: reuse that measurement instead of repeating it.
                same = next((r for r in self.rows if r.workload == "W1" and r.system == system
                             and r.cases == size), None)
                if same is not None:
                    self.rows.append(replace(same, workload="W4",
                                             notes=same.notes + ["W4 row reused from W1"]))
                    continue
                cache = self.fresh_cache(system) if system.startswith("referee") else None
                self.run_one("W4", system, "rag", size, cache_dir=cache)

    def w5(self, systems: list[str]) -> None:
        """Long-context RAG, judge cache off: what each system's judge bill is per case.

        referee runs once per judge wire, so that each provider's caching rules meet the
        requests referee really sends that provider (Anthropic's cache_control, for one); the
        row shows the OpenAI run's counts with each provider's column from its own run.
        """
        for system in systems:
            if not system.startswith("referee"):
                self.run_one("W5", system, "long-rag", self.sizes.long_rag)
                continue
            runs = {p: self.run_one("W5", system, "long-rag", self.sizes.long_rag,
                                    record=False, provider=p) for p in BILLING_PROVIDERS}
            row = runs["openai"]
            if any(r.error is not None or r.bill is None for r in runs.values()):
                failed = next(r for r in runs.values() if r.error is not None or r.bill is None)
                self.rows.append(failed)
                continue
            assert row.bill is not None
            for provider, run in runs.items():
                assert run.bill is not None
                for attr in ("cached_tokens", "write_tokens", "billable_input_tokens", "cost_usd"):
                    getattr(row.bill, attr)[provider] = getattr(run.bill, attr)[provider]
                if provider != "openai":
                    row.notes.append(f"W5 {provider} column from a run on the {provider} wire "
                                     f"({run.judge_requests} requests, "
                                     f"{run.passed_evaluations}/{run.evaluations} passed)")
            self.rows.append(row)

    def w6(self, systems: list[str]) -> None:
        for rpm, cases in self.sizes.rate_limited:
            tpm = rpm * W6_TOKENS_PER_REQUEST
            for system in systems:
                self.server.set_rate_limit(rpm=rpm, tpm=tpm)
                try:
                    cache = self.fresh_cache(system) if system.startswith("referee") else None
                    row = self.run_one("W6", system, "rag", cases, cache_dir=cache)
                finally:
                    self.server.set_rate_limit()
                rate_limited_throughput(row, rpm, tpm)

    def cpu(self, systems: list[str]) -> None:
        """Event-loop CPU per judge request at steady state: W1 after untimed warm-up cases, so
        imports and client set-up are not counted. referee systems only (the runner's
        --warmup-cases); the W1 rows give every system's whole-run CPU."""
        for system in systems:
            if system.startswith("referee"):
                self.run_one("CPU", system, "rag", self.sizes.rag, cache_dir=self.fresh_cache(system),
                             warmup_cases=10)

    def fresh_cache(self, system: str) -> Path:
        path = Path(tempfile.mkdtemp(prefix=f"cache-{system}-", dir=self.workdir))
        return path

    def finish(self) -> list[Row]:
        referee_wall = {(r.workload, r.cases): r.wall_s for r in self.rows
                        if r.system == "referee" and r.error is None}
        for row in self.rows:
            base = referee_wall.get((row.workload, row.cases))
            if base and row.error is None:
                row.ratio_to_referee = row.wall_s / base
        return self.rows


def rate_limited_throughput(row: Row, rpm: float, tpm: float) -> None:
    """W6: the share of the binding limit a run used, and its ideal time at that limit.

    Only requests the server let through count (``judge_requests`` minus the 429s); tokens are
    those the server billed. The ideal is the time the binding limit needs for that work."""
    row.limit_rpm, row.limit_tpm = rpm, tpm
    admitted = row.judge_requests - row.rate_limited
    row.ideal_s = max(admitted / (rpm / 60.0), row.judge_tokens / (tpm / 60.0))
    if row.error is None and row.wall_s > 0:
        row.throughput = row.ideal_s / row.wall_s
        row.efficiency = row.throughput


def format_rate_limited(rows: list[Row]) -> str:
    header = ("system", "cases", "limit rpm/tpm", "wall s", "ideal s", "wall/ideal",
              "of limit", "requests", "429s", "429 share", "cases lost")
    lines = [header]
    for r in rows:
        if r.workload != "W6":
            continue
        sent = max(r.judge_requests, 1)
        lines.append((r.system, str(r.cases), f"{r.limit_rpm:,.0f}/{r.limit_tpm:,.0f}",
                      f"{r.wall_s:.2f}" if r.error is None else "FAILED", _fmt(r.ideal_s, ".2f"),
                      _fmt(r.wall_s / r.ideal_s if r.ideal_s and r.error is None else None, ".2f"),
                      _fmt(r.throughput, ".2f"), str(r.judge_requests), str(r.rate_limited),
                      f"{r.rate_limited / sent:.1%}",
                      str(r.errored_cases) if r.error is None else "-"))
    if len(lines) == 1:
        return ""
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = ["W6: rate-limited judge (the server enforces rpm and tpm as token buckets and answers "
           "429 with Retry-After and rate-limit headers); 'of limit' = ideal / wall"]
    for i, line in enumerate(lines):
        out.append("  ".join(cell.ljust(w) if j == 0 else cell.rjust(w)
                             for j, (cell, w) in enumerate(zip(line, widths))))
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def format_table(rows: list[Row], latency_ms: float) -> str:
    """The main table; W6 and CPU rows have their own (format_rate_limited, main)."""
    rows = [r for r in rows if r.workload not in ("W6", "CPU")]
    header = ("workload", "system", "cases", "wall s", "x referee", "judge req", "judge tokens",
              "in flight", "ideal s", "efficiency", "peak RSS MB", "RSS/case KB",
              "report KB", "report/case B", "evals/CPU-s", "criteria-only/CPU-s", "passed/evals",
              *BILL_HEADER)
    lines = [header]
    for r in rows:
        if r.error is not None:
            lines.append((r.workload, r.system, str(r.cases), "FAILED")
                         + ("-",) * (len(header) - 4))
            continue
        lines.append((
            r.workload, r.system, str(r.cases), f"{r.wall_s:.2f}", _fmt(r.ratio_to_referee, ".2f"),
            str(r.judge_requests), str(r.judge_tokens), str(r.max_in_flight),
            _fmt(r.ideal_s, ".2f"), _fmt(r.efficiency, ".2f"), f"{r.rss_peak_kb / 1024:.0f}",
            f"{r.rss_per_case_kb:.1f}", f"{r.report_bytes / 1024:.0f}",
            f"{r.report_per_case_bytes:.0f}",
            f"{r.evaluations_per_cpu_s:,.0f}" if r.workload == "W2" else "-",
            f"{r.criteria_only_per_cpu_s:,.0f}" if r.criteria_only_evaluations else "-",
            f"{r.passed_evaluations}/{r.evaluations}" + (f" ({r.errored_evaluations} err)"
                                                          if r.errored_evaluations else ""),
            *bill_columns(r.bill if r.judge_requests else None, r.cases),
        ))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = [f"judge latency {latency_ms:g} ms per request; ideal = requests x latency / "
           f"the system's default request concurrency"]
    for i, line in enumerate(lines):
        out.append("  ".join(cell.ljust(w) if j < 2 else cell.rjust(w)
                             for j, (cell, w) in enumerate(zip(line, widths))))
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    notes = sorted({f"{r.system}: {n}" for r in rows for n in r.notes}
                   | {f"{r.system}: {r.settings}" for r in rows if r.settings}
                   | {f"{r.system}: {r.workload} at {r.cases} cases FAILED, {r.error}"
                      for r in rows if r.error is not None})
    out.append("")
    out.extend(f"* {n}" for n in notes)
    return "\n".join(out)


def run_benchmarks(workloads: list[str], systems: list[str], *, latency_ms: float = 50.0,
                   sizes: Sizes | None = None, install: bool = True,
                   venv_dir: Path = DEFAULT_VENV, timeout_s: float = 3600.0,
                   log: Callable[[str], None] = lambda m: print(m, file=sys.stderr),
                   profile_dir: Path | None = None,
                   structured_output: bool = False) -> list[Row]:
    """Run the chosen workloads for the chosen systems; returns one Row per measured run."""
    bad = [w for w in workloads if w not in WORKLOADS] + [s for s in systems if s not in SYSTEMS]
    if bad:
        raise ValueError(f"unknown workload/system {bad}; workloads: {', '.join(WORKLOADS)}; "
                         f"systems: {', '.join(SYSTEMS)}")
    peers = [s for s in systems if not s.startswith("referee")]
    peer_python = None
    if peers:
        peer_python = ensure_peers(peers, venv_dir, log=log) if install else \
            Path(venv_dir) / "bin" / "python"
    with Harness(latency_ms=latency_ms, sizes=sizes or Sizes(), peer_python=peer_python,
                 timeout_s=timeout_s, log=log, profile_dir=profile_dir,
                 structured_output=structured_output) as harness:
        for workload in workloads:
            getattr(harness, workload.lower())(systems)
        return harness.finish()


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes (W1 20, W2 200, W4 10/20/50)")
    parser.add_argument("--latency-ms", type=float, default=50.0, help="judge latency (default 50)")
    parser.add_argument("--workloads", type=_csv, default=list(WORKLOADS),
                        help="comma-separated subset of W1,W2,W3,W4,W5,W6,CPU (default all)")
    parser.add_argument("--systems", type=_csv, default=list(SYSTEMS),
                        help=f"comma-separated subset of {','.join(SYSTEMS)} (default all)")
    parser.add_argument("--rag-cases", type=int, help="W1/W3 size (default 200)")
    parser.add_argument("--agent-cases", type=int, help="W2 size (default 2000)")
    parser.add_argument("--w4-sizes", type=_csv, help="W4 sizes (default 50,200,1000)")
    parser.add_argument("--long-rag-cases", type=int, help="W5 size (default 100)")
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV, help="peer virtualenv")
    parser.add_argument("--no-install", action="store_true", help="use the peer venv as it is")
    parser.add_argument("--timeout", type=float, default=3600.0, help="per-run limit in seconds")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="referee runs only: write a cProfile of each timed run, on a CPU "
                             "clock, into DIR (read with python -m pstats); profiling slows the run")
    parser.add_argument("--structured-output", action="store_true",
                        help="referee runs only: send batched requests' reply schema, as "
                             "JudgeConfig(structured_output=True) does (billed as input)")
    args = parser.parse_args(argv)

    sizes = Sizes.quick() if args.quick else Sizes()
    if args.rag_cases:
        sizes.rag = args.rag_cases
    if args.agent_cases:
        sizes.agent = args.agent_cases
    if args.long_rag_cases:
        sizes.long_rag = args.long_rag_cases
    if args.w4_sizes:
        sizes.scaling = tuple(int(s) for s in args.w4_sizes)
    try:
        rows = run_benchmarks(args.workloads, args.systems, latency_ms=args.latency_ms,
                              sizes=sizes, install=not args.no_install, venv_dir=args.venv,
                              timeout_s=args.timeout, profile_dir=args.profile,
                              structured_output=args.structured_output)
    except (ValueError, RuntimeError) as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 2
    print(format_table(rows, args.latency_ms))
    for r in rows:
        if r.workload == "CPU" and r.cpu_ms_per_request is not None:
            timed = round(r.cpu_s * 1000 / r.cpu_ms_per_request) if r.cpu_ms_per_request else 0
            print(f"\nCPU: {r.system}: {r.cpu_ms_per_request:.2f} ms of process CPU per judge "
                  f"request at steady state ({timed:,} requests, {r.cases} cases after "
                  f"10 warm-up cases, {r.cpu_s:.2f} s CPU)")
            if r.loop_cpu_ms_per_request is not None:
                print(f"CPU: {r.system}: {r.loop_cpu_ms_per_request:.2f} ms of it on the event "
                      f"loop's own thread (the rest: other threads, i.e. the sync model calls "
                      f"and the judge cache's writer)")
    rate_limited = format_rate_limited(rows)
    if rate_limited:
        print("\n" + rate_limited)
    if args.json:
        args.json.write_text(json.dumps(
            [asdict(r) | {"rss_per_case_kb": r.rss_per_case_kb,
                          "report_per_case_bytes": r.report_per_case_bytes,
                          "evaluations_per_cpu_s": r.evaluations_per_cpu_s,
                          "criteria_only_per_cpu_s": r.criteria_only_per_cpu_s} for r in rows],
            indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
