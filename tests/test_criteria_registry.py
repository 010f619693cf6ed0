"""CRITERIA_REGISTRY, build_criteria and the public import surface of the criteria."""

import pytest

import referee
from referee import CriteriaConfig, CriterionConfig, EvalConfig, MatchType, SyncCriterion
from referee.criteria import (
    CRITERIA_REGISTRY,
    ContainsKeywordsCriterion,
    ExactMatchCriterion,
    FactualAccuracyCriterion,
    HallucinationCriterion,
    LLMJudgeCriterion,
    NodeOrderMatchCriterion,
    ResponseMatchCriterion,
    RougeMatchCriterion,
    RubricBasedCriterion,
    SafetyCriterion,
    SimulationGoalsCriterion,
    TemplatedLLMCriterion,
    ToolNameMatchCriterion,
    TrajectoryMatchCriterion,
    build_criteria,
)

DOCUMENTED_NAMES = {
    ExactMatchCriterion: "exact_match",
    ContainsKeywordsCriterion: "contains_keywords",
    RougeMatchCriterion: "rouge_match",
    ResponseMatchCriterion: "response_match_score",
    LLMJudgeCriterion: "final_response_match_v2",
    RubricBasedCriterion: "rubric_based_final_response_quality_v1",
    FactualAccuracyCriterion: "factual_accuracy_v1",
    HallucinationCriterion: "hallucinations_v1",
    SafetyCriterion: "safety_v1",
    TrajectoryMatchCriterion: "tool_trajectory_avg_score",
    NodeOrderMatchCriterion: "node_order_score",
    ToolNameMatchCriterion: "tool_name_match_score",
    SimulationGoalsCriterion: "simulation_goals",
}


def test_documented_report_names():
    for cls, name in DOCUMENTED_NAMES.items():
        assert cls.name == name, cls


def test_every_criteria_config_field_is_a_friendly_name():
    for field in CriteriaConfig.model_fields:
        assert field in CRITERIA_REGISTRY, field
    assert CRITERIA_REGISTRY["trajectory"] is TrajectoryMatchCriterion
    assert CRITERIA_REGISTRY["response_match"] is ResponseMatchCriterion
    assert CRITERIA_REGISTRY["llm_judge"] is LLMJudgeCriterion


def test_every_class_name_is_a_legacy_key_including_exact_match():
    for cls, name in DOCUMENTED_NAMES.items():
        assert CRITERIA_REGISTRY[name] is cls
    assert CRITERIA_REGISTRY["exact_match"] is ExactMatchCriterion


def test_registry_is_importable_from_both_places_as_one_object():
    from referee.criteria.registry import CRITERIA_REGISTRY as inner
    assert inner is CRITERIA_REGISTRY
    assert issubclass(TemplatedLLMCriterion, referee.BaseCriterion)


def test_document_000_import_block_resolves_from_referee():
    names = ["BaseCriterion", "SyncCriterion", "CompositeCriterion", "WeightedCriterion",
             "ExactMatchCriterion", "ContainsKeywordsCriterion", "ResponseMatchCriterion",
             "RougeMatchCriterion", "LLMJudgeCriterion", "RubricBasedCriterion",
             "FactualAccuracyCriterion", "HallucinationCriterion", "SafetyCriterion",
             "SimulationGoalsCriterion", "TrajectoryMatchCriterion", "NodeOrderMatchCriterion",
             "ToolNameMatchCriterion", "CriterionConfig", "MatchType", "Rubric", "LLMCallerMixin"]
    import referee.criteria as criteria_module
    for name in names:
        assert getattr(referee, name) is not None
        if name not in ("CriterionConfig", "MatchType", "Rubric"):
            assert getattr(referee, name) is getattr(criteria_module, name)


def test_adding_a_user_class_to_the_registry_makes_it_resolvable():
    class MaxLengthCriterion(SyncCriterion):
        name = "max_length"

        def evaluate_sync(self, actual, expected):
            return self._result(1.0 if len(actual.actual_response) <= 500 else 0.0)

    CRITERIA_REGISTRY["max_length"] = MaxLengthCriterion
    try:
        from referee.criteria import get_criterion_class
        assert get_criterion_class("max_length") is MaxLengthCriterion
    finally:
        del CRITERIA_REGISTRY["max_length"]


def test_unknown_name_error_lists_known_names():
    from referee.criteria import get_criterion_class
    with pytest.raises(ValueError, match=r"Unknown criterion 'nope'.*exact_match"):
        get_criterion_class("nope")


def test_build_criteria_instantiates_enabled_fields_with_their_config():
    config = EvalConfig(criteria=CriteriaConfig(
        trajectory=CriterionConfig.trajectory(match_type=MatchType.IN_ORDER, check_args=True),
        contains_keywords=CriterionConfig.contains_keywords(keywords=["refund"]),
        rouge_match=CriterionConfig(enabled=False),
    ))
    criteria = build_criteria(config)
    assert [type(c) for c in criteria] == [TrajectoryMatchCriterion, ContainsKeywordsCriterion]
    assert criteria[0].config.match_type is MatchType.IN_ORDER and criteria[0].config.check_args
    assert criteria[1].keywords == ["refund"]


def test_build_criteria_of_default_config():
    criteria = build_criteria(EvalConfig.default())
    assert [c.name for c in criteria] == ["tool_trajectory_avg_score", "response_match_score"]
    assert build_criteria(EvalConfig()) == []


def test_build_criteria_reports_a_missing_registry_entry():
    saved = CRITERIA_REGISTRY.pop("rouge_match")
    try:
        config = EvalConfig(criteria=CriteriaConfig(rouge_match=CriterionConfig()))
        with pytest.raises(ValueError, match="Unknown criterion 'rouge_match'"):
            build_criteria(config)
    finally:
        CRITERIA_REGISTRY["rouge_match"] = saved


def test_build_criteria_rejects_invalid_config():
    bad = CriterionConfig.model_construct(threshold=1.5, num_samples=1, enabled=True,
                                          match_type=MatchType.EXACT, check_args=False,
                                          keywords=[], rubrics=[])
    config = EvalConfig(criteria=CriteriaConfig.model_construct(tool_name_match=bad))
    with pytest.raises(ValueError, match=r"criteria.tool_name_match: threshold must be"):
        build_criteria(config)
