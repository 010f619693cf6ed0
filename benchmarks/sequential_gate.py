"""The sequential gate against known truth: how often it decides wrong, and how many cases it judges.

    PYTHONPATH=$PWD python3 -m benchmarks.sequential_gate                    # 400 seeds, ~4 min
    PYTHONPATH=$PWD python3 -m benchmarks.sequential_gate --seeds 200 --cases 500 --json out.json

For each true pass rate and seed, a suite of ``--cases`` cases is drawn two ways and judged one
case at a time in a seeded random order, asking the gate's own test (``referee.stats.decide``)
after every case, exactly as ``referee run --sequential`` does:

- finite: the suite holds exactly round(rate x cases) passing cases, shuffled (what a run of a
  fixed case list in a random order is); the truth is the full run's pass rate;
- i.i.d.: every case passes with probability ``rate`` (a suite drawn from a larger population);
  the truth is ``rate``.

A run stops at the first decision; one that never decides judges every case and the full run's
pass rate decides, as a gate without ``--sequential`` would. A wrong decision is "above" when the
truth is below the threshold, or "below" when it is at or above it. Standard library plus referee.
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

from referee.stats import decide

THRESHOLD = 0.80
CONFIDENCE = 0.95
RATES = (0.60, 0.70, 0.75, 0.80, 0.85, 0.90, 0.95)


@dataclass(frozen=True)
class Scenario:
    """One true rate, many seeds: the wrong decisions and the cases judged."""

    sampling: str
    rate: float
    seeds: int
    cases: int
    decided_early: int
    wrong: int
    mean_judged: float
    max_judged: int

    @property
    def wrong_rate(self) -> float:
        return self.wrong / self.seeds

    @property
    def saved(self) -> float:
        """The share of the full run's cases the gate did not judge."""
        return 1.0 - self.mean_judged / self.cases


def _outcomes(sampling: str, rate: float, cases: int, rng: random.Random) -> list[bool]:
    if sampling == "finite":
        passing = round(rate * cases)
        outcomes = [True] * passing + [False] * (cases - passing)
        rng.shuffle(outcomes)
        return outcomes
    return [rng.random() < rate for _ in range(cases)]


def run_gate(outcomes: list[bool], threshold: float, confidence: float) -> tuple[str | None, int]:
    """(the sequential decision or None, how many cases were judged)."""
    passes = fails = 0
    for judged, passed in enumerate(outcomes, start=1):
        passes += passed
        fails += not passed
        decision = decide(passes, fails, threshold, confidence)
        if decision is not None:
            return decision, judged
    return None, len(outcomes)


def scenario(sampling: str, rate: float, *, seeds: int, cases: int,
             threshold: float = THRESHOLD, confidence: float = CONFIDENCE) -> Scenario:
    wrong = early = total = most = 0
    for seed in range(seeds):
        rng = random.Random(f"{sampling}:{rate}:{seed}")
        outcomes = _outcomes(sampling, rate, cases, rng)
        truth = (sum(outcomes) / cases if sampling == "finite" else rate) >= threshold
        decision, judged = run_gate(outcomes, threshold, confidence)
        if decision is not None:
            early += 1
            wrong += (decision == "above") != truth
        total += judged
        most = max(most, judged)
    return Scenario(sampling, rate, seeds, cases, early, wrong, total / seeds, most)


def run_all(*, seeds: int, cases: int, rates: tuple[float, ...] = RATES,
            samplings: tuple[str, ...] = ("finite", "iid")) -> list[Scenario]:
    return [scenario(s, rate, seeds=seeds, cases=cases) for s in samplings for rate in rates]


def format_table(rows: list[Scenario]) -> str:
    lines = ["| sampling | true rate | seeds | decided early | wrong decisions | wrong rate | "
             "mean cases judged | of | saved | most judged |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.sampling} | {r.rate:.2f} | {r.seeds} | {r.decided_early} | "
                     f"{r.wrong} | {r.wrong_rate:.3f} | {r.mean_judged:.1f} | {r.cases} | "
                     f"{r.saved:.0%} | {r.max_judged} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--seeds", type=int, default=400)
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    rows = run_all(seeds=args.seeds, cases=args.cases)
    print(f"threshold {THRESHOLD:.2f}, confidence {CONFIDENCE:.0%}, {args.cases} cases, "
          f"{args.seeds} seeds per row")
    print(format_table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in rows], indent=2))


if __name__ == "__main__":
    main()
