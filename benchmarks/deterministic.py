"""Deterministic checks on large inputs: edit distance speed, and what they do to the event loop.

    python -m benchmarks.deterministic                 # 5,000 characters, 400 tool calls
    python -m benchmarks.deterministic --chars 20000 --calls 1000 --json results.json

1. Edit distance of two strings of ``--chars`` characters: the pure-Python two-row table referee
   used before (kept here as the baseline, timed once) against ``referee.evaluators.
   deterministic.levenshtein_distance`` (rapidfuzz, best of ``--repeat``). Both must give the
   same distance.
2. Event-loop stall: ``--cases`` large cases scored by ``Levenshtein`` and an IN_ORDER
   trajectory over ``--calls`` tool calls (an alignment in pure Python, quadratic in the calls),
   while a heartbeat task asks for the loop every millisecond. The longest heartbeat gap is how
   long every other case, and its judge calls, was held up. Measured with large checks off the
   loop (referee's default) and forced inline. Off the loop the check still holds the GIL, so
   the loop gets it back at the interpreter's switch interval (5 ms), not at once.

No judge and no network: this measures referee's own CPU work. Standard library plus referee.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import string
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from referee import EvalCase, ExecutionResult, ToolCall
from referee.config import CriterionConfig, MatchType
from referee.criteria.base import SyncCriterion
from referee.criteria.trajectory import TrajectoryMatchCriterion
from referee.evaluators.deterministic import Levenshtein, levenshtein_distance


def python_levenshtein(a: str, b: str) -> int:
    """The pure-Python edit distance referee shipped before rapidfuzz: the baseline."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        current = [i]
        for j, char_b in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1,
                               previous[j - 1] + (char_a != char_b)))
        previous = current
    return previous[-1]


def similar_strings(chars: int, seed: int = 7) -> tuple[str, str]:
    """Two texts that share most of their characters, as an answer and its reference do."""
    rng = random.Random(seed)
    alphabet = string.ascii_lowercase + "     "
    a = "".join(rng.choice(alphabet) for _ in range(chars))
    b = list(a)
    for _ in range(chars // 20):
        b[rng.randrange(chars)] = rng.choice(alphabet)
    return a, "".join(b)


def best_of(repeat: int, fn: Any, *args: Any) -> tuple[float, Any]:
    best, value = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        value = fn(*args)
        best = min(best, time.perf_counter() - started)
    return best, value


def edit_distance_row(chars: int, repeat: int) -> dict[str, Any]:
    a, b = similar_strings(chars)
    python_s, python_d = best_of(1, python_levenshtein, a, b)  # seconds per call: once is enough
    referee_s, referee_d = best_of(repeat, levenshtein_distance, a, b)
    if python_d != referee_d:
        raise AssertionError(f"distances differ: pure Python {python_d}, rapidfuzz {referee_d}")
    return {"chars": chars, "distance": referee_d, "python_s": python_s, "referee_s": referee_s,
            "speedup": python_s / referee_s if referee_s else float("inf")}


@contextmanager
def inline_checks(enabled: bool) -> Iterator[None]:
    """Force every deterministic check onto the event loop (what referee did before)."""
    if not enabled:
        yield
        return
    original = SyncCriterion.runs_off_loop
    SyncCriterion.runs_off_loop = lambda self, actual, expected: False  # type: ignore[method-assign]
    try:
        yield
    finally:
        SyncCriterion.runs_off_loop = original  # type: ignore[method-assign]


async def _stall(cases: int, chars: int, calls: int) -> tuple[float, float]:
    """(longest heartbeat gap, wall time) while ``cases`` large cases are scored concurrently."""
    a, b = similar_strings(chars)
    # One tool, called with different arguments: every pair of the alignment compares args.
    expected_calls = [ToolCall(name="search", args={"page": i}) for i in range(calls)]
    actual_calls = [ToolCall(name="search", args={"page": i * 2}) for i in range(calls)]
    case = EvalCase.single_turn("q", b, expected_tool_trajectory=expected_calls)
    actual = ExecutionResult(actual_response=a, tool_calls=actual_calls)
    criteria = [Levenshtein(), TrajectoryMatchCriterion(
        CriterionConfig(match_type=MatchType.IN_ORDER, check_args=True))]
    longest = 0.0
    done = asyncio.Event()

    async def heartbeat() -> None:
        nonlocal longest
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            longest = max(longest, now - last)
            last = now

    beat = asyncio.create_task(heartbeat())
    await asyncio.sleep(0.01)
    started = time.perf_counter()
    await asyncio.gather(*(c.evaluate(actual, case) for _ in range(cases) for c in criteria))
    wall = time.perf_counter() - started
    done.set()
    await beat
    return longest, wall


def stall_rows(cases: int, chars: int, calls: int) -> list[dict[str, Any]]:
    rows = []
    for mode, inline in (("off the loop (default)", False), ("inline (before)", True)):
        with inline_checks(inline):
            longest, wall = asyncio.run(_stall(cases, chars, calls))
        rows.append({"mode": mode, "cases": cases, "chars": chars, "calls": calls,
                     "longest_loop_stall_ms": longest * 1000, "wall_s": wall})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chars", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cases", type=int, default=1)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()

    distance = edit_distance_row(args.chars, args.repeat)
    stalls = stall_rows(args.cases, args.chars, args.calls)
    print(f"edit distance, two {distance['chars']:,}-character strings (distance "
          f"{distance['distance']}), best of {args.repeat}:")
    print(f"  pure Python (before) {distance['python_s'] * 1000:10.1f} ms")
    print(f"  rapidfuzz (referee)  {distance['referee_s'] * 1000:10.3f} ms"
          f"   ({distance['speedup']:,.0f}x faster)")
    print(f"event loop, {args.cases} large case(s) (Levenshtein on {args.chars:,} characters + "
          f"IN_ORDER trajectory over {args.calls} calls):")
    for row in stalls:
        print(f"  {row['mode']:<24} longest stall {row['longest_loop_stall_ms']:8.1f} ms, "
              f"wall {row['wall_s']:.2f} s")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"edit_distance": distance, "event_loop": stalls}, out, indent=2)


if __name__ == "__main__":
    main()
