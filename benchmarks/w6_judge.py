"""W6, the judge layer alone: how much of a provider's rate limit referee's pacing uses.

    python -m benchmarks.w6_judge                          # 1,200 and 6,000 RPM, OpenAI and Anthropic wires
    python -m benchmarks.w6_judge --rpm 6000 --providers openai --seconds 20

No engine, no evaluators: ``Judge.complete`` called by many concurrent callers (every request
of the run is asked at once) against the scripted server's ``set_rate_limit``, which enforces
the limit as providers do (token buckets holding one second's worth, 429 with Retry-After,
rate-limit headers on every reply). The callers run in a child process, the server in this
one, so the two do not share an interpreter lock; the numbers are counts the server kept, so
a busy machine changes them only if it cannot keep up with the limit at all (a request costs
the client 2-7 ms of CPU; 6,000 RPM is 100 requests a second).

Reported per (limit, wire):

* ``of limit``: the rate the server admitted beyond its initial burst, over the limit. The
  server's bucket starts full, so an ideal client sends one second's worth at once and then
  exactly the limit; the rate counts from the run's first request to its last admitted one,
  so a slow start, a pause or an idle permit all lower it;
* ``429 share``: 429s over every request the server received;
* ``lost``: requests that ended in an error (must be 0);
* the endpoint's learned pace and concurrency at the end;
* the client's CPU per request and its busy share of the run: near 100%, the client process was
  CPU-bound (a busy machine, or an expensive SDK path) and the rate measures that, not pacing.

Targets (issue 11): at least 0.85 of the limit, at most 5% 429s, nothing lost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.measure import cpu_seconds
from benchmarks.peers import REPO_ROOT

# The TPM limit allows W6's tokens per request: the request rate is the limit that binds.
from benchmarks.run import W6_TOKENS_PER_REQUEST

# The wires whose providers send rate-limit headers (Gemini's does not).
WIRES = ("openai", "anthropic")
PROMPT = "Is the answer supported by the context? Answer yes or no. Request {index}."


@dataclass
class PacingResult:
    provider: str
    rpm: float
    tpm: float
    requests: int
    latency_ms: float
    received: int = 0
    admitted: int = 0
    rate_limited: int = 0
    lost: int = 0
    wall_s: float = 0.0
    span_s: float = 0.0  # first request to last admitted one, at the server
    paced_rate_per_s: float = 0.0
    of_limit: float = 0.0
    rate_limited_share: float = 0.0
    learned_rpm: float | None = None
    final_concurrency: int = 0
    peak_concurrency: int = 0
    admitted_per_s: list[int] = field(default_factory=list)  # second by second, from the first
    # The child's CPU during the run (imports excluded), and its share of the run's span: near
    # 1.0 the client was CPU-bound, and the rate measures the machine, not the pacing.
    client_cpu_ms_per_request: float = 0.0
    client_busy_share: float = 0.0

    def meets_targets(self) -> bool:
        return self.of_limit >= 0.85 and self.rate_limited_share <= 0.05 and self.lost == 0


def paced_rate(first_arrival: float, admitted_at: list[float], burst: int) -> float:
    """Requests per second admitted beyond the bucket's initial burst, from the run's first
    request to its last admitted one: an ideal client spends the burst at once and then keeps
    exactly the limit, so this is the limit's rate for it, and less for every pause, slow
    start or idle permit."""
    times = sorted(admitted_at)
    if len(times) <= burst:
        return 0.0
    span = times[-1] - first_arrival
    return (len(times) - burst) / span if span > 0 else 0.0


async def _ask_all(base_url: str, provider: str, requests: int) -> dict[str, Any]:
    from referee.judge import DEFAULT_MODELS, JudgeConfig, get_judge
    from referee.judge.client import _endpoint_for

    cfg = JudgeConfig(provider=provider, model=DEFAULT_MODELS[provider], base_url=base_url,
                      api_key="sk-loopback", cache=False)
    judge = get_judge(cfg)
    __import__(provider)  # the SDK (named as its provider)'s import is start-up, not the run
    before = cpu_seconds()
    outcomes = await asyncio.gather(
        *(judge.complete(PROMPT.format(index=i)) for i in range(requests)),
        return_exceptions=True)
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    run_cpu_s = cpu_seconds() - before
    budget = _endpoint_for(cfg).limiter
    return {"lost": len(errors), "first_error": repr(errors[0])[:300] if errors else None,
            "learned_rpm": getattr(budget, "requests_per_minute", None),
            "final_concurrency": budget.limit,
            "peak_concurrency": getattr(budget, "peak_limit", budget.limit),
            "run_cpu_s": run_cpu_s}


def _child(args: argparse.Namespace) -> int:
    result = asyncio.run(_ask_all(args.base_url, args.provider, args.requests))
    print(json.dumps(result))
    return 0


def measure(provider: str, rpm: float, requests: int, latency_ms: float = 50.0,
            timeout_s: float = 600.0) -> PacingResult:
    """One run of ``requests`` judge calls at ``rpm`` on ``provider``'s wire."""
    from referee.testing import Reply, ScriptedJudgeServer

    tpm = rpm * W6_TOKENS_PER_REQUEST
    out = PacingResult(provider=provider, rpm=rpm, tpm=tpm, requests=requests,
                       latency_ms=latency_ms)
    with ScriptedJudgeServer(reply=Reply("Yes", latency_s=latency_ms / 1000.0)) as server:
        server.set_rate_limit(rpm=rpm, tpm=tpm)
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.w6_judge", "--child", "--provider", provider,
             "--base-url", server.base_url(provider), "--requests", str(requests)],
            cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout_s)
        out.wall_s = time.monotonic() - started
        if done.returncode != 0:
            raise RuntimeError(f"the judge-layer child failed: {done.stderr[-2000:]}")
        child = json.loads(done.stdout.strip().splitlines()[-1])
        recorded = server.requests
    admitted_at = [r.arrived_at for r in recorded if not r.rate_limited]
    out.received = len(recorded)
    out.admitted = len(admitted_at)
    out.rate_limited = out.received - out.admitted
    out.lost = child["lost"]
    first = min(r.arrived_at for r in recorded)
    out.span_s = (max(admitted_at) - first) if admitted_at else 0.0
    out.paced_rate_per_s = paced_rate(first, admitted_at, burst=int(rpm / 60.0))
    out.of_limit = out.paced_rate_per_s / (rpm / 60.0)
    out.rate_limited_share = out.rate_limited / max(out.received, 1)
    out.admitted_per_s = [0] * (int(out.span_s) + 1)
    for at in admitted_at:
        out.admitted_per_s[min(int(at - first), len(out.admitted_per_s) - 1)] += 1
    out.learned_rpm = child["learned_rpm"]
    out.final_concurrency = child["final_concurrency"]
    out.peak_concurrency = child["peak_concurrency"]
    out.client_cpu_ms_per_request = 1000.0 * child["run_cpu_s"] / max(out.received, 1)
    out.client_busy_share = child["run_cpu_s"] / out.span_s if out.span_s else 0.0
    if child["first_error"]:
        print(f"  first error: {child['first_error']}", file=sys.stderr)
    return out


def format_results(results: list[PacingResult]) -> str:
    header = ("wire", "rpm", "requests", "wall s", "span s", "admitted/s", "of limit", "429s", "429 share",
              "lost", "client CPU ms/req", "client busy", "learned rpm", "concurrency end/peak", "targets")
    lines = [header]
    for r in results:
        lines.append((r.provider, f"{r.rpm:,.0f}", str(r.requests), f"{r.wall_s:.1f}", f"{r.span_s:.1f}",
                      f"{r.paced_rate_per_s:.1f}", f"{r.of_limit:.2f}", str(r.rate_limited),
                      f"{r.rate_limited_share:.1%}", str(r.lost), f"{r.client_cpu_ms_per_request:.1f}",
                      f"{r.client_busy_share:.0%}",
                      f"{r.learned_rpm:,.0f}" if r.learned_rpm else "-",
                      f"{r.final_concurrency}/{r.peak_concurrency}",
                      "met" if r.meets_targets() else "NOT met"))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    rows = ["  ".join(cell.rjust(w) for cell, w in zip(line, widths)) for line in lines]
    rows.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(rows)


def _wires(value: str) -> list[str]:
    wires = value.split(",")
    unknown = [w for w in wires if w not in WIRES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown wire(s) {unknown}; expected some of {WIRES}")
    return wires


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.w6_judge", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rpm", type=lambda s: [float(x) for x in s.split(",")],
                        default=[1200.0, 6000.0], help="limits to enforce (default 1200,6000)")
    parser.add_argument("--providers", type=_wires,
                        default=["openai", "anthropic"], help="wires (default openai,anthropic)")
    parser.add_argument("--seconds", type=float, default=15.0,
                        help="length of each run at its limit (default 15)")
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--provider", help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    parser.add_argument("--requests", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args)
    results = []
    for rpm in args.rpm:
        for provider in args.providers:
            requests = int(rpm / 60.0 * (args.seconds + 1.0))  # one burst, then `seconds` paced
            print(f"  {provider} at {rpm:,.0f} RPM: {requests} requests ...", file=sys.stderr)
            results.append(measure(provider, rpm, requests, args.latency_ms))
    print(format_results(results))
    for r in results:
        print(f"{r.provider} at {r.rpm:,.0f} RPM, admitted per second: {r.admitted_per_s}")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=1))
    return 0 if all(r.meets_targets() for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
