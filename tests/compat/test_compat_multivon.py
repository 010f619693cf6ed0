"""The multivon-eval (``multivon_eval``) names referee accepts: top-level evaluators, the
report's ``case_results``, ``EvalStatus`` values, the ``EvalResult`` constructor,
``JudgeConfig.resolve()``, the exception hierarchy and the BLEU/ROUGE/chrF metrics. Written from
multivon's public signatures and documented formulas; no test code copied."""

from __future__ import annotations

import json

import pytest

import referee
from referee import (
    BLEU,
    ERROR_STATUSES,
    EVALUATION_STATUSES,
    ROUGE,
    CacheError,
    CalibrationMissing,
    ChrfScore,
    ComplianceError,
    EvalCase,
    EvalReport,
    EvalResult,
    EvalStatus,
    EvalSuite,
    EvaluatorPrereqMissing,
    ExecutionResult,
    JudgeConfig,
    JudgeUnavailable,
    MultivonError,
    SecretsError,
)
from referee.evaluators.calibration import calibrated_threshold
from referee.report.model import CaseResult, CaseStatus

TOP_LEVEL_EVALUATORS = ["NotEmpty", "ExactMatch", "Contains", "RegexMatch", "JSONSchemaEval",
                        "WordCount", "Latency", "MaxLatency", "BLEU", "ROUGE", "StartsWith",
                        "Levenshtein", "ChrfScore"]


@pytest.mark.parametrize("name", TOP_LEVEL_EVALUATORS)
def test_evaluators_import_from_the_top_level(name):
    assert getattr(referee, name) is getattr(referee.evaluators, name)
    assert name in referee.__all__


def run_one(evaluator, output: str, expected: str | None = None) -> EvalResult:
    suite = EvalSuite("metric")
    suite.add_cases([EvalCase(input="q", expected_output=expected)])
    suite.add_evaluators(evaluator)
    return suite.run(lambda _: output, verbose=False).case_results[0].results[0]


def test_top_level_evaluators_score_through_a_suite():
    from referee import Contains, ExactMatch, JSONSchemaEval, NotEmpty
    assert run_one(Contains(["refund"]), "Your refund is on its way").passed
    assert not run_one(ExactMatch(), "Paris!", "Paris").passed
    assert run_one(NotEmpty(), "x").passed
    schema = {"type": "object", "required": ["id"]}
    assert run_one(JSONSchemaEval(schema), '{"id": 1}').passed
    assert not run_one(JSONSchemaEval(schema), '{"name": 1}').passed


def test_bleu_matches_multivons_formula():
    # Clipped precisions 5/6, 3/5, 2/4, 1/3; equal lengths, so no brevity penalty:
    # (5/6 * 3/5 * 2/4 * 1/3) ** (1/4) = 0.5373.
    result = run_one(BLEU(), "the cat sat on a mat", "the cat sat on the mat")
    assert result.score == pytest.approx(0.5373, abs=1e-4)
    assert result.criterion == "bleu" and result.passed
    assert run_one(BLEU(n=2), "a b", "a b").score == 1.0
    assert run_one(BLEU(), "x y z", "a b c").score == 0.0
    short = run_one(BLEU(), "the cat", "the cat sat on the mat")
    assert short.score == pytest.approx(0.1353, abs=1e-4)  # BLEU-2 of 1.0 times exp(1 - 6/2)
    assert run_one(BLEU(), "anything", None).skipped


def test_rouge_is_rouge_l_f1():
    result = run_one(ROUGE(), "the cat sat on a mat", "the cat sat on the mat")
    assert result.score == pytest.approx(0.8333, abs=1e-4)  # LCS 5 of 6 both ways
    assert result.criterion == "rouge_l"
    assert run_one(ROUGE(), "mat the on", "the cat sat on the mat").score == pytest.approx(
        2 * (2 / 3) * (2 / 6) / ((2 / 3) + (2 / 6)), abs=1e-4)


def test_chrf_averages_orders_before_f_beta():
    assert run_one(ChrfScore(), "Hello World", "hello world").score == 1.0
    assert run_one(ChrfScore(max_n=1), "ab", "abc").score == pytest.approx(
        5 * 1.0 * (2 / 3) / (4 * 1.0 + 2 / 3))
    # Order 2 is left out when one side is a single character, not counted as 0.
    assert run_one(ChrfScore(max_n=2), "a", "ab").score == pytest.approx(5 * 1 * 0.5 / (4 + 0.5))
    assert run_one(ChrfScore(case_sensitive=True), "A", "a").score == 0.0
    with pytest.raises(ValueError, match="max_n must be >= 1"):
        ChrfScore(max_n=0)


def test_eval_result_constructor_keywords_and_positions():
    by_keyword = EvalResult(evaluator="tone", score=0.4, passed=False, reason="curt",
                            metadata={"words": 3})
    by_position = EvalResult("tone", 0.4, False, "curt", {"words": 3})
    for result in (by_keyword, by_position):
        assert result.evaluator == result.criterion == "tone"
        assert result.reason == "curt" and result.metadata["words"] == 3
        assert not result.passed and result.score == 0.4
    with pytest.raises(TypeError, match="at most 5 positional"):
        EvalResult("a", 1.0, True, "", {}, "extra")
    with pytest.raises(ValueError, match="'evaluator' and 'criterion' name the same field"):
        EvalResult(evaluator="a", criterion="b", score=1.0, passed=True)


def test_eval_status_values_and_sets():
    assert EvalStatus is CaseStatus
    assert EvalStatus.PASSED == "passed" and EvalStatus.FAILED_QUALITY == "failed_quality"
    assert EvalStatus.FAILED_QUALITY is EvalStatus.FAILED
    assert EvalStatus("judge_error") is EvalStatus.JUDGE_ERROR
    assert EvalStatus("PASSED") is EvalStatus.PASSED
    assert EvalStatus.TIMEOUT != "passed"
    assert EvalStatus.FAILED.peer_value == "failed_quality"
    assert EVALUATION_STATUSES == {EvalStatus.PASSED, EvalStatus.FAILED_QUALITY}
    assert ERROR_STATUSES == {EvalStatus.MODEL_ERROR, EvalStatus.JUDGE_ERROR,
                              EvalStatus.EVALUATOR_ERROR, EvalStatus.TIMEOUT}
    assert json.dumps(EvalStatus.PASSED) == '"PASSED"'  # stored values keep referee's spelling


def test_multivon_case_results_and_report():
    ok = CaseResult(case_input="q", actual_output="a", results=[EvalResult("x", 1.0, True)])
    bad = CaseResult(case_input="q", actual_output="a", results=[EvalResult("x", 0.2, False)],
                     judge_error="429")  # a known failure beats a judge error
    judge = CaseResult(case_input="q", actual_output="", results=[], judge_error="429",
                       latency_ms=120)
    model = CaseResult(case_input="q", actual_output="", results=[EvalResult("x", 1.0, True)],
                       model_error="boom")
    skipped = CaseResult(case_input="q", actual_output="", results=[], skipped=True)
    assert [c.status for c in (ok, bad, judge, model, skipped)] == [
        EvalStatus.PASSED, EvalStatus.FAILED_QUALITY, EvalStatus.JUDGE_ERROR,
        EvalStatus.MODEL_ERROR, EvalStatus.SKIPPED]
    assert judge.latency_ms == 120 and ok.case_input == "q" and ok.actual_output == "a"
    report = EvalReport(suite_name="s", case_results=[ok, bad, judge, model, skipped])
    assert report.case_results is report.cases and report.name == "s"
    assert (report.evaluated, report.passed, report.errors, report.skipped) == (2, 1, 2, 1)
    assert report.pass_rate == 0.5 and report.avg_score == pytest.approx(0.6)
    assert report.errors_by_kind == {"judge_error": 1, "model_error": 1}


def test_judge_config_resolve_fills_from_environment_and_defaults(monkeypatch):
    monkeypatch.setenv("JUDGE_PROVIDER", "openai")
    monkeypatch.setenv("JUDGE_MODEL", "gpt-4o-mini")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    resolved = JudgeConfig().resolve()
    assert (resolved.provider, resolved.model) == ("openai", "gpt-4o-mini")
    assert resolved.base_url == "http://127.0.0.1:9/v1"
    assert (resolved.temperature, resolved.max_tokens, resolved.timeout) == (0.0, 1024, 30.0)
    explicit = JudgeConfig(provider="anthropic", model="claude-haiku-4-5", temperature=0.2).resolve()
    assert (explicit.provider, explicit.model, explicit.temperature) == (
        "anthropic", "claude-haiku-4-5", 0.2)
    referee.configure(JudgeConfig(model="configured-model"))
    try:
        monkeypatch.delenv("JUDGE_MODEL")
        # resolve() looks at this config, the environment and the defaults, not configure().
        assert JudgeConfig(provider="openai").resolve().model != "configured-model"
    finally:
        referee.configure(None)


def test_exception_hierarchy():
    assert MultivonError is referee.RefereeError
    for cls in (JudgeUnavailable, CalibrationMissing, EvaluatorPrereqMissing, CacheError,
                SecretsError, ComplianceError):
        assert issubclass(cls, MultivonError)
    missing = EvaluatorPrereqMissing("Faithfulness", "context")
    assert (missing.evaluator, missing.missing) == ("Faithfulness", "context")
    assert "case.context" in str(missing)
    secret = SecretsError("OPENAI_API_KEY", "env")
    assert secret.key == "OPENAI_API_KEY" and "via env" in str(secret)
    unavailable = JudgeUnavailable("down", provider="openai", model="m")
    assert (unavailable.provider, unavailable.model) == ("openai", "m")


def test_calibrated_threshold_strict_raises_calibration_missing():
    config = JudgeConfig(provider="openai", model="frontier-9000").resolve()
    with pytest.raises(CalibrationMissing) as info:
        calibrated_threshold("hallucination", config, strict=True)
    assert (info.value.evaluator, info.value.judge_model) == ("hallucination", "frontier-9000")
    assert calibrated_threshold("hallucination", config) == 0.70
    assert 0 < calibrated_threshold("faithfulness", "gpt-4o-mini", strict=True) < 1
