"""CustomRubric: the user's own (question, expect_yes) criteria, scored with QAG."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from referee.case import EvalCase
from referee.evaluators.qag import QAGEvaluator, Question, case_blocks
from referee.execution import ExecutionResult
from referee.judge import JudgeConfig


def _checked_criteria(criteria: Any) -> list[tuple[str, bool]]:
    if isinstance(criteria, (str, bytes)) or not isinstance(criteria, Sequence) or not criteria:
        raise ValueError("CustomRubric: criteria must be a non-empty list of "
                         f"(question, expect_yes) pairs, got {criteria!r}")
    checked = []
    for index, item in enumerate(criteria):
        ok = (isinstance(item, (tuple, list)) and len(item) == 2
              and isinstance(item[0], str) and item[0].strip() and isinstance(item[1], bool))
        if not ok:
            raise ValueError(f"CustomRubric: criteria[{index}] must be a (question, expect_yes) "
                             f"pair of a non-empty str and a bool, got {item!r}")
        checked.append((item[0].strip(), item[1]))
    return checked


class CustomRubric(QAGEvaluator):
    """Score = fraction of criteria where the judge's answer matches ``expect_yes``.

    The judge sees the case input, its context when present, and the model output.
    ``threshold`` left out: a calibration file's entry when one applies, else 0.7.
    Not the 10xgraph-style ``RubricBasedCriterion``, which asks one 0-1 score for all its
    rubrics at once (docs/architecture.md says why the two stay apart).
    """

    def __init__(self, criteria: list[tuple[str, bool]], name: str = "custom_rubric",
                 threshold: float | str | None = None, judge: JudgeConfig | None = None, *,
                 batch: bool | str = False) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"CustomRubric: name must be a non-empty string, got {name!r}")
        super().__init__(threshold=threshold, judge=judge, batch=batch)
        self.criteria = _checked_criteria(criteria)
        self.name = name

    def questions(self, actual: ExecutionResult, expected: EvalCase) -> list[Question]:
        blocks = case_blocks(actual, expected)
        return [Question(text, expect_yes, blocks) for text, expect_yes in self.criteria]
