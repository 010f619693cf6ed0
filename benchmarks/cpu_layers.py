"""Event-loop CPU per judge request, layer by layer: where the CPU workload's millisecond goes.

    python -m benchmarks.cpu_layers                        # 3,000 requests per layer, 3 rounds
    python -m benchmarks.cpu_layers --requests 6000 --rounds 5

Each layer runs in a child process (the scripted judge server stays in this one, so the two do
not share an interpreter lock) and reports the CPU of its event loop's thread per request, after
untimed warm-up requests:

* ``aiohttp``: the HTTP client alone, posting the body referee sends (64 in flight, one session);
  the floor under any judge request made through the SDKs' aiohttp transport;
* ``judge``: ``Judge.complete`` with the reply cache off (64 callers at once; adaptive
  concurrency): the judge layer over the same client;
* ``judge-sdk``: the same with ``REFEREE_DIRECT_HTTP=0``: each request through the SDK client's
  public ``post()`` instead of the direct path (docs/judge.md);
* ``judge+cache``: the same with a fresh reply cache (every request a miss, then written);
* ``engine``: the whole ``EvalSuite`` stack (W1's four evaluators, 16 requests per case) against
  an in-process ``FakeJudge``, so no HTTP at all: engine, evaluators, QAG, judge layer, reports.

Rounds alternate the layers, so a machine that grows busier slows every layer alike. The CPU
workload (``python -m benchmarks.run --workloads CPU``) measures the whole stack over HTTP.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from benchmarks.peers import REPO_ROOT
from benchmarks.workloads import rag_cases

LAYERS = ("aiohttp", "judge", "judge-sdk", "judge+cache", "engine")
IN_FLIGHT = 64
WARMUP = 200
MODEL = "gpt-4o-mini"
# About a W1 request: the system text and one case's material, then the question.
SYSTEM = "You are a strict, impartial evaluation judge. " * 6
MATERIAL = "Policy 0-A: the Aurora desk lamp may be returned within 14 days of delivery. " * 9


def _question(index: int) -> str:
    return f"Question {index}: is every statement supported by the context?"


async def _aiohttp_layer(base_url: str, requests: int) -> float:
    import aiohttp
    import orjson

    url = base_url.rstrip("/") + "/chat/completions"
    headers = {"Authorization": "Bearer sk-loopback", "Content-Type": "application/json"}
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def post(session: aiohttp.ClientSession, index: int) -> None:
        body = {"model": MODEL, "max_tokens": 16, "temperature": 0.0,
                "messages": [{"role": "system", "content": SYSTEM},
                             {"role": "user", "content": MATERIAL + _question(index)}]}
        async with gate, session.post(url, data=orjson.dumps(body), headers=headers) as reply:
            await reply.read()

    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(post(session, -i - 1) for i in range(WARMUP)))
        started = time.thread_time()
        await asyncio.gather(*(post(session, i) for i in range(requests)))
        return time.thread_time() - started


async def _judge_layer(base_url: str, requests: int, cache: bool) -> float:
    from referee.judge import JudgeConfig, get_judge
    from referee.judge.reply_cache import flush_caches

    with tempfile.TemporaryDirectory(prefix="referee-cpu-layers-") as folder:
        judge = get_judge(JudgeConfig(provider="openai", model=MODEL, base_url=base_url,
                                      api_key="sk-loopback", cache=cache,
                                      cache_path=f"{folder}/judge.sqlite3"))

        def ask(index: int) -> Any:
            return judge.complete(_question(index), system=SYSTEM, prompt_prefix=MATERIAL)

        await asyncio.gather(*(ask(-i - 1) for i in range(WARMUP)))
        started = time.thread_time()
        await asyncio.gather(*(ask(i) for i in range(requests)))
        spent = time.thread_time() - started
        flush_caches()  # the writer thread is done with the file before it is removed
        return spent


def _engine_layer(requests: int) -> float:
    from referee import EvalCase, EvalSuite, configure
    from referee.evaluators import AnswerAccuracy, Faithfulness, Hallucination, Relevance
    from referee.testing import FakeJudge

    fake = FakeJudge("Yes")
    configure(fake.judge_config())

    def run(count: int, start: int) -> None:
        data = rag_cases(count, start=start)
        outputs = {c["input"]: c["output"] for c in data}
        suite = EvalSuite("cpu-layers")
        suite.add_cases([EvalCase(input=c["input"], context=c["context"],
                                  expected_output=c["expected_output"]) for c in data])
        suite.add_evaluators(Faithfulness(), Hallucination(), Relevance(), AnswerAccuracy())
        with tempfile.TemporaryDirectory(prefix="referee-cpu-layers-runs-") as runs_dir:
            suite.run(lambda prompt: outputs[prompt], verbose=False, runs_dir=runs_dir)

    run(WARMUP // 16, start=1_000_000)
    started = time.thread_time()
    run(requests // 16, start=0)
    return time.thread_time() - started


def _child(layer: str, base_url: str, requests: int) -> float:
    """CPU seconds of the event loop's thread for ``requests`` requests of ``layer``."""
    if layer == "aiohttp":
        return asyncio.run(_aiohttp_layer(base_url, requests))
    if layer in ("judge", "judge-sdk", "judge+cache"):
        return asyncio.run(_judge_layer(base_url, requests, cache=layer == "judge+cache"))
    return _engine_layer(requests)


def measure(layer: str, base_url: str, requests: int) -> float:
    """Milliseconds of event-loop CPU per request for one run of ``layer`` in a child."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.cpu_layers", "--child", layer, "--base-url", base_url,
         "--requests", str(requests)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "REFEREE_DIRECT_HTTP": "0" if layer == "judge-sdk" else "1"})
    if done.returncode != 0:
        raise RuntimeError(f"the {layer} child failed: {done.stderr[-2000:]}")
    cpu_s = json.loads(done.stdout.strip().splitlines()[-1])["cpu_s"]
    return cpu_s / requests * 1000.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--layers", default=",".join(LAYERS),
                        help=f"comma-separated subset of {','.join(LAYERS)}")
    parser.add_argument("--child", choices=LAYERS, help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps({"cpu_s": _child(args.child, args.base_url, args.requests)}))
        return 0

    from referee.testing import ScriptedJudgeServer

    layers = [name for name in args.layers.split(",") if name]
    unknown = sorted(set(layers) - set(LAYERS))
    if unknown:
        parser.error(f"--layers: unknown {', '.join(unknown)}; expected some of {', '.join(LAYERS)}")
    per_layer: dict[str, list[float]] = {name: [] for name in layers}
    # No prompt-cache emulation: the server's own bookkeeping is not what is measured here.
    with ScriptedJudgeServer("Yes", prompt_cache=False) as server:
        for _ in range(args.rounds):
            for name in layers:
                per_layer[name].append(measure(name, server.base_url("openai"), args.requests))
                server.reset_record()  # the server keeps every request; a long run would swell
    print(f"event-loop CPU per judge request, ms ({args.requests:,} requests per run, "
          f"{IN_FLIGHT} in flight, {args.rounds} round(s), layers alternating)")
    print(f"{'layer':<12} {'median':>7} {'min':>6} {'max':>6}  runs")
    for name, values in per_layer.items():
        runs = " ".join(f"{v:.3f}" for v in values)
        print(f"{name:<12} {statistics.median(values):>7.3f} {min(values):>6.3f} "
              f"{max(values):>6.3f}  {runs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
