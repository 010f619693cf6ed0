"""The 10xgraph-style API's LLM-judged criteria and the building blocks for custom ones."""

from referee.criteria.llm.caller import LLMCallerMixin
from referee.criteria.llm.factual_accuracy import FactualAccuracyCriterion
from referee.criteria.llm.hallucination import HallucinationCriterion
from referee.criteria.llm.response_match import LLMJudgeCriterion, ResponseMatchCriterion
from referee.criteria.llm.rubric import RubricBasedCriterion
from referee.criteria.llm.safety import SafetyCriterion
from referee.criteria.llm.simulation_goals import SimulationGoalsCriterion
from referee.criteria.llm.templated import TemplatedLLMCriterion

__all__ = [
    "FactualAccuracyCriterion",
    "HallucinationCriterion",
    "LLMCallerMixin",
    "LLMJudgeCriterion",
    "ResponseMatchCriterion",
    "RubricBasedCriterion",
    "SafetyCriterion",
    "SimulationGoalsCriterion",
    "TemplatedLLMCriterion",
]
