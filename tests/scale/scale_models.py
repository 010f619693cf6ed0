"""Models for the Ray tests, importable on every worker (a worker imports them by name)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from referee import EvalCase, EvalSuite, ExecutionResult
from referee.evaluators.deterministic import Contains


def answer(question: str) -> str:
    n = int(question.split()[1])
    return f"answer {n}" if n % 7 else f"nothing for {n}"  # every seventh case fails


def suite(count: int) -> EvalSuite:
    cases = [EvalCase(input=f"question {i}", expected_output=f"answer {i}") for i in range(count)]
    return EvalSuite("sharded").add_cases(cases).add_evaluator(Contains(["answer"]))


class Logged:
    """Answers, logging every call (case, worker pid) to ``log``; kills its worker process
    the first time it sees case ``kill_at`` (a marker file makes the second time pass)."""

    def __init__(self, log: Path, kill_at: int | None = None, delay_s: float = 0.0) -> None:
        self.log, self.kill_at, self.delay_s = str(log), kill_at, delay_s

    def __call__(self, question: str) -> ExecutionResult:
        n = int(question.split()[1])
        with open(self.log, "a", encoding="utf-8") as fh:
            fh.write(f"{n} {os.getpid()}\n")
        marker = Path(self.log + f".killed-{n}")
        if n == self.kill_at and not marker.exists():
            marker.touch()
            # Long enough for the cases before it to reach the driver and be recorded; a case
            # that finished but was not yet recorded may run again, a recorded one may not.
            time.sleep(2.0)
            os._exit(1)  # the worker process dies mid-shard, as a crash or a lost node would
        if self.delay_s:
            time.sleep(self.delay_s)
        return ExecutionResult(actual_response=answer(question))


def make_answerer():
    """A model factory: what BuiltOnWorker calls once per worker process."""
    return answer
