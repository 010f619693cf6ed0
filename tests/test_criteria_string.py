"""ExactMatchCriterion, ContainsKeywordsCriterion and RougeMatchCriterion (document 000)."""

import pytest

from referee import (
    ContainsKeywordsCriterion,
    CriterionConfig,
    EvalCase,
    ExactMatchCriterion,
    ExecutionResult,
    Invocation,
    RougeMatchCriterion,
)


def run(text: str) -> ExecutionResult:
    return ExecutionResult(actual_response=text)


# ExactMatchCriterion ------------------------------------------------------------------------


async def test_exact_match_strips_actual_and_scores_one():
    case = EvalCase(input="q", expected_output="Paris")
    result = await ExactMatchCriterion().evaluate(run("  Paris\n"), case)
    assert (result.criterion, result.score, result.passed) == ("exact_match", 1.0, True)
    assert result.details["match"] is True
    assert result.reason


async def test_exact_match_has_no_partial_credit_and_is_case_sensitive():
    case = EvalCase(input="q", expected_output="Paris")
    for text in ("paris", "Paris, France", ""):
        result = await ExactMatchCriterion().evaluate(run(text), case)
        assert result.score == 0.0 and result.passed is False
        assert result.details["match"] is False
        assert "Paris" in result.reason


async def test_exact_match_uses_last_non_empty_expected_response():
    case = EvalCase.multi_turn([
        Invocation(user_content="a", expected_final_response="first"),
        Invocation(user_content="b", expected_final_response="second"),
        Invocation(user_content="c", expected_final_response=""),
    ])
    assert (await ExactMatchCriterion().evaluate(run("second"), case)).score == 1.0
    assert (await ExactMatchCriterion().evaluate(run("first"), case)).score == 0.0


async def test_exact_match_without_expected_response_is_skipped_not_passed():
    result = await ExactMatchCriterion().evaluate(run(""), EvalCase(input="q"))
    assert result.skipped and not result.passed
    assert result.details["match"] is False
    assert "expected final response" in result.reason


async def test_exact_match_compares_the_expected_text_as_written():
    # Document 000 strips actual_response only; the expected response is taken as written.
    case = EvalCase(input="q", expected_output="line one\nline two\n")
    result = await ExactMatchCriterion().evaluate(run("line one\nline two\n"), case)
    assert not result.passed and result.details["expected_length"] == 18
    padded = EvalCase(input="q", expected_output=" Paris")
    assert (await ExactMatchCriterion().evaluate(run(" Paris "), padded)).score == 0.0
    assert (await ExactMatchCriterion().evaluate(
        run("Paris"), EvalCase(input="q", expected_output="Paris"))).score == 1.0


# ContainsKeywordsCriterion ------------------------------------------------------------------


async def test_keywords_score_is_found_over_total_case_insensitively():
    criterion = ContainsKeywordsCriterion(keywords=["refund", "7 days", "receipt"])
    result = await criterion.evaluate(run("A REFUND takes 7 Days."), EvalCase(input="q"))
    assert result.criterion == "contains_keywords"
    assert result.score == pytest.approx(2 / 3)
    assert result.details["found"] == ["refund", "7 days"]
    assert result.details["missing"] == ["receipt"]
    assert result.details["keywords"] == ["refund", "7 days", "receipt"]
    assert "receipt" in result.reason
    assert not result.passed  # default threshold 0.8


async def test_config_keywords_take_precedence_over_argument():
    criterion = ContainsKeywordsCriterion(
        keywords=["ignored"], config=CriterionConfig.contains_keywords(keywords=["used"]))
    assert criterion.keywords == ["used"]
    assert (await criterion.evaluate(run("used here"), EvalCase(input="q"))).score == 1.0


async def test_empty_config_keywords_fall_back_to_argument():
    criterion = ContainsKeywordsCriterion(keywords=["arg"], config=CriterionConfig(threshold=1.0))
    assert criterion.keywords == ["arg"]
    assert criterion.threshold == 1.0


async def test_no_keywords_scores_one_with_note():
    result = await ContainsKeywordsCriterion().evaluate(run("anything"), EvalCase(input="q"))
    assert result.score == 1.0 and result.passed
    assert result.details["note"] == "No keywords specified"


async def test_single_string_keyword_is_one_keyword():
    criterion = ContainsKeywordsCriterion(keywords="refund")
    assert criterion.keywords == ["refund"]
    assert (await criterion.evaluate(run("no"), EvalCase(input="q"))).score == 0.0


async def test_contains_keywords_factory_threshold_default_is_one():
    config = CriterionConfig.contains_keywords(keywords=["a", "b"])
    result = await ContainsKeywordsCriterion(config=config).evaluate(run("a"), EvalCase(input="q"))
    assert result.score == 0.5 and result.threshold == 1.0 and not result.passed


# RougeMatchCriterion ------------------------------------------------------------------------


async def test_rouge_uses_unigram_sets_lowercased_without_punctuation():
    case = EvalCase(input="q", expected_output="The cat sat on the mat.")
    result = await RougeMatchCriterion().evaluate(run("the the CAT, sat!"), case)
    # actual set {the, cat, sat}; expected set {the, cat, sat, on, mat}
    assert result.criterion == "rouge_match"
    assert result.details["precision"] == pytest.approx(1.0)
    assert result.details["recall"] == pytest.approx(3 / 5)
    assert result.details["f1"] == pytest.approx(2 * 0.6 / 1.6)
    assert result.score == pytest.approx(0.75)
    assert result.details["actual_response"] == "the the CAT, sat!"
    assert result.details["expected_response"] == "The cat sat on the mat."


async def test_rouge_details_keep_first_500_characters():
    long_text = "word " * 300
    case = EvalCase(input="q", expected_output=long_text)
    result = await RougeMatchCriterion().evaluate(run(long_text + "tail"), case)
    assert result.details["actual_response"] == (long_text + "tail")[:500]
    assert result.details["expected_response"] == long_text[:500]


async def test_rouge_no_overlap_scores_zero():
    case = EvalCase(input="q", expected_output="alpha beta")
    assert (await RougeMatchCriterion().evaluate(run("gamma"), case)).score == 0.0


async def test_rouge_without_expected_scores_one_if_agent_silent():
    result = await RougeMatchCriterion().evaluate(run(""), EvalCase(input="q"))
    assert result.score == 1.0
    result = await RougeMatchCriterion().evaluate(run("   "), EvalCase(input="q"))
    assert result.score == 1.0


async def test_rouge_without_expected_scores_half_if_agent_spoke():
    result = await RougeMatchCriterion().evaluate(run("hello"), EvalCase(input="q"))
    assert result.score == 0.5
    assert result.reason


async def test_rouge_reads_only_threshold():
    criterion = RougeMatchCriterion(config=CriterionConfig.rouge_match())
    case = EvalCase(input="q", expected_output="a b c d")
    result = await criterion.evaluate(run("a b"), case)
    assert result.threshold == 0.5
    assert result.score == pytest.approx(2 / 3) and result.passed
