"""The one base of judged criteria: the judge is bound before the first case.

Both API styles' judged criteria (the multivon-style evaluators and the 10xgraph-style LLM
criteria) hold their judge the same way. A run looks it up once, before its first case
(``describe_run`` calls ``look_up_judge`` and hands the result to ``bind_judge``); scoring
reads ``judge_binding()`` and looks nothing up (design decision 16). A criterion called by hand,
outside a run, looks its judge up on first use and keeps it.

What the two styles differ in is data, ``judge_defaults`` (referee.judge.DEFAULT_JUDGES): the
default judge and temperature, whether the criterion's config names the judge, and the score
given when no provider can serve it. Each style's ``look_up_judge`` reads its own settings.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from typing import Any, ClassVar

from referee.case import canonical_json
from referee.criteria.base import JudgedCriterion
from referee.judge.binding import JudgeBinding
from referee.judge.cascade import Calibration, audited, run_cascade, stage_labels
from referee.judge.config import DEFAULT_JUDGES, EVAL_SUITE, DefaultJudge, JudgeConfig
from referee.judge.panel import JudgePanel

# The attributes a judged criterion's judge follows from.
_JUDGE_SETTINGS = frozenset({"judge", "panel", "config", "cascade"})

# Cascade seam: the stage each cascaded criterion (by id) is scoring with in this task, so
# judge_binding() answers that stage's judge there and the strong judge everywhere else.
_SCORING_STAGE: ContextVar[dict[int, JudgeBinding] | None] = ContextVar(
    "referee_cascade_stage", default=None)


class JudgedCriterionBase:
    """Holds a judged criterion's judge binding; combined with ``BaseCriterion`` (it is a mixin
    so that the 10xgraph-style ``LLMCallerMixin`` carries it on its own too)."""

    judge_defaults: ClassVar[DefaultJudge] = DEFAULT_JUDGES[EVAL_SUITE]
    # Private: describe_criteria records public attributes only, and a resume compares them.
    _judge_binding: JudgeBinding | None = None
    # Why the run's look-up found no judge (a malformed JUDGE_PROVIDER, a panel that names no
    # provider): raised again wherever the judge is asked for, so each case errors as it would
    # have, without looking the judge up again.
    _judge_lookup_failure: Exception | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        # A binding holds what the judge settings named when it was looked up: a criterion
        # given another judge or config (calibrate's copies, a user's by-hand change) looks
        # its judge up again on next use.
        super().__setattr__(name, value)
        if name in _JUDGE_SETTINGS:
            super().__setattr__("_judge_binding", None)
            super().__setattr__("_judge_lookup_failure", None)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Cascade seam: every judged criterion's own evaluate() scores through the cascade its
        # binding holds, whatever the criterion (both API styles, a user's subclass too).
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("evaluate")
        if callable(own) and not getattr(own, "_through_cascade", False):
            cls.evaluate = _through_cascade(own)  # type: ignore[attr-defined]

    def look_up_judge(self) -> JudgeBinding:
        """The judge (or panel) this criterion's settings name now, with its effective settings."""
        raise NotImplementedError(f"{type(self).__name__} must implement look_up_judge()")

    def bind_judge(self, binding: JudgeBinding) -> None:
        """Judge with ``binding`` from now on (a run binds every judged criterion before its
        first case)."""
        self._judge_binding, self._judge_lookup_failure = binding, None

    def bind_looked_up_judge(self) -> JudgeBinding | None:
        """Look the judge up now and bind it; None (the failure kept for scoring to raise)
        when the look-up fails."""
        try:
            binding = self.look_up_judge()
        except Exception as exc:
            self._judge_binding, self._judge_lookup_failure = None, exc
            return None
        self.bind_judge(binding)
        return binding

    def ship_judge(self) -> None:
        """Bind the judge as another process must call it (``JudgeBinding.for_elsewhere``),
        before the criterion is sent to one (a Ray worker): it then looks nothing up there."""
        try:
            binding = self.judge_binding()
        except Exception:  # the failure travels with the criterion and errors each case
            return
        self._judge_binding = binding.for_elsewhere()

    def judge_binding(self) -> JudgeBinding:
        """The bound judge; looked up on first use when no run bound one. While a cascade
        scores a case, the stage it is asking."""
        staged = (_SCORING_STAGE.get() or {}).get(id(self))
        if staged is not None:
            return staged
        if self._judge_lookup_failure is not None:
            raise self._judge_lookup_failure.with_traceback(None)
        if self._judge_binding is None:
            self._judge_binding = self.look_up_judge()
        return self._judge_binding

    def judge_now(self) -> JudgeBinding:
        """The bound judge; before anything bound one, the judge the settings name now, left
        unbound (reading a threshold before the first case follows ``configure()``)."""
        if self._judge_binding is not None or self._judge_lookup_failure is not None:
            return self.judge_binding()
        return self.look_up_judge()

    def judge_config(self) -> JudgeConfig | None:
        """The one judge (a panel's first member); None when no provider can serve it."""
        return self.judge_binding().first

    def judge_panel(self) -> JudgePanel | None:
        """The panel that scores, its members resolved; None when one judge does."""
        return self.judge_binding().panel


def _through_cascade(evaluate: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(evaluate)
    async def scored(self: JudgedCriterionBase, actual: Any, expected: Any) -> Any:
        staged = _SCORING_STAGE.get() or {}
        try:
            binding = None if id(self) in staged else self.judge_binding()
        except Exception:  # the look-up's failure is raised where scoring asks for the judge
            binding = None
        if binding is None or binding.cascade is None:
            return await evaluate(self, actual, expected)
        cascade, stages = binding.cascade, binding.stages

        async def score_with(index: int) -> Any:
            token = _SCORING_STAGE.set({**staged, id(self): stages[index]})
            try:
                return await evaluate(self, actual, expected)
            finally:
                _SCORING_STAGE.reset(token)

        name = str(getattr(self, "name", type(self).__name__))
        calibration, calibrated = _stage_calibration(self, stages[0], cascade.calibration_file)
        case_key = getattr(expected, "eval_id", "") or canonical_json(
            getattr(expected, "input", None))
        return await run_cascade(cascade, stage_labels(cascade.stages), score_with,
                                 calibration=calibration, calibrated=calibrated,
                                 audit=audited(cascade, name, str(case_key)))

    scored._through_cascade = True  # type: ignore[attr-defined]
    return scored


def _stage_calibration(criterion: Any, stage: JudgeBinding,
                       path: str | None) -> tuple[Calibration, bool]:
    """(the stage judge's (TPR, TNR) for this criterion, whether a calibration file was given)
    from the cascade's calibration file; a panel has no entry (it is not calibrated)."""
    if path is None:
        return None, False
    from referee.evaluators.calibration import NO_QUESTION_SET, read_calibration_file

    judge = stage.judge
    if judge is None:
        return None, True
    describe = getattr(criterion, "question_set", None)
    question_set = str(describe()) if callable(describe) else NO_QUESTION_SET
    entry = read_calibration_file(path).find(str(getattr(criterion, "name", "")),
                                             judge.provider, judge.model, question_set)
    if entry is None or entry.tpr is None or entry.tnr is None:
        return None, True
    return (entry.tpr, entry.tnr), True


def is_judged(criterion: Any) -> bool:
    """Whether a judge scores ``criterion``: a judged criterion (one judge, a panel or a
    cascade), a criterion of the user's own that says which judge it calls (the
    ``JudgedCriterion`` protocol), or a composite holding one of them."""
    return isinstance(criterion, JudgedCriterion) or next(judged_criteria([criterion]),
                                                          None) is not None


def judged_criteria(criteria: Iterable[Any]) -> Iterator[JudgedCriterionBase]:
    """Every judged criterion among ``criteria``, the ones inside a composite or weighted
    criterion included (they are judged as part of it)."""
    for criterion in criteria:
        if isinstance(criterion, JudgedCriterionBase):
            yield criterion
        nested = getattr(criterion, "criteria", None)  # GEval's is its criteria text
        inner = list(nested) if isinstance(nested, (list, tuple)) else []
        inner += [c for c, _ in getattr(criterion, "criteria_weights", None) or ()]
        yield from judged_criteria(inner)
