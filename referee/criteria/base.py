"""The one criterion protocol: ``async evaluate(actual, expected) -> CriterionResult``."""

from __future__ import annotations

import asyncio
import math
from abc import ABC, abstractmethod
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from referee.case import EvalCase
from referee.config import CriterionConfig
from referee.execution import ExecutionResult
from referee.redact import redact
from referee.result import CriterionResult
from referee.usage import TokenUsage

if TYPE_CHECKING:
    from referee.judge.config import JudgeConfig


@runtime_checkable
class Criterion(Protocol):
    """The one criterion protocol, so that one engine serves every check: a name, a threshold
    and ``async evaluate(actual, expected) -> CriterionResult``. The 10xgraph-style criteria, the
    multivon-style evaluators and a user's own checks all meet it; the engine and the run
    session are typed with it. Of an object that only has ``evaluate`` (all the run's front
    doors check for), the engine reads the class name as its name and 0.0 as its threshold
    (``criterion_label``, ``criterion_threshold``)."""

    @property
    def name(self) -> str: ...

    @property
    def threshold(self) -> float: ...

    async def evaluate(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult: ...


@runtime_checkable
class PreparedCriterion(Protocol):
    """The optional part of the protocol for a criterion with work to do once per run, before
    any case (``CheckEvaluator`` writes its questions): the engine calls ``prepare()`` once,
    on the driver, and a failure there errors that criterion on every case. A sync
    ``prepare`` is tolerated."""

    def prepare(self) -> Any: ...


@runtime_checkable
class JudgedCriterion(Protocol):
    """The optional part of the protocol for a criterion that calls a judge, and says which:
    the run describes it before the first case and records it in meta.json. A
    ``judge_defaults`` attribute (a ``referee.judge.DEFAULT_JUDGES`` entry) says whose rules its
    judge follows; without one, a JudgeConfig resolved in layers. referee's own judged criteria
    derive from ``referee.criteria.judged.JudgedCriterionBase``, whose judge a run binds."""

    def judge_config(self) -> JudgeConfig | None:
        """The judge it will call; None when no provider can serve it."""
        ...


def output_run(output: Any, latency_ms: float | None = None) -> ExecutionResult:
    """The run a multivon-style call describes: the model's ``output`` text, and its latency."""
    latency_s = latency_ms / 1000.0 if latency_ms is not None else None
    return ExecutionResult(actual_response=output, latency_s=latency_s)


def criterion_label(criterion: object) -> str:
    """A criterion's name, or its class name when it has none."""
    return str(getattr(criterion, "name", None) or type(criterion).__name__)


def criterion_threshold(criterion: object) -> float:
    """A criterion's threshold; 0.0 when it has none, or a broken one (the evaluator's fault,
    reported when it runs)."""
    try:
        return float(getattr(criterion, "threshold", 0.0) or 0.0)
    except Exception:
        return 0.0


@dataclass
class CaseScope:
    """The criteria scoring one case, visible to each of them while they run.

    The engine sets it around a case's criteria, so criteria can share work for that case
    (one judge request for several batched evaluators); ``shared`` holds that work.
    """

    criteria: tuple[Criterion, ...]
    shared: dict[Any, Any] = field(default_factory=dict)


CURRENT_CASE: ContextVar[CaseScope | None] = ContextVar("referee_current_case", default=None)


class BaseCriterion(ABC):
    """Scores one run between 0.0 and 1.0 and compares it to a threshold."""

    name: str = "base_criterion"
    description: str = ""
    # The ExecutionResult fields the score depends on. A recorded run that could not carry one
    # of them (referee.execution.UNRECORDED_KEY) skips the criterion instead of scoring it.
    reads: tuple[str, ...] = ()

    def __init__(self, config: CriterionConfig | None = None, *,
                 threshold: float | None = None) -> None:
        """``config`` for the 10xgraph-style criteria; an evaluator that only has a threshold
        gives ``threshold`` alone. Either way ``self.config`` holds it, so a stored run's
        criteria settings (which resume compares) read as before."""
        if config is not None and threshold is not None:
            raise TypeError(f"{type(self).__name__}: give config= or threshold=, not both")
        if config is None:
            config = CriterionConfig() if threshold is None else CriterionConfig(
                threshold=threshold)
        self.config = config

    @property
    def threshold(self) -> float:
        return self.config.threshold

    @property
    def is_enabled(self) -> bool:
        return self.config.enabled

    @abstractmethod
    async def evaluate(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        """Score one case."""

    async def aevaluate(self, case: EvalCase, output: str, *,
                        latency_ms: float | None = None) -> CriterionResult:
        """multivon's spelling of one scoring: ``output`` (the model's text) for ``case``.
        The same as ``await evaluate(ExecutionResult(actual_response=output), case)``."""
        return await self.evaluate(output_run(output, latency_ms), case)

    def validate_config(self) -> list[str]:
        errors: list[str] = []
        if not 0.0 <= self.config.threshold <= 1.0:
            errors.append(f"threshold must be between 0.0 and 1.0, got {self.config.threshold}")
        if self.config.num_samples < 1:
            errors.append(f"num_samples must be at least 1, got {self.config.num_samples}")
        return errors

    def _result(self, score: float, details: dict[str, Any] | None = None,
                token_usage: TokenUsage | None = None) -> CriterionResult:
        score = float(score)
        if math.isnan(score):
            return self._failure("score is NaN")
        return CriterionResult(
            criterion=self.name,
            score=score,
            passed=score >= self.threshold,
            threshold=self.threshold,
            details=details or {},
            token_usage=token_usage,
        )

    def _failure(self, error: str) -> CriterionResult:
        # The error doubles as the reason, so ``details["reason"]`` is there on every result;
        # redacted for both (the error field alone redacts itself).
        error = redact(error)
        return CriterionResult(
            criterion=self.name, score=0.0, passed=False, threshold=self.threshold, error=error,
            details={"reason": error},
        )

    def _skipped(self, reason: str) -> CriterionResult:
        """Not applicable to this case (e.g. a required field is missing): reported, not passed."""
        return CriterionResult(
            criterion=self.name, score=0.0, passed=False, threshold=self.threshold,
            details={"reason": reason, "skipped": True}, skipped=True,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, threshold={self.threshold})"


# Inputs at least this large are scored on a worker thread. Below it a thread hop costs more
# than the check; above it edit distances, sequence alignments and schema checks can take
# milliseconds to seconds, and on the event loop they would stall every other case's judge calls.
OFF_LOOP_MIN_CHARS = 2_000
OFF_LOOP_MIN_ITEMS = 64


def input_size(actual: ExecutionResult, expected: EvalCase) -> tuple[int, int]:
    """(characters of text, tool calls and node visits) a deterministic check may scan."""
    chars = len(actual.actual_response or "") + len(expected.expected_output or "") + sum(
        len(inv.expected_final_response or "") for inv in expected.conversation)
    items = (len(actual.tool_calls) + len(actual.node_visits)
             + len(expected.expected_tool_trajectory) + len(expected.expected_node_order))
    return chars, items


class SyncCriterion(BaseCriterion):
    """A criterion whose rule is pure computation: implement ``evaluate_sync``.

    ``evaluate`` runs it inline for small inputs and on a worker thread for large ones
    (``runs_off_loop``), so a slow check never blocks the event loop the run shares.
    """

    @abstractmethod
    def evaluate_sync(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        """Score one case synchronously."""

    def runs_off_loop(self, actual: ExecutionResult, expected: EvalCase) -> bool:
        chars, items = input_size(actual, expected)
        return chars >= OFF_LOOP_MIN_CHARS or items >= OFF_LOOP_MIN_ITEMS

    async def evaluate(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        if self.runs_off_loop(actual, expected):
            return await asyncio.to_thread(self.evaluate_sync, actual, expected)
        return self.evaluate_sync(actual, expected)
