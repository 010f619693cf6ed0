"""RubricBasedCriterion: how well the response meets the configured rubrics."""

from __future__ import annotations

from typing import Any

from referee.case import EvalCase
from referee.criteria.llm.prompts import (
    DATA_NOTICE,
    REASONING_FIELD,
    SCORE_FIELD,
    data_block,
    json_reply_format,
    user_request,
)
from referee.criteria.llm.templated import TemplatedLLMCriterion
from referee.execution import ExecutionResult
from referee.result import CriterionResult

RUBRIC_TASK = """\
Grade the assistant's response against every rubric below. Each rubric line is \
"- <rubric id>: <requirement>". Judge only what the rubrics require.

Rubrics:
{rubrics}

Scale: the share of rubric requirements the response fully meets; partly met requirements \
count partly. 1.0 means every requirement is met, 0.0 means none is."""


class RubricBasedCriterion(TemplatedLLMCriterion):
    """``rubric_based_final_response_quality_v1``: one judge score across ``config.rubrics``.

    ``details``: ``rubrics`` (the ids), ``scores`` (one per sample), ``reasonings``, ``samples``,
    ``judge_model``, ``reason`` (mean score and the most typical reasoning). A rubric's
    ``weight`` is stored on the config but, as documented, not used. Not the multivon-style
    ``CustomRubric``, which asks a yes/no verdict per question (docs/architecture.md).
    """

    name = "rubric_based_final_response_quality_v1"
    description = "LLM-based rubric evaluation"

    def _get_skip_result(self, actual: ExecutionResult,
                         expected: EvalCase) -> CriterionResult | None:
        if not self.config.rubrics:
            return self._nothing_to_judge("No rubrics configured", rubrics=[])
        return super()._get_skip_result(actual, expected)

    def _build_prompt(self, actual: ExecutionResult, expected: EvalCase) -> str:
        rubrics = "\n".join(f"- {r.rubric_id}: {r.content}" for r in self.config.rubrics)
        return "\n\n".join([
            RUBRIC_TASK.format(rubrics=rubrics),
            DATA_NOTICE,
            data_block("user_request", user_request(expected)),
            data_block("response", actual.actual_response),
            json_reply_format([SCORE_FIELD, REASONING_FIELD]),
        ])

    def _build_details(self, scores: list[float], reasonings: list[str],
                       aggregated_extras: dict[str, Any], final_score: float) -> dict[str, Any]:
        return {
            "rubrics": [r.rubric_id for r in self.config.rubrics],
            "scores": scores,
            "reasonings": reasonings,
            "samples": len(scores),
        }
