"""Sequential gates: judge cases in a seeded random order and stop once the gate is settled.

``--fail-threshold 0.8 --sequential`` (``sequential=True``) runs the cases in an order drawn
from ``sequential_seed`` and, after every finished case, asks the anytime-valid test of
``referee.stats.decide`` whether the pass rate is settled above or below the threshold at
``sequential_confidence``. Once it is, no further case starts (the few already running finish
and are kept). The cases that did not run are not in the run at all: never passed, never failed;
the report's ``metadata["sequential"]`` says how many ran, of how many, and what was decided,
and ``--resume RUN_DIR`` (without ``--sequential``) or ``--full`` runs them all.

Only PASSED and FAILED cases are evidence; an error or a skip says nothing about quality, as in
the pass rate itself (nor does a flaky case under ``flaky="quarantine"``). With ``--gate-on
corrected`` each criterion is tested on its own instead (run/sequential_corrected.py). A resumed
sequential run starts from the cases it kept, in the same order.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from referee.criteria.base import criterion_label
from referee.record import CaseResult, CaseStatus
from referee.result import unique_labels
from referee.run.judge_calibration import calibration_records
from referee.run.sequential_corrected import CorrectedCriteria
from referee.stats import Decision, confidence_sequence, decide
from referee.store import RunStore

if TYPE_CHECKING:  # options.py reads this module's defaults
    from referee.run.options import RunOptions

SEQUENTIAL_KEY = "sequential"
DEFAULT_SEED = 20261207
DEFAULT_CONFIDENCE = 0.95


def seeded_order(count: int, seed: int) -> list[int]:
    """The positions 0..count-1 in the order a sequential run takes them."""
    order = list(range(count))
    random.Random(seed).shuffle(order)
    return order


@dataclass
class SequentialGate:
    """The running test of one sequential run: what it has seen, and whether it is settled."""

    threshold: float
    confidence: float = DEFAULT_CONFIDENCE
    seed: int = DEFAULT_SEED
    passes: int = 0
    fails: int = 0
    decision: Decision | None = None
    decided_after: int | None = None  # cases finished (any status) when it settled
    finished: int = 0
    skip_flaky: bool = False  # --flaky quarantine: a flaky case is no evidence either way
    # --gate-on corrected: each criterion's own test, judged ones corrected for judge error.
    corrected: CorrectedCriteria | None = None
    _seen: set[str] = field(default_factory=set)
    _decided_at: tuple[int, int] | None = None  # (passes, fails) when it settled

    def observe(self, result: CaseResult) -> None:
        """One finished case; counted once per key (a resume may hand a kept case back)."""
        if result.eval_id in self._seen:
            return
        self._seen.add(result.eval_id)
        self.finished += 1
        if self.skip_flaky and result.is_flaky:
            return
        if result.status == CaseStatus.PASSED:
            self.passes += 1
        elif result.status == CaseStatus.FAILED:
            self.fails += 1
        if self.corrected is not None:
            self.corrected.observe(result)
            if self.decision is None:
                self._settle(self.corrected.decision())
        elif self.decision is None and result.status in (CaseStatus.PASSED, CaseStatus.FAILED):
            self._settle(decide(self.passes, self.fails, self.threshold, self.confidence))

    def _settle(self, decision: Decision | None) -> None:
        if decision is not None:
            self.decision = decision
            self.decided_after = self.finished
            self._decided_at = (self.passes, self.fails)

    def order(self, keys: Sequence[str]) -> Iterator[int]:
        """The seeded order, ending as soon as the gate is settled: the engine's workers draw
        their next case from it, so no case starts after the decision."""
        for index in seeded_order(len(keys), self.seed):
            if self.decision is not None:
                return
            yield index

    def observing(self, record: Callable[[CaseResult], None]) -> Callable[[CaseResult], None]:
        """``record``, and then this gate sees the case."""
        def both(result: CaseResult) -> None:
            record(result)
            self.observe(result)
        return both

    def prime(self, kept: Iterable[CaseResult]) -> None:
        """A resumed run: the cases it kept count as evidence before anything runs."""
        for result in kept:
            self.observe(result)

    def describe(self, total: int) -> str:
        """The report's sentence: what was decided after how many of the ``total`` cases."""
        share = f"{self.confidence:.0%} confidence"
        if self.decision is None:
            return (f"sequential gate: not settled after {self.finished:,} of {total:,} cases "
                    f"({self.passes} passed, {self.fails} failed); the full pass rate decides")
        sign = ">=" if self.decision == "above" else "<"
        rate = "pass rate" if self.corrected is None else self.corrected.what(self.decision)
        return (f"stopped after {self.finished:,} of {total:,} cases: {rate} {sign} "
                f"{self.threshold:.2f} with {share} (settled after {self.decided_after:,}; "
                f"{total - self.finished:,} not run)")

    def to_metadata(self, total: int) -> dict[str, Any]:
        # The interval when it settled: the cases still running then add no decision.
        passes, fails = self._decided_at or (self.passes, self.fails)
        interval = confidence_sequence(passes, fails, self.confidence)
        by_criteria = {} if self.corrected is None else {"criteria": self.corrected.to_metadata()}
        return {"threshold": self.threshold, "confidence": self.confidence, "seed": self.seed,
                "decision": self.decision, "decided_after": self.decided_after,
                "ran": self.finished, "of": total, "not_run": total - self.finished,
                "passes": self.passes, "fails": self.fails,
                # The cases' pass rate; with --gate-on corrected the criteria decide, not this.
                "interval": [interval.low, interval.high] if self.corrected is None else None,
                "summary": self.describe(total), **by_criteria}


def sequential_gate(options: RunOptions, store: RunStore | None, kept: Container[str], *,
                    corrected: CorrectedCriteria | None = None) -> SequentialGate:
    """The gate of a sequential run, primed with the cases a resume keeps; ``corrected``
    (--gate-on corrected) tests each criterion on its own."""
    assert options.fail_threshold is not None  # RunOptions refuses sequential without one
    gate = SequentialGate(options.fail_threshold, options.sequential_confidence,
                          options.sequential_seed, skip_flaky=options.flaky == "quarantine",
                          corrected=corrected)
    if store is not None:
        gate.prime(case for case in store.stream_cases() if case.eval_id in kept)
    return gate


def corrected_criteria(options: RunOptions, criteria: Sequence[Any],
                       judges: dict[str, dict[str, Any]]) -> CorrectedCriteria | None:
    """With ``--gate-on corrected``: each criterion's test, judged ones through the calibration
    the run finds for them (looked up once the criteria have prepared: a CheckEvaluator's
    question set exists only then). None for a gate on the raw pass rate."""
    gate = options.judge_gate
    if gate is None or gate.gate_on != "corrected":
        return None
    assert options.fail_threshold is not None  # RunOptions refuses corrected without one
    labels = tuple(unique_labels([criterion_label(c) for c in criteria]))
    return CorrectedCriteria(options.fail_threshold, options.sequential_confidence, labels,
                             calibration_records(criteria, judges=judges))
