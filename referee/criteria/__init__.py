"""Every AgentEvaluator-style criterion, the protocol they share, and ``CRITERIA_REGISTRY``."""

from referee.criteria.base import (
    BaseCriterion,
    Criterion,
    JudgedCriterion,
    PreparedCriterion,
    SyncCriterion,
)
from referee.criteria.composite import CompositeCriterion, WeightedCriterion
from referee.criteria.exact_match import ExactMatchCriterion
from referee.criteria.keywords import ContainsKeywordsCriterion
from referee.criteria.llm import (
    FactualAccuracyCriterion,
    HallucinationCriterion,
    LLMCallerMixin,
    LLMJudgeCriterion,
    ResponseMatchCriterion,
    RubricBasedCriterion,
    SafetyCriterion,
    SimulationGoalsCriterion,
    TemplatedLLMCriterion,
)
from referee.criteria.node_order import NodeOrderMatchCriterion
from referee.criteria.registry import CRITERIA_REGISTRY, build_criteria, get_criterion_class
from referee.criteria.rouge import RougeMatchCriterion
from referee.criteria.tool_name import ToolNameMatchCriterion
from referee.criteria.trajectory import TrajectoryMatchCriterion

# What every criterion returns; 10xgraph code imports it from its criteria package.
from referee.result import CriterionResult

__all__ = [
    "BaseCriterion",
    "CRITERIA_REGISTRY",
    "CompositeCriterion",
    "ContainsKeywordsCriterion",
    "Criterion",
    "CriterionResult",
    "ExactMatchCriterion",
    "FactualAccuracyCriterion",
    "HallucinationCriterion",
    "JudgedCriterion",
    "LLMCallerMixin",
    "LLMJudgeCriterion",
    "NodeOrderMatchCriterion",
    "PreparedCriterion",
    "ResponseMatchCriterion",
    "RougeMatchCriterion",
    "RubricBasedCriterion",
    "SafetyCriterion",
    "SimulationGoalsCriterion",
    "SyncCriterion",
    "TemplatedLLMCriterion",
    "ToolNameMatchCriterion",
    "TrajectoryMatchCriterion",
    "WeightedCriterion",
    "build_criteria",
    "get_criterion_class",
]
