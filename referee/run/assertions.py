"""``assert_passes``: score one output inside a test and fail with the reasons.

Usable from any test runner; the pytest plugin adds a per-session summary of these checks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from referee.case import EvalCase
from referee.execution import ExecutionResult
from referee.record import CaseResult, CaseStatus
from referee.run.engine import Engine, ModelCaller
from referee.run.sync import run_sync
from referee.usage import TokenUsage


class _Tally:
    """What this process's assert_passes calls found; read by the pytest plugin at the end."""

    def __init__(self) -> None:
        self.statuses: Counter[CaseStatus] = Counter()
        self.usage = TokenUsage()

    def record(self, result: CaseResult) -> None:
        self.statuses[result.status] += 1
        if result.token_usage is not None:
            self.usage = self.usage + result.token_usage

    @property
    def total(self) -> int:
        return sum(self.statuses.values())

    def summary_line(self) -> str:
        parts = [f"{self.statuses[s]} {s.value.lower()}" for s in CaseStatus if self.statuses[s]]
        line = f"referee: {self.total} assert_passes check(s): {', '.join(parts)}"
        if self.usage.requests:
            line += (f"; judge calls {self.usage.requests} ({self.usage.cached_requests} cached), "
                     f"{self.usage.total_tokens} tokens")
        return line


TALLY = _Tally()


def _as_case(case_or_input: Any) -> EvalCase:
    if isinstance(case_or_input, EvalCase):
        return case_or_input
    if isinstance(case_or_input, str):
        return EvalCase(input=case_or_input)
    if isinstance(case_or_input, dict):
        return EvalCase.model_validate(case_or_input)
    raise TypeError(f"case_or_input must be an EvalCase, a str or a dict, "
                    f"got {type(case_or_input).__name__}")


def failure_message(result: CaseResult) -> str:
    title = result.name or (result.case.input_text if result.case and result.case.input_text
                             else result.eval_id)
    lines = [f"referee: {title!r} {result.status.value}"]
    if result.status == CaseStatus.SKIPPED:
        lines[0] += " — no evaluator could score it"
    if result.error and not result.criterion_results:
        lines.append(f"  {result.error}")
    for r in result.criterion_results:
        if r.passed and not r.skipped and r.error_kind is None:
            continue
        if r.skipped:
            verdict = "skipped"
        elif r.error_kind is not None:
            verdict = f"{r.error_kind} error"
        else:
            verdict = f"score {r.score:.2f} < threshold {r.threshold:.2f}"
        reason = r.error or (r.details.get("reason") if r.skipped else r.reason)
        lines.append(f"  - {r.criterion} ({verdict})" + (f": {reason}" if reason else ""))
    return "\n".join(lines)


async def score_case(case_or_input: Any, output: Any, evaluators: Any) -> CaseResult:
    """Score one output with ``evaluators`` through the engine (recorded in the session tally)."""
    case = _as_case(case_or_input)
    criteria: Sequence[Any] = evaluators if isinstance(evaluators, (list, tuple)) else [evaluators]
    if not criteria:
        raise ValueError("assert_passes needs at least one evaluator")
    execution = ExecutionResult.coerce(output)

    async def execute(_case: EvalCase, _caller: ModelCaller) -> ExecutionResult:
        return execution

    engine = Engine(criteria, concurrency=1)
    await engine.prepare()
    caller = ModelCaller()
    try:
        result = await engine.run_case(case, execute, caller)
    finally:
        caller.close()
    TALLY.record(result)
    return result


def _check(result: CaseResult) -> CaseResult:
    __tracebackhide__ = True  # pytest shows the user's line, not ours
    if result.status != CaseStatus.PASSED:
        raise AssertionError(failure_message(result))
    return result


def assert_passes(case_or_input: Any, output: Any, evaluators: Any) -> CaseResult:
    """Score ``output`` for the case with ``evaluators``; raise AssertionError unless it passes.

    ``case_or_input`` is an EvalCase, a dict, or just the input text; ``output`` is a str, a
    dict or an ExecutionResult; ``evaluators`` is one evaluator or a list. The message lists
    every failing, erroring or skipped evaluator with its reason. Returns the CaseResult.
    Works in sync tests and inside a running event loop.
    """
    __tracebackhide__ = True
    return _check(run_sync(score_case(case_or_input, output, evaluators)))


async def assert_passes_async(case_or_input: Any, output: Any, evaluators: Any) -> CaseResult:
    """``assert_passes`` for async tests that would rather await than block their loop."""
    __tracebackhide__ = True
    return _check(await score_case(case_or_input, output, evaluators))


def assert_eval_passed(report: Any, min_pass_rate: float = 1.0) -> None:
    """Raise AssertionError when a run's pass rate is below ``min_pass_rate`` (10xgraph's name).

    The pass rate is referee's, over evaluated cases (errors are counted apart); the message
    names the cases that did not pass.
    """
    pass_rate = report.summary.pass_rate
    if pass_rate < min_pass_rate:
        names = ", ".join(c.name or c.eval_id for c in report.failed_cases)
        raise AssertionError(f"Evaluation pass rate {pass_rate:.1%} below threshold "
                             f"{min_pass_rate:.1%}. Failed cases: {names or 'none'}")


def assert_criterion_passed(report: Any, criterion: str, min_score: float = 0.0) -> None:
    """Raise AssertionError when ``criterion`` is missing from the run, scored no case (every
    result errored or was skipped), or its mean score is below ``min_score`` (10xgraph's name)."""
    stats = report.summary.criterion_stats.get(criterion)
    if stats is None:
        raise AssertionError(f"Criterion {criterion!r} not found in report; it has: "
                             f"{', '.join(report.summary.criterion_stats) or 'no criteria'}")
    if stats["passed"] + stats["failed"] == 0:
        # Its mean covers scored results only: with none, the 0.0 shown is no score at all.
        raise AssertionError(f"Criterion {criterion!r} scored no case ({stats['errors']} "
                             f"error(s), {stats['skipped']} skipped)")
    if stats["avg_score"] < min_score:
        raise AssertionError(f"Criterion {criterion!r} average score {stats['avg_score']:.2f} "
                             f"below minimum {min_score:.2f}")
