"""What multivon's evaluators answer beyond referee's criteria: the by-hand call,
``evaluator.evaluate(case, output)``, and ``uses_llm_judge``.

The protocol is unchanged: the engine calls ``await evaluator.evaluate(actual, expected)`` with an
``ExecutionResult`` and gets the coroutine every criterion returns. A call whose first argument is
an ``EvalCase`` cannot be a protocol call, so it is answered synchronously by running that same
protocol on ``ExecutionResult(actual_response=output)``: there is still one scoring path.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from referee.case import EvalCase
from referee.criteria.base import SyncCriterion, output_run
from referee.result import CriterionResult

__all__ = ["MultivonSurface"]

_BY_HAND_MARK = "_referee_answers_by_hand"


def _answering_by_hand(protocol: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(protocol)
    def evaluate(self: Any, actual: Any = None, expected: Any = None, **kwargs: Any) -> Any:
        if isinstance(actual, EvalCase) or "case" in kwargs or "output" in kwargs:
            # multivon's names, by position or keyword: evaluate(case, output, latency_ms=...)
            case = kwargs.pop("case") if "case" in kwargs else actual
            output = kwargs.pop("output") if "output" in kwargs else expected
            return self._evaluate_by_hand(case, output, **kwargs)
        return protocol(self, actual, expected, **kwargs)

    setattr(evaluate, _BY_HAND_MARK, True)
    return evaluate


class MultivonSurface:
    """Mixed into the built-in evaluators: ``evaluate(case, output, latency_ms=None)`` returns the
    ``EvalResult`` (referee's ``CriterionResult``), as multivon's does; the protocol call with an
    ``ExecutionResult`` still returns the awaitable. Subclasses that define their own async
    ``evaluate`` answer both ways too."""

    # multivon marks the evaluators that call a judge; the judged ones set it.
    uses_llm_judge: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        protocol = getattr(cls, "evaluate", None)
        if protocol is not None and not getattr(protocol, _BY_HAND_MARK, False):
            cls.evaluate = _answering_by_hand(protocol)  # type: ignore[attr-defined]

    def _evaluate_by_hand(self, case: EvalCase, output: Any,
                          latency_ms: float | None = None) -> CriterionResult:
        if not isinstance(case, EvalCase):
            raise TypeError(f"{type(self).__name__}.evaluate(case, output): expected an EvalCase "
                            f"as the case, got {type(case).__name__}")
        protocol = getattr(type(self).evaluate, "__wrapped__", None)  # type: ignore[attr-defined]
        if protocol is SyncCriterion.evaluate:  # pure computation: no event loop needed
            return self.evaluate_sync(output_run(output, latency_ms), case)  # type: ignore[attr-defined]
        # run/ sits above evaluators/; imported here, where only a by-hand call reaches it.
        from referee.run.sync import run_sync

        scoring = self.aevaluate(case, output, latency_ms=latency_ms)  # type: ignore[attr-defined]
        return run_sync(scoring)  # type: ignore[no-any-return]
