"""LLMJudgeCriterion (document 000)."""

from __future__ import annotations

from referee.criteria.llm.templated import TemplatedLLMCriterion


class LLMJudgeCriterion(TemplatedLLMCriterion):
    name = "final_response_match_v2"


class ResponseMatchCriterion(LLMJudgeCriterion):
    name = "response_match_score"
