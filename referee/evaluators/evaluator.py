"""``Evaluator``: the base class multivon-eval users subclass for a custom evaluator.

A subclass writes multivon's ``evaluate(case, output) -> EvalResult`` (sync), and optionally
``aevaluate(case, output)`` (async). The class keeps referee's one protocol for the engine:
``evaluator.evaluate(actual, expected)`` called with an ``ExecutionResult`` returns the awaitable
every criterion returns, which runs the subclass's own method on the case and the output text.
Called the multivon way, with a case and a string, ``evaluate`` is the subclass's method itself.
"""

from __future__ import annotations

import asyncio
import inspect
from abc import abstractmethod
from collections.abc import Callable
from typing import Any

from referee.case import EvalCase
from referee.config import CriterionConfig
from referee.criteria.base import BaseCriterion
from referee.execution import ExecutionResult
from referee.result import CriterionResult

__all__ = ["Evaluator"]


def _accepts_keyword(method: Callable[..., Any], name: str) -> bool:
    try:
        parameters = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


class Evaluator(BaseCriterion):
    """Subclass and implement ``evaluate(self, case, output) -> EvalResult``.

    ``name`` and ``threshold`` are class attributes or set in ``__init__``; ``self._result(score,
    reason, **metadata)`` builds a verdict that passes at ``score >= threshold``. A subclass may
    raise ``JudgeUnavailable`` (the case becomes JUDGE_ERROR) or return a result whose
    ``metadata`` says ``{"skipped": True}`` (reported as skipped, never as a pass). An
    ``evaluate`` that accepts ``latency_ms`` receives the model call's latency in milliseconds.
    """

    name: str = "evaluator"
    # multivon marks the evaluators that call a judge; referee reads it only for display.
    uses_llm_judge: bool = False

    def __init__(self, threshold: float = 0.5) -> None:
        super().__init__(threshold=threshold)
        # A subclass's class attribute ``threshold = 0.7`` replaces the property; the value
        # given here still wins, as in multivon.
        self.threshold = threshold

    def __new__(cls, *args: Any, **kwargs: Any) -> Evaluator:
        # Evaluator is abstract, as multivon's is: say which method is missing in its words.
        if "_evaluate_case" in getattr(cls, "__abstractmethods__", ()):
            raise TypeError(f"{cls.__name__} must implement evaluate(self, case, output) "
                            "before it can be built")
        return super().__new__(cls)

    @abstractmethod
    def _evaluate_case(self, case: EvalCase, output: str, **kwargs: Any) -> Any:
        """The subclass's own ``evaluate(case, output)``, recorded when the class is made."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("evaluate")
        if own is not None and own is not Evaluator.evaluate:
            # The subclass's method answers multivon-style calls; the class's ``evaluate`` stays
            # the protocol entry point that dispatches to it.
            cls._evaluate_case = own  # type: ignore[attr-defined,method-assign]
            cls.evaluate = Evaluator.evaluate  # type: ignore[method-assign,assignment]

    # A subclass that does not call ``super().__init__`` still has a config and a threshold.
    @property
    def config(self) -> CriterionConfig:
        config = self.__dict__.get("config")
        if config is None:
            declared = None
            for klass in type(self).__mro__:  # the nearest class attribute ``threshold = ...``
                declared = klass.__dict__.get("threshold")
                if declared is not None:
                    break
            default = declared if isinstance(declared, (int, float)) else 0.5
            config = CriterionConfig(threshold=default)
            self.__dict__["config"] = config
        return config

    @config.setter
    def config(self, value: CriterionConfig) -> None:
        self.__dict__["config"] = value

    @property
    def threshold(self) -> float:
        return self.config.threshold

    @threshold.setter
    def threshold(self, value: float) -> None:
        self.config = self.config.model_copy(update={"threshold": float(value)})

    def evaluate(self, actual: Any, expected: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        """``await evaluate(ExecutionResult, EvalCase)`` (the protocol) or, with a case and the
        output text, the subclass's own ``evaluate(case, output)``."""
        if isinstance(actual, ExecutionResult):
            if not isinstance(expected, EvalCase):
                raise TypeError(f"{type(self).__name__}.evaluate(actual, expected): expected an "
                                f"EvalCase, got {type(expected).__name__}")
            return self._score_run(actual, expected)
        return self._evaluate_case(actual, expected, **kwargs)

    async def aevaluate(self, case: EvalCase, output: str, **kwargs: Any) -> CriterionResult:
        """multivon's async sibling: by default the sync ``evaluate`` on a worker thread."""
        return await asyncio.to_thread(self.evaluate, case, output, **kwargs)

    async def _score_run(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        output = actual.actual_response or ""
        overridden = type(self).aevaluate is not Evaluator.aevaluate
        bound: Callable[..., Any] = self.aevaluate if overridden else self._evaluate_case
        kwargs: dict[str, Any] = {}
        if actual.latency_s is not None and _accepts_keyword(bound, "latency_ms"):
            kwargs["latency_ms"] = actual.latency_s * 1000.0
        if overridden or inspect.iscoroutinefunction(bound):
            value = await bound(expected, output, **kwargs)
        else:
            value = await asyncio.to_thread(bound, expected, output, **kwargs)
        return self._as_protocol_result(value)

    def _as_protocol_result(self, value: Any) -> Any:
        if not isinstance(value, CriterionResult):
            return value  # the engine reports the wrong type as an evaluator error
        update: dict[str, Any] = {}
        if value.details.get("skipped") is True and not value.skipped:
            update["skipped"] = True  # multivon marks a skip in its metadata
        if not value.threshold and self.threshold:
            update["threshold"] = self.threshold
        return value.model_copy(update=update) if update else value

    def _result(self, score: float, reason: str = "",  # type: ignore[override]
                **metadata: Any) -> CriterionResult:
        """multivon's ``_result(score, reason, **metadata)``: passes at ``score >= threshold``."""
        details = dict(metadata)
        if isinstance(reason, dict):  # referee's own ``_result(score, details)`` spelling
            details = {**reason, **details}
        elif reason:
            details["reason"] = reason
        return super()._result(score, details)
