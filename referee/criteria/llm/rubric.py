"""RubricBasedCriterion (document 000)."""

from __future__ import annotations

from referee.criteria.llm.templated import TemplatedLLMCriterion


class RubricBasedCriterion(TemplatedLLMCriterion):
    name = "rubric_based_final_response_quality_v1"
