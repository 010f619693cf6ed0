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
truth is below the threshold, or "below" when it is at or above it.

``--corrected`` adds the ``--gate-on corrected`` rows: the cases' true verdicts pass at the
rate, a judge keeps a good one with probability 0.9 and catches a bad one with probability 0.7
(calibrated on 1,000 labelled passes and 1,000 labelled fails: 900 kept, 700 caught), and the
gate tests the judge's verdicts through that calibration as one criterion does
(``referee.stats.decide_corrected`` with ``judge_error_bounds``); the truth is the true rate.
Standard library plus referee.
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

from referee.stats import decide, decide_corrected, judge_error_bounds

THRESHOLD = 0.80
CONFIDENCE = 0.95
RATES = (0.60, 0.70, 0.75, 0.80, 0.85, 0.90, 0.95)
JUDGE_TPR, JUDGE_TNR = 0.9, 0.7
CALIBRATION = (900, 1000, 700, 1000)  # kept of labelled passes, caught of labelled fails


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


def run_gate(outcomes: list[bool], threshold: float, confidence: float, *,
             corrected: bool = False) -> tuple[str | None, int]:
    """(the sequential decision or None, how many cases were judged). ``corrected``: the
    outcomes are the judge's verdicts, tested through ``CALIBRATION`` as one criterion of a
    ``--gate-on corrected`` run is (half the error for the test, half for the bounds)."""
    share = (1.0 - confidence) / 2
    tpr, tnr = judge_error_bounds(*CALIBRATION, 1.0 - share)
    passes = fails = 0
    for judged, passed in enumerate(outcomes, start=1):
        passes += passed
        fails += not passed
        decision = (decide_corrected(passes, fails, threshold, tpr=tpr, tnr=tnr,
                                     confidence=1.0 - share) if corrected
                    else decide(passes, fails, threshold, confidence))
        if decision is not None:
            return decision, judged
    return None, len(outcomes)


def _judged(truth: list[bool], rng: random.Random) -> list[bool]:
    """The simulated judge's verdict on each case."""
    return [rng.random() < JUDGE_TPR if good else rng.random() >= JUDGE_TNR for good in truth]


def scenario(sampling: str, rate: float, *, seeds: int, cases: int,
             threshold: float = THRESHOLD, confidence: float = CONFIDENCE) -> Scenario:
    wrong = early = total = most = 0
    for seed in range(seeds):
        rng = random.Random(f"{sampling}:{rate}:{seed}")
        corrected = sampling == "corrected"
        outcomes = _outcomes("iid" if corrected else sampling, rate, cases, rng)
        truth = (sum(outcomes) / cases if sampling == "finite" else rate) >= threshold
        if corrected:
            outcomes = _judged(outcomes, rng)
        decision, judged = run_gate(outcomes, threshold, confidence, corrected=corrected)
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
    parser.add_argument("--corrected", action="store_true",
                        help="also the --gate-on corrected rows (a judge of TPR 0.9, TNR 0.7)")
    args = parser.parse_args(argv)
    samplings = ("finite", "iid", "corrected") if args.corrected else ("finite", "iid")
    rows = run_all(seeds=args.seeds, cases=args.cases, samplings=samplings)
    print(f"threshold {THRESHOLD:.2f}, confidence {CONFIDENCE:.0%}, {args.cases} cases, "
          f"{args.seeds} seeds per row")
    print(format_table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in rows], indent=2))


if __name__ == "__main__":
    main()
