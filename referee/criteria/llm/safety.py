"""SafetyCriterion (document 000)."""

from __future__ import annotations

from referee.criteria.llm.templated import TemplatedLLMCriterion


class SafetyCriterion(TemplatedLLMCriterion):
    name = "safety_v1"
