"""CRITERIA_REGISTRY: every criterion under its friendly and legacy names.

Friendly names are the ``CriteriaConfig`` field names; legacy names are each class's ``name``
(what reports record) plus a few older serialised spellings. Users may add their own classes;
``build_criteria`` reads the dict at call time, so additions are honoured.
"""

from __future__ import annotations

from referee.config import CriteriaConfig, EvalConfig
from referee.criteria.base import BaseCriterion
from referee.criteria.composite import CompositeCriterion, WeightedCriterion
from referee.criteria.exact_match import ExactMatchCriterion
from referee.criteria.keywords import ContainsKeywordsCriterion
from referee.criteria.llm import (
    FactualAccuracyCriterion,
    HallucinationCriterion,
    LLMJudgeCriterion,
    ResponseMatchCriterion,
    RubricBasedCriterion,
    SafetyCriterion,
    SimulationGoalsCriterion,
)
from referee.criteria.node_order import NodeOrderMatchCriterion
from referee.criteria.rouge import RougeMatchCriterion
from referee.criteria.tool_name import ToolNameMatchCriterion
from referee.criteria.trajectory import TrajectoryMatchCriterion

# CriteriaConfig field -> class. Every field must appear here (checked below).
_FRIENDLY: dict[str, type[BaseCriterion]] = {
    "tool_name_match": ToolNameMatchCriterion,
    "trajectory": TrajectoryMatchCriterion,
    "node_order": NodeOrderMatchCriterion,
    "response_match": ResponseMatchCriterion,
    "rouge_match": RougeMatchCriterion,
    "contains_keywords": ContainsKeywordsCriterion,
    "llm_judge": LLMJudgeCriterion,
    "rubric_based": RubricBasedCriterion,
    "factual_accuracy": FactualAccuracyCriterion,
    "hallucination": HallucinationCriterion,
    "safety": SafetyCriterion,
    "simulation_goals": SimulationGoalsCriterion,
}

# Older serialised names that earlier reports and configs may still carry.
_OLDER_SPELLINGS: dict[str, type[BaseCriterion]] = {
    "trajectory_match": TrajectoryMatchCriterion,
    "rubric_based_score": RubricBasedCriterion,
    "safety_score": SafetyCriterion,
    "factual_accuracy_score": FactualAccuracyCriterion,
    "simulation_goals_match": SimulationGoalsCriterion,
    "conversation_goals": SimulationGoalsCriterion,
}

_missing_fields = set(CriteriaConfig.model_fields) - set(_FRIENDLY)
if _missing_fields:  # pragma: no cover - guards against a config field added without a class
    raise RuntimeError(f"CriteriaConfig fields without a criterion class: {sorted(_missing_fields)}")

# Criteria that no CriteriaConfig field switches on: built directly, but resolvable by name.
# (Composite and weighted need their sub-criteria, so build_criteria never builds them.)
_BY_NAME_ONLY: list[type[BaseCriterion]] = [ExactMatchCriterion, CompositeCriterion,
                                            WeightedCriterion]

CRITERIA_REGISTRY: dict[str, type[BaseCriterion]] = {
    **_FRIENDLY,
    **{cls.name: cls for cls in [*_FRIENDLY.values(), *_BY_NAME_ONLY]},
    **_OLDER_SPELLINGS,
}


def get_criterion_class(name: str) -> type[BaseCriterion]:
    """The class registered under ``name``; a clear error listing the known names otherwise."""
    try:
        return CRITERIA_REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(CRITERIA_REGISTRY))
        raise ValueError(f"Unknown criterion {name!r}; registered names: {known}") from None


def build_criteria(eval_config: EvalConfig) -> list[BaseCriterion]:
    """Instantiate every enabled criterion of ``eval_config.criteria``, in field order."""
    criteria: list[BaseCriterion] = []
    for field, config in eval_config.criteria.enabled_items():
        criterion = get_criterion_class(field)(config=config)
        problems = criterion.validate_config()
        if problems:
            raise ValueError(f"criteria.{field}: " + "; ".join(problems))
        criteria.append(criterion)
    return criteria
