"""SimulationGoalsCriterion (document 000)."""

from __future__ import annotations

from referee.criteria.llm.templated import TemplatedLLMCriterion


class SimulationGoalsCriterion(TemplatedLLMCriterion):
    name = "simulation_goals"
