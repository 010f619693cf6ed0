"""referee, multivon-eval and deepeval with a real judge: llama.cpp serving SmolLM2-135M-Instruct.

    python -m benchmarks.real_judge --cases 10 --json benchmarks/results/real-judge.json
    python -m benchmarks.real_judge --systems referee,referee-batched --cases 4   # no peers

Every system runs Faithfulness over the same cases (benchmarks.workloads.real_judge_cases: half
of the answers right, half wrong) in a fresh subprocess, against its own fresh real llama.cpp
server (referee.testing.LlamaJudgeServer: 1 thread, 4 slots, SmolLM2-135M-Instruct).
Requests pass through a loopback relay (the scripted judge server forwarding to the real one),
which counts them and the prompt tokens each carried; the server's own counters say how many
prompt tokens it evaluated, the rest being prefix-cache hits. Per system: wall time, requests,
prompt tokens sent and evaluated, how many evaluations got a score, judge errors, UNKNOWN
verdicts (referee's question-level count), and the pass rate on right and on wrong answers:
a judge whose verdicts mean something passes the first and fails the second.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.peers import DEFAULT_VENV, REPO_ROOT, ensure_peers, venv_python
from referee.testing import LlamaJudgeServer, ScriptedJudgeServer
from referee.testing.llama_server import Relay

SYSTEMS = ("referee", "referee-batched", "referee-case-batched", "multivon-eval", "deepeval")
_REFEREE_BATCH = {"referee": "false", "referee-batched": "true", "referee-case-batched": "case"}


def run_system(system: str, cases: int, relay_url: str, slots: int, python: Path,
               timeout_s: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="referee-real-judge-") as workdir:
        out = Path(workdir) / "out.json"
        command = [str(python), "-m", "benchmarks.systems.real_judge_runner",
                   "--system", "referee" if system in _REFEREE_BATCH else system,
                   "--batch", _REFEREE_BATCH.get(system, "false"), "--cases", str(cases),
                   "--base-url", relay_url, "--slots", str(slots), "--out", str(out)]
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "REFEREE_CACHE": "0"}
        done = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True,
                              timeout=timeout_s)
        if done.returncode != 0 or not out.exists():
            return {"failed": f"exit {done.returncode}: {done.stderr.strip()[-600:]}"}
        return json.loads(out.read_text())


def summarize(system: str, measured: dict[str, Any], requests: int, sent: int, cached: int,
              evaluated: float) -> dict[str, Any]:
    row: dict[str, Any] = {"system": system, "requests": requests, "prompt_tokens_sent": sent,
                           "prompt_tokens_cached": cached, "prompt_tokens_evaluated": evaluated}
    if "failed" in measured:
        return {**row, "failed": measured["failed"]}
    evaluations = measured["evaluations"]
    total = len(evaluations)
    right = [e for e in evaluations if e["correct"]]
    wrong = [e for e in evaluations if not e["correct"]]
    row.update(
        wall_s=round(measured["wall_s"], 1), evaluations=total,
        scored_rate=sum(e["scored"] for e in evaluations) / total,
        judge_error_rate=sum(e["judge_error"] for e in evaluations) / total,
        pass_rate_right=sum(bool(e["passed"]) for e in right) / max(len(right), 1),
        pass_rate_wrong=sum(bool(e["passed"]) for e in wrong) / max(len(wrong), 1))
    errors = [e["error"] for e in evaluations if e.get("error")]
    if errors:
        row["first_error"] = errors[0]
    if all("asked" in e for e in evaluations):
        asked = sum(e["asked"] for e in evaluations)
        unknown = sum(e["unknown"] for e in evaluations)
        row.update(questions=asked, unknown_rate=unknown / asked,
                   parse_rate=(asked - unknown) / asked)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10)
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV, help="peer virtualenv")
    parser.add_argument("--timeout", type=float, default=1800.0, help="per system, seconds")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        parser.error(f"unknown system(s) {unknown}; expected some of {', '.join(SYSTEMS)}")
    peers = [s for s in systems if s not in _REFEREE_BATCH]
    peer_python = ensure_peers(peers, args.venv, log=lambda m: print(m, file=sys.stderr)) \
        if peers else None

    rows = []
    for system in systems:
        python = Path(sys.executable) if system in _REFEREE_BATCH else (
            peer_python or venv_python(args.venv))
        # A fresh server per system: llama.cpp keeps earlier prompts in a host-memory cache, and
        # a system must not find another's prefixes there.
        with LlamaJudgeServer() as real:
            relay = Relay(real)
            with ScriptedJudgeServer(relay, prompt_cache=False) as proxy:
                measured = run_system(system, args.cases, proxy.base_url(), real.parallel,
                                      python, args.timeout)
                evaluated = real.metrics()["prompt_tokens_total"]
                replies = list(relay.replies.values())
                row = summarize(system, measured, proxy.request_count,
                                sum(r.prompt_tokens for r in replies),
                                sum(r.cached_tokens for r in replies), evaluated)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"cases": args.cases, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
