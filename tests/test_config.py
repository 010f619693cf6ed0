"""CriterionConfig, CriteriaConfig and EvalConfig: documented fields, defaults and errors."""

import json

import pytest
from pydantic import ValidationError

from referee import CriteriaConfig, CriterionConfig, EvalConfig, InputError, MatchType, Rubric


def test_criterion_config_defaults():
    config = CriterionConfig()
    assert config.threshold == 0.8
    assert config.match_type is MatchType.EXACT
    assert config.judge_model == "gemini-2.5-flash"
    assert config.num_samples == 3
    assert config.api_style == "responses"
    assert config.check_args is False and config.enabled is True
    assert config.keywords == [] and config.rubrics == []


@pytest.mark.parametrize("factory, threshold", [
    (lambda: CriterionConfig.tool_name_match(), 1.0),
    (lambda: CriterionConfig.trajectory(), 1.0),
    (lambda: CriterionConfig.node_order(), 1.0),
    (lambda: CriterionConfig.response_match(), 0.8),
    (lambda: CriterionConfig.rouge_match(), 0.5),
    (lambda: CriterionConfig.contains_keywords(keywords=["x"]), 1.0),
    (lambda: CriterionConfig.llm_judge(), 0.8),
    (lambda: CriterionConfig.rubric_based(rubrics=[]), 0.8),
])
def test_factory_threshold_defaults(factory, threshold):
    assert factory().threshold == threshold


def test_factories_set_their_fields():
    config = CriterionConfig.trajectory(threshold=0.5, match_type=MatchType.ANY_ORDER, check_args=True)
    assert (config.threshold, config.match_type, config.check_args) == (0.5, MatchType.ANY_ORDER, True)
    assert CriterionConfig.node_order(match_type=MatchType.IN_ORDER).match_type is MatchType.IN_ORDER
    assert CriterionConfig.contains_keywords(keywords=["a"]).keywords == ["a"]
    rubric = Rubric(rubric_id="concise", content="Under 100 words.", weight=0.5)
    assert CriterionConfig.rubric_based(rubrics=[rubric]).rubrics == [rubric]
    assert CriterionConfig.response_match(num_samples=5).num_samples == 5


def test_match_type_accepts_names_and_values():
    assert MatchType("in_order") is MatchType.IN_ORDER
    assert MatchType("IN_ORDER") is MatchType.IN_ORDER
    assert MatchType("any-order") is MatchType.ANY_ORDER
    assert CriterionConfig(match_type="exact").match_type is MatchType.EXACT
    with pytest.raises(ValidationError):
        CriterionConfig(match_type="fuzzy")


@pytest.mark.parametrize("field, value", [("threshold", 1.5), ("threshold", -0.1),
                                          ("num_samples", 0), ("api_style", "soap")])
def test_invalid_criterion_config_values_are_rejected(field, value):
    with pytest.raises(ValidationError, match=field):
        CriterionConfig(**{field: value})


def test_criteria_config_forbids_unknown_fields():
    with pytest.raises(ValidationError, match="exact_match"):
        CriteriaConfig(exact_match=CriterionConfig())


def test_enable_and_disable_criterion():
    config = EvalConfig()
    config.enable_criterion("rouge_match", CriterionConfig.rouge_match())
    config.enable_criterion("tool_name_match")
    assert config.criteria.rouge_match.threshold == 0.5
    assert config.criteria.tool_name_match.threshold == 0.8
    assert [name for name, _ in config.criteria.enabled_items()] == ["tool_name_match", "rouge_match"]
    config.disable_criterion("rouge_match")
    assert [name for name, _ in config.criteria.enabled_items()] == ["tool_name_match"]
    config.disable_criterion("safety")  # not configured: nothing to disable, no error


def test_get_criterion_config_is_the_peer_apis_lookup():
    # Public in the AgentEvaluator-style EvalConfig: users call it though referee does not.
    config = EvalConfig()
    rouge = CriterionConfig.rouge_match()
    config.enable_criterion("rouge_match", rouge)
    assert config.get_criterion_config("rouge_match") is config.criteria.rouge_match
    assert config.get_criterion_config("safety") is None


def test_enable_unknown_criterion_message():
    with pytest.raises(ValueError, match=r"^Unknown criterion field: 'exact_match'$"):
        EvalConfig().enable_criterion("exact_match")


def test_presets():
    default = EvalConfig.default()
    assert default.criteria.trajectory.match_type is MatchType.EXACT
    assert default.criteria.trajectory.threshold == 1.0
    assert EvalConfig.strict().criteria.trajectory.check_args is True
    assert EvalConfig.relaxed().criteria.trajectory.match_type is MatchType.IN_ORDER


def test_with_rubrics_returns_a_copy():
    base = EvalConfig.default()
    rubric = Rubric.create("r", "Be brief.")
    changed = base.with_rubrics([rubric])
    assert changed.criteria.rubric_based.rubrics == [rubric]
    assert base.criteria.rubric_based is None


def test_config_file_round_trip(tmp_path):
    path = tmp_path / "eval.json"
    EvalConfig.strict().to_file(path)
    assert EvalConfig.from_file(path) == EvalConfig.strict()


def test_config_file_errors_name_file_and_field(tmp_path):
    path = tmp_path / "eval.json"
    path.write_text('{"criteria": {"trajectory": {"threshold": "high"}}}')
    with pytest.raises(InputError, match=r"eval\.json: field 'criteria\.trajectory\.threshold'"):
        EvalConfig.from_file(path)
    path.write_text('{"criteria": {"exact_match": {}}}')
    with pytest.raises(InputError, match=r"field 'criteria\.exact_match'"):
        EvalConfig.from_file(path)
    path.write_text('{"criteria": ')
    with pytest.raises(InputError, match=r"eval\.json:1"):
        EvalConfig.from_file(path)
    assert json.loads(EvalConfig().model_dump_json())["criteria"]["trajectory"] is None


def test_misspelt_config_field_is_an_error_naming_the_field(tmp_path):
    import pytest

    from referee import EvalConfig
    from referee.errors import InputError

    path = tmp_path / "eval_config.json"
    path.write_text('{"criteria": {"trajectory": {"threshold": 1.0, "num_sampls": 2}}}')
    with pytest.raises(InputError) as info:
        EvalConfig.from_file(path)
    message = str(info.value)
    assert "eval_config.json" in message
    assert "criteria.trajectory.num_sampls" in message
    assert "num_samples" in message  # the valid names are listed


def test_malformed_referee_cache_env_fails_before_any_case(monkeypatch):
    import pytest

    from referee import EvalCase, EvalSuite
    from referee.evaluators.deterministic import NotEmpty

    monkeypatch.setenv("REFEREE_CACHE", "maybe")
    suite = EvalSuite("env-check")
    suite.add_case(EvalCase(input="q"))
    suite.add_evaluator(NotEmpty())
    calls = []
    with pytest.raises(ValueError, match="REFEREE_CACHE='maybe'"):
        suite.run(lambda q: calls.append(q) or "a", verbose=False, save=False)
    assert calls == []
