"""FactualAccuracyCriterion (document 000)."""

from __future__ import annotations

from referee.criteria.llm.templated import TemplatedLLMCriterion


class FactualAccuracyCriterion(TemplatedLLMCriterion):
    name = "factual_accuracy_v1"
