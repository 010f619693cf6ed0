"""referee.evaluators.deterministic: the document-001 family of string, format and latency checks."""

import re

import pytest

from referee import EvalCase, ExecutionResult
from referee.criteria import BaseCriterion
from referee.evaluators.deterministic import (
    Contains,
    ExactMatch,
    JSONSchema,
    JSONSchemaEval,
    Latency,
    Levenshtein,
    MaxLatency,
    NotEmpty,
    RegexMatch,
    StartsWith,
    WordCount,
    levenshtein_distance,
)

CASE = EvalCase(input="question")


async def score(evaluator, output, case=CASE, latency_s=None):
    result = await evaluator.evaluate(
        ExecutionResult(actual_response=output, latency_s=latency_s), case)
    assert result.criterion == evaluator.name
    assert result.reason, "every verdict explains itself"
    return result


def test_every_evaluator_is_a_criterion_with_a_name():
    evaluators = [Contains(["ok"]), ExactMatch(), StartsWith("a"), RegexMatch("a"), NotEmpty(),
                  WordCount(max=3), JSONSchema({"type": "object"}), Levenshtein(), MaxLatency(100)]
    names = [e.name for e in evaluators]
    assert names == ["contains", "exact_match", "starts_with", "regex_match", "not_empty",
                     "word_count", "json_schema", "levenshtein", "max_latency"]
    assert all(isinstance(e, BaseCriterion) for e in evaluators)


# Contains -----------------------------------------------------------------------------------


async def test_document_contains_example_scores_ok():
    evaluator = Contains(["ok"])
    assert evaluator.threshold == 1.0
    assert (await score(evaluator, "ok")).passed
    assert not (await score(evaluator, "nope")).passed


async def test_contains_score_is_fraction_found_case_insensitive():
    result = await score(Contains(["Refund", "receipt", "7 days"]), "refund in 7 DAYS")
    assert result.score == pytest.approx(2 / 3) and not result.passed
    assert result.details["found"] == ["Refund", "7 days"]
    assert result.details["missing"] == ["receipt"]
    assert "receipt" in result.reason


async def test_contains_case_sensitive_and_threshold():
    result = await score(Contains(["OK", "Fine"], case_sensitive=True, threshold=0.5), "ok Fine")
    assert result.score == 0.5 and result.passed


async def test_contains_match_any():
    evaluator = Contains(["yes", "sure"], match_any=True)
    assert (await score(evaluator, "Sure thing")).score == 1.0
    result = await score(evaluator, "no")
    assert result.score == 0.0 and "None of" in result.reason


def test_contains_argument_order_and_validation():
    evaluator = Contains(["a"], False, 0.5, True)
    assert (evaluator.case_sensitive, evaluator.threshold, evaluator.match_any) == (False, 0.5, True)
    assert Contains("ok").substrings == ["ok"]
    with pytest.raises(ValueError, match="at least one substring"):
        Contains([])


# ExactMatch / StartsWith / RegexMatch / NotEmpty --------------------------------------------


async def test_exact_match_strips_and_ignores_case_by_default():
    case = EvalCase(input="q", expected_output="Paris")
    assert (await score(ExactMatch(), " paris\n", case)).score == 1.0
    result = await score(ExactMatch(case_sensitive=True), "paris", case)
    assert result.score == 0.0 and "'Paris'" in result.reason


async def test_exact_match_without_expected_output_is_skipped():
    result = await score(ExactMatch(), "anything")
    assert result.skipped and not result.passed
    assert "expected_output" in result.reason


async def test_starts_with():
    assert (await score(StartsWith("Dear"), "  dear customer")).passed
    assert not (await score(StartsWith("Dear", case_sensitive=True), "dear customer")).passed
    assert not (await score(StartsWith("Dear"), "Hi")).passed


async def test_regex_match_searches_with_ignorecase_by_default():
    result = await score(RegexMatch(r"order #\d+"), "Your ORDER #123 shipped")
    assert result.passed and result.details["match"] == "ORDER #123"
    assert not (await score(RegexMatch(r"order", flags=0), "ORDER")).passed
    assert RegexMatch(r"x", flags=re.IGNORECASE | re.MULTILINE).pattern.flags & re.MULTILINE


def test_regex_match_rejects_invalid_pattern():
    with pytest.raises(ValueError, match=r"'\(' is not a valid regular expression"):
        RegexMatch("(")


async def test_not_empty():
    assert (await score(NotEmpty(), "x")).passed
    result = await score(NotEmpty(), " \n\t")
    assert not result.passed and result.reason == "Output is empty."


# WordCount ----------------------------------------------------------------------------------


async def test_word_count_bounds_and_aliases():
    assert (await score(WordCount(min_words=2, max_words=3), "one two three")).passed
    assert not (await score(WordCount(min=2, max=3), "one two three four")).passed
    result = await score(WordCount(min=5), "too short")
    assert not result.passed and result.details["word_count"] == 2
    assert (await score(WordCount(max=1), "")).passed
    assert WordCount(3, 5).min_words == 3


def test_word_count_rejects_impossible_bounds():
    with pytest.raises(ValueError, match="exceeds"):
        WordCount(min=5, max=2)
    with pytest.raises(ValueError, match="must not be negative"):
        WordCount(max_words=-1)


# JSONSchema ---------------------------------------------------------------------------------


SCHEMA = {"type": "object", "required": ["name", "tags"],
          "properties": {"name": {"type": "string"},
                         "tags": {"type": "array", "items": {"type": "string"}}}}


async def test_json_schema_valid_and_violations():
    assert (await score(JSONSchema(SCHEMA), '{"name": "x", "tags": ["a"]}')).passed
    result = await score(JSONSchema(SCHEMA), '{"name": "x", "tags": ["a", 2]}')
    assert not result.passed and result.details["valid_json"] is True
    assert result.details["errors"] == ["$.tags[1]: 2 is not of type 'string'"]
    assert "$.tags[1]" in result.reason


async def test_json_schema_invalid_json_fails_with_reason():
    result = await score(JSONSchema(SCHEMA), '```json\n{"name": "x"}\n```')
    assert result.score == 0.0 and result.details["valid_json"] is False
    assert result.reason.startswith("Output is not valid JSON")


def test_json_schema_rejects_invalid_schema_and_keeps_alias():
    with pytest.raises(ValueError, match="schema is invalid"):
        JSONSchema({"type": "no-such-type"})
    assert JSONSchemaEval is JSONSchema


# Levenshtein --------------------------------------------------------------------------------


def test_levenshtein_distance():
    assert levenshtein_distance("kitten", "sitting") == 3
    assert levenshtein_distance("", "abc") == 3
    assert levenshtein_distance("same", "same") == 0


async def test_levenshtein_similarity_against_expected_output():
    case = EvalCase(input="q", expected_output="kitten")
    result = await score(Levenshtein(), "sitting", case)
    assert result.score == pytest.approx(1 - 3 / 7) and not result.passed
    assert result.details["distance"] == 3
    assert (await score(Levenshtein(), "KITTEN", case)).score == 1.0
    assert (await score(Levenshtein(case_sensitive=True), "KITTEN", case)).score == 0.0
    empty = EvalCase(input="q", expected_output="")
    assert (await score(Levenshtein(), "", empty)).score == 1.0


async def test_levenshtein_without_expected_output_is_skipped():
    result = await score(Levenshtein(), "text")
    assert result.skipped and "expected_output" in result.reason


# MaxLatency ---------------------------------------------------------------------------------


async def test_max_latency_reads_execution_latency():
    assert (await score(MaxLatency(500), "x", latency_s=0.2)).passed
    result = await score(MaxLatency(max_s=0.5), "x", latency_s=0.75)
    assert result.score == pytest.approx(0.5) and not result.passed
    assert result.details["latency_ms"] == pytest.approx(750)
    assert (await score(MaxLatency(100), "x", latency_s=5)).score == 0.0


async def test_max_latency_without_measurement_is_skipped():
    result = await score(MaxLatency(100), "x")
    assert result.skipped and "latency_s" in result.reason


def test_max_latency_needs_one_positive_limit():
    with pytest.raises(ValueError, match="exactly one"):
        MaxLatency()
    with pytest.raises(ValueError, match="exactly one"):
        MaxLatency(100, max_s=1)
    with pytest.raises(ValueError, match="positive"):
        MaxLatency(0)
    assert Latency(250).name == "latency" and Latency(250).max_ms == 250
