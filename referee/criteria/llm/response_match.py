"""LLMJudgeCriterion and ResponseMatchCriterion: is the response semantically the expected one?"""

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

SEMANTIC_MATCH_TASK = """\
Decide whether the actual response says the same thing as the expected response, as an answer \
to the user's request. Wording, order and formatting may differ; what matters is that the \
actual response carries the expected facts, conclusions and commitments, and adds nothing \
that contradicts them.

Scale:
- 1.0: same meaning; every key point of the expected response is present
- 0.7-0.9: same core meaning, minor details missing or loosely stated
- 0.4-0.6: partly equivalent; some key points missing or different
- 0.1-0.3: mostly different, a little overlap
- 0.0: unrelated or contradicting the expected response"""


class LLMJudgeCriterion(TemplatedLLMCriterion):
    """``final_response_match_v2``: semantic equivalence of actual and expected final response.

    ``details``: ``samples``, ``individual_scores``, ``reasonings``, ``judge_model`` and
    ``reason`` (the mean score and the reasoning of the sample closest to it).
    """

    name = "final_response_match_v2"
    description = "LLM-based semantic response matching"

    def _get_skip_result(self, actual: ExecutionResult,
                         expected: EvalCase) -> CriterionResult | None:
        if not expected.last_expected_response():
            return self._nothing_to_judge("No expected final response to compare against")
        return super()._get_skip_result(actual, expected)

    def _build_prompt(self, actual: ExecutionResult, expected: EvalCase) -> str:
        return "\n\n".join([
            SEMANTIC_MATCH_TASK,
            DATA_NOTICE,
            data_block("user_request", user_request(expected)),
            data_block("expected_response", expected.last_expected_response() or ""),
            data_block("actual_response", actual.actual_response),
            json_reply_format([SCORE_FIELD, REASONING_FIELD]),
        ])

    def _build_details(self, scores: list[float], reasonings: list[str],
                       aggregated_extras: dict[str, Any], final_score: float) -> dict[str, Any]:
        return {
            "samples": len(scores),
            "individual_scores": scores,
            "reasonings": reasonings,
            "judge_model": self.judge_model_name,
            "reason": self._summarize(scores, reasonings, final_score),
        }


class ResponseMatchCriterion(LLMJudgeCriterion):
    """``response_match_score``: the recommended semantic response check (same prompt)."""

    name = "response_match_score"
    description = "LLM semantic response matching"
