"""TemplatedLLMCriterion: the sampling loop shared by every LLM-judged criterion."""

from __future__ import annotations

from referee.criteria.base import BaseCriterion
from referee.criteria.llm.caller import LLMCallerMixin


class TemplatedLLMCriterion(LLMCallerMixin, BaseCriterion):
    """Build a prompt, sample the judge, average (implementation follows)."""

    name = "templated_llm_criterion"
