"""HallucinationCriterion (document 000)."""

from __future__ import annotations

from referee.criteria.llm.templated import TemplatedLLMCriterion


class HallucinationCriterion(TemplatedLLMCriterion):
    name = "hallucinations_v1"
