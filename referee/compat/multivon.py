"""multivon's way of calling an evaluator by hand, ``evaluator.evaluate(case, output)``, as an
adapter over referee's one scoring signature, and multivon's ``uses_llm_judge``.

The protocol is unchanged: the engine calls ``await evaluator.evaluate(actual, expected)`` with
an ``ExecutionResult`` and gets the coroutine every criterion returns. A call whose first
argument is an ``EvalCase`` cannot be a protocol call, so it is answered synchronously by running
that same protocol on ``ExecutionResult(actual_response=output)``: there is still one scoring
path. ``referee.evaluators._multivon`` is this module's old path.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from referee.case import EvalCase
from referee.criteria.base import SyncCriterion, output_run
from referee.result import CriterionResult
from referee.run.sync import run_sync

__all__ = ["MultivonSurface"]

_BY_HAND_MARK = "_referee_answers_by_hand"


def _by_hand_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether ``evaluate(*args, **kwargs)`` is multivon's ``evaluate(case, output, ...)``."""
    return bool(args) and isinstance(args[0], EvalCase) or "case" in kwargs or "output" in kwargs


def _case_and_output(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    # multivon's names, by position or keyword: evaluate(case, output, latency_ms=...)
    rest = list(args)
    case = kwargs.pop("case") if "case" in kwargs else (rest.pop(0) if rest else None)
    output = kwargs.pop("output") if "output" in kwargs else (rest.pop(0) if rest else None)
    return case, output


def _answering_by_hand(protocol: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(protocol)
    def evaluate(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _by_hand_call(args, kwargs):
            return self._evaluate_by_hand(*_case_and_output(args, kwargs), **kwargs)
        return protocol(self, *args, **kwargs)

    setattr(evaluate, _BY_HAND_MARK, True)
    return evaluate


class MultivonSurface:
    """Mixed in before a criterion: ``evaluate(case, output, latency_ms=None)`` returns the
    ``EvalResult`` (referee's ``CriterionResult``), as multivon's does; the protocol call with an
    ``ExecutionResult`` still returns the awaitable.

    A criterion that inherits its ``evaluate`` (the deterministic ones: ``SyncCriterion``'s) is
    answered by this class's ``evaluate``, which hands protocol calls on up the MRO. A subclass
    that writes its own async ``evaluate`` (the judged evaluators) shadows this one, so only
    that method is wrapped, once, when the subclass is made."""

    # multivon marks the evaluators that call a judge; the judged ones set it.
    uses_llm_judge: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("evaluate")
        if own is not None and not getattr(own, _BY_HAND_MARK, False):
            cls.evaluate = _answering_by_hand(own)  # type: ignore[method-assign]
        elif own is None and MultivonSurface in cls.__bases__:
            inherited = super().evaluate  # type: ignore[misc]
            if getattr(inherited, "__isabstractmethod__", False):
                # A base still without a protocol (JudgeEvaluator) stays abstract: this
                # class's concrete evaluate must not stand in for the missing one.
                cls.evaluate = inherited  # type: ignore[method-assign]

    def evaluate(self, *args: Any, **kwargs: Any) -> Any:
        if _by_hand_call(args, kwargs):
            return self._evaluate_by_hand(*_case_and_output(args, kwargs), **kwargs)
        return super().evaluate(*args, **kwargs)  # type: ignore[misc]

    def _protocol(self) -> Callable[..., Any]:
        """The protocol ``evaluate`` this evaluator runs (the function, unwrapped)."""
        own = type(self).evaluate
        wrapped = getattr(own, "__wrapped__", None)
        if wrapped is not None:
            return wrapped  # type: ignore[no-any-return]
        return super(MultivonSurface, type(self)).evaluate  # type: ignore[misc,no-any-return]

    def _evaluate_by_hand(self, case: EvalCase, output: Any,
                          latency_ms: float | None = None) -> CriterionResult:
        if not isinstance(case, EvalCase):
            raise TypeError(f"{type(self).__name__}.evaluate(case, output): expected an EvalCase "
                            f"as the case, got {type(case).__name__}")
        if self._protocol() is SyncCriterion.evaluate:  # pure computation: no event loop needed
            return self.evaluate_sync(output_run(output, latency_ms), case)  # type: ignore[attr-defined]
        scoring = self.aevaluate(case, output, latency_ms=latency_ms)  # type: ignore[attr-defined]
        return run_sync(scoring)  # type: ignore[no-any-return]
