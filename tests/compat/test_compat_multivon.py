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
    assert name in dir(referee)  # a peer's name: importable, not in __all__ (issue 29)


def run_one(evaluator, output: str, expected: str | None = None) -> EvalResult:
    suite = EvalSuite("metric")
    suite.add_cases([EvalCase(input="q", expected_output=expected)])
    suite.add_evaluators(evaluator)
    return suite.run(lambda _: output, verbose=False, save=False).case_results[0].results[0]


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


# --- Evaluator: the base class multivon users subclass -------------------------------------

from referee import (  # noqa: E402 - grouped with the tests that use them
    AcceptancePolicy,
    AgentStep,
    CheckRequirement,
    EvalGateFailure,
    Evaluator,
    JudgeRetry,
    SliceRequirement,
    ToolCall,
    async_sleep_for_attempt,
    should_retry,
    sleep_for_attempt,
)
from referee.testing.server import ScriptedJudgeServer  # noqa: E402


class WordBudget(Evaluator):
    """A user's evaluator written the multivon way."""

    name = "word_budget"

    def __init__(self, limit: int, threshold: float = 1.0) -> None:
        super().__init__(threshold=threshold)
        self.limit = limit
        self.seen_latency: list[float | None] = []

    def evaluate(self, case, output, latency_ms=None):
        self.seen_latency.append(latency_ms)
        words = len(output.split())
        return self._result(1.0 if words <= self.limit else 0.0, f"{words} words", words=words)


def test_evaluator_subclass_called_by_hand_returns_its_own_result():
    judge = WordBudget(limit=3)
    result = judge.evaluate(EvalCase(input="q"), "one two three four")
    assert isinstance(result, EvalResult)
    assert (result.evaluator, result.score, result.passed) == ("word_budget", 0.0, False)
    assert result.reason == "4 words" and result.metadata["words"] == 4
    assert judge.threshold == 1.0 and judge.uses_llm_judge is False


def test_evaluator_subclass_runs_in_a_suite_through_the_protocol():
    judge = WordBudget(limit=3)
    suite = EvalSuite("budget").add_cases([EvalCase(input="short", case_id="s"),
                                           EvalCase(input="long", case_id="l")])
    suite.add_evaluator(judge)
    report = suite.run(lambda q: "ok" if q == "short" else "far too many words here",
                       verbose=False, save=False)
    by_id = {c.eval_id: c for c in report.case_results}
    assert by_id["s"].status == EvalStatus.PASSED and by_id["l"].status == EvalStatus.FAILED
    assert by_id["l"].results[0].reason == "5 words"
    assert by_id["l"].results[0].threshold == 1.0
    # The model call's latency reaches an evaluate() that asks for latency_ms.
    assert all(isinstance(ms, float) and ms >= 0 for ms in judge.seen_latency)


async def test_evaluator_protocol_call_is_awaitable():
    result = await WordBudget(limit=1).evaluate(ExecutionResult(actual_response="a b"),
                                                EvalCase(input="q"))
    assert result.score == 0.0 and not result.passed


def test_evaluator_skip_judge_outage_and_crash_map_to_referee_statuses():
    class NeedsContext(Evaluator):
        name = "needs_context"

        def evaluate(self, case, output):
            if not case.context:
                return EvalResult(self.name, 0.0, False, "no context", {"skipped": True})
            return self._result(1.0, "grounded")

    class Outage(Evaluator):
        name = "outage"

        def evaluate(self, case, output):
            raise JudgeUnavailable("429 from the judge")

    class Broken(Evaluator):
        name = "broken"

        def evaluate(self, case, output):
            raise KeyError("oops")

    def run(*evaluators):
        suite = EvalSuite("statuses").add_cases([EvalCase(input="q")]).add_evaluators(*evaluators)
        return suite.run(lambda _: "a", verbose=False, save=False).case_results[0]

    skipped = run(NeedsContext())
    assert skipped.status == EvalStatus.SKIPPED and skipped.results[0].skipped
    outage = run(NeedsContext(), Outage())
    assert outage.status == EvalStatus.JUDGE_ERROR and "429" in outage.judge_error
    crashed = run(Broken())
    assert crashed.status == EvalStatus.EVALUATOR_ERROR and "oops" in crashed.evaluator_error
    assert crashed.judge_error is None and crashed.model_error is None
    # The errored result's reason is marked as multivon marks it; its error is the text alone.
    assert outage.results[1].reason == "[judge unavailable: 429 from the judge]"
    assert outage.results[1].error == "429 from the judge"
    assert crashed.results[0].reason == "[evaluator error: KeyError: 'oops']"
    # A reason an evaluator gave itself is kept as given.
    assert EvalResult("x", 0.0, False, "[judge unavailable: 429]").reason == "[judge unavailable: 429]"


def test_evaluator_async_override_is_what_the_suite_awaits():
    class AsyncOnly(Evaluator):
        name = "async_only"
        calls = 0

        def evaluate(self, case, output):  # the sync path must not be taken in a suite
            raise AssertionError("sync evaluate called")

        async def aevaluate(self, case, output):
            type(self).calls += 1
            return self._result(1.0, f"saw {output}")

    suite = EvalSuite("async").add_cases([EvalCase(input="q")]).add_evaluator(AsyncOnly())
    case = suite.run(lambda _: "x", verbose=False, save=False).case_results[0]
    assert case.status == EvalStatus.PASSED and case.results[0].reason == "saw x"
    assert AsyncOnly.calls == 1


def test_evaluator_is_abstract_until_evaluate_is_written():
    import inspect

    class Forgot(Evaluator):
        name = "forgot"

    for cls in (Evaluator, Forgot):
        assert inspect.isabstract(cls)
        with pytest.raises(TypeError, match="must implement evaluate\\(self, case, output\\)"):
            cls()
    assert not inspect.isabstract(WordBudget)


def test_evaluator_class_threshold_without_super_init():
    class Strict(Evaluator):
        name = "strict"
        threshold = 0.9

        def __init__(self):  # never calls super().__init__
            self.calls = 0

        def evaluate(self, case, output):
            return self._result(0.8, "close")

    judge = Strict()
    assert judge.threshold == 0.9
    assert not judge.evaluate(EvalCase(input="q"), "x").passed
    assert referee.Evaluator is referee.evaluators.Evaluator


# --- JudgeRetry ----------------------------------------------------------------------------

class Flaky(Evaluator):
    """Raises JudgeUnavailable on the first ``fail`` calls for each input, then passes."""

    name = "flaky"

    def __init__(self, fail: int, score: float = 1.0) -> None:
        super().__init__()
        self.fail = fail
        self.score = score
        self.calls: dict[str, int] = {}

    def evaluate(self, case, output):
        n = self.calls[case.input] = self.calls.get(case.input, 0) + 1
        if n <= self.fail:
            raise JudgeUnavailable(f"transient outage {n} on {case.input}")
        return self._result(self.score, "judged")


def test_judge_retry_validates_and_is_frozen():
    for kwargs, field in (({"max_attempts": 0}, "max_attempts"), ({"base_backoff": -1}, "base_backoff"),
                          ({"factor": 0.5}, "factor"), ({"jitter": -0.1}, "jitter"),
                          ({"max_backoff": -2}, "max_backoff"), ({"retry_on": ("bogus",)}, "retry_on")):
        with pytest.raises(ValueError, match=field):
            JudgeRetry(**kwargs)
    policy = JudgeRetry()
    with pytest.raises(Exception):
        policy.max_attempts = 9  # type: ignore[misc]
    assert policy.normalized_retry_on() == {"judge_error"}


def test_judge_retry_backoff_schedule_and_jitter_clamp(monkeypatch):
    policy = JudgeRetry(base_backoff=2.0, factor=3.0, jitter=0, max_backoff=10.0)
    assert [policy.backoff_for(n) for n in (1, 2, 3, 4)] == [0.0, 2.0, 6.0, 10.0]
    jittery = JudgeRetry(base_backoff=10.0, factor=1.0, jitter=0.5, max_backoff=12.0)
    monkeypatch.setattr("random.uniform", lambda low, high: high)
    assert jittery.backoff_for(2) == 12.0  # 15 drawn, clamped to the cap
    monkeypatch.setattr("random.uniform", lambda low, high: low)
    assert jittery.backoff_for(2) == 5.0


def test_should_retry_reads_either_status_spelling():
    policy = JudgeRetry(retry_on=(EvalStatus.MODEL_ERROR, "timeout"))
    assert should_retry(EvalStatus.MODEL_ERROR, policy) and should_retry("TIMEOUT", policy)
    assert not should_retry(EvalStatus.JUDGE_ERROR, policy)
    assert not should_retry(EvalStatus.FAILED_QUALITY, JudgeRetry())
    assert should_retry("judge_error", JudgeRetry())


def test_sleep_helpers_wait_the_backoff(monkeypatch):
    import asyncio

    slept: list[float] = []
    monkeypatch.setattr("referee.run.case_retry.time.sleep", slept.append)
    policy = JudgeRetry(base_backoff=1.5, factor=2.0, jitter=0)
    assert sleep_for_attempt(policy, 1) == 0.0 and slept == []
    assert sleep_for_attempt(policy, 3) == 3.0 and slept == [3.0]

    async def record(seconds):
        slept.append(seconds)
    monkeypatch.setattr("referee.run.case_retry.asyncio.sleep", record)
    assert asyncio.run(async_sleep_for_attempt(policy, 2)) == 1.5 and slept[-1] == 1.5


def test_suite_retries_a_judge_error_case_and_keeps_the_history(tmp_path):
    flaky = Flaky(fail=2)
    suite = EvalSuite("retry").add_cases([EvalCase(input="a"), EvalCase(input="b")])
    suite.add_evaluator(flaky)
    report = suite.run(lambda _: "out", verbose=False, concurrency=2, runs_dir=tmp_path,
                       judge_retry=JudgeRetry(max_attempts=3, base_backoff=0, jitter=0))
    for case in report.case_results:
        assert case.status == EvalStatus.PASSED
        assert case.retry_attempts == 2 and len(case.retry_errors) == 2
        assert "transient outage 1" in case.retry_errors[0]
    assert flaky.calls == {"a": 3, "b": 3}
    from referee.report.store import load_run
    stored = load_run(report.metadata["run_dir"])
    assert [c.retry_attempts for c in stored.case_results] == [2, 2]


def test_suite_retry_exhausts_and_never_retries_quality_failures():
    outage = Flaky(fail=99)
    suite = EvalSuite("outage").add_cases([EvalCase(input="a")]).add_evaluator(outage)
    case = suite.run(lambda _: "x", verbose=False, save=False,
                     judge_retry=JudgeRetry(max_attempts=3, base_backoff=0)).case_results[0]
    assert case.status == EvalStatus.JUDGE_ERROR and case.retry_attempts == 2
    assert outage.calls == {"a": 3}

    poor = Flaky(fail=0, score=0.0)
    suite = EvalSuite("poor").add_cases([EvalCase(input="a")]).add_evaluator(poor)
    case = suite.run(lambda _: "x", verbose=False, save=False,
                     judge_retry=JudgeRetry(max_attempts=5, base_backoff=0)).case_results[0]
    assert case.status == EvalStatus.FAILED and case.retry_attempts == 0
    assert poor.calls == {"a": 1}
    # Without a policy nothing is retried.
    once = Flaky(fail=1)
    suite = EvalSuite("once").add_cases([EvalCase(input="a")]).add_evaluator(once)
    assert suite.run(lambda _: "x", verbose=False, save=False).case_results[0].retry_attempts == 0
    with pytest.raises(TypeError, match="judge_retry must be a JudgeRetry"):
        suite.run(lambda _: "x", verbose=False, save=False, judge_retry=3)


def test_judge_retry_reruns_a_real_judge_outage_through_the_sdk(isolated_judge):
    from referee import Faithfulness
    from referee.testing.script import Fault

    with ScriptedJudgeServer(reply="Yes") as server:
        # The first request fails and the judge layer does not retry it (max_retries=0): the
        # case ends JUDGE_ERROR, and the case-level policy runs it again against a healthy judge.
        server.enqueue_faults(Fault.server_error(500))
        faithfulness = Faithfulness(threshold=0.5, judge=server.judge_config(max_retries=0))
        suite = EvalSuite("rag").add_cases([EvalCase(input="Q3 revenue?",
                                                     context="Q3 revenue was $4.2M.")])
        suite.add_evaluator(faithfulness)
        without = suite.run(lambda _: "Q3 revenue was $4.2M.", verbose=False, save=False)
        assert without.case_results[0].status == EvalStatus.JUDGE_ERROR
        server.enqueue_faults(Fault.server_error(500))
        report = suite.run(lambda _: "Q3 revenue was $4.2M.", verbose=False, save=False,
                           judge_retry=JudgeRetry(max_attempts=2, base_backoff=0))
    case = report.case_results[0]
    assert case.status == EvalStatus.PASSED and case.retry_attempts == 1
    assert "500" in case.retry_errors[0] or "server" in case.retry_errors[0].lower()


# --- AgentStep -----------------------------------------------------------------------------

def test_agent_step_builds_the_execution_result():
    steps = [AgentStep("look it up", [ToolCall(name="search", arguments={"q": "weather"})]),
             AgentStep(tool_calls=[ToolCall(name="translate")], output="Il fait beau")]
    run = ExecutionResult(agent_trace=steps)
    assert run.get_tool_names() == ["search", "translate"]
    assert run.actual_response == "Il fait beau"
    assert run.tool_calls[0].args == {"q": "weather"}
    assert run.agent_trace == steps and run.agent_trace[0].thought == "look it up"
    # A given response or tool list wins over the steps'.
    assert ExecutionResult(agent_trace=steps, actual_response="x").actual_response == "x"
    with pytest.raises(TypeError, match="at most 3 positional"):
        AgentStep("a", [], "b", "c")
    with pytest.raises(ValueError, match="unknown AgentStep field"):
        AgentStep(thougth="typo")


def test_agent_trace_returned_by_a_model_is_scored_by_a_trajectory_criterion():
    from referee.criteria import ToolNameMatchCriterion

    def agent(question: str) -> dict:
        return {"output": "Sunny", "agent_trace": [
            {"thought": "need weather", "tool_calls": [{"name": "get_weather",
                                                       "arguments": {"city": "Paris"}}]}]}

    suite = EvalSuite("agent").add_cases([
        EvalCase(input="Weather in Paris?", expected_tool_calls=["get_weather"], case_id="ok"),
        EvalCase(input="Weather in Rome?", expected_tool_calls=["get_forecast"], case_id="bad")])
    suite.add_evaluator(ToolNameMatchCriterion())
    report = suite.run(agent, verbose=False, save=False)
    statuses = {c.eval_id: c.status for c in report.case_results}
    assert statuses == {"ok": EvalStatus.PASSED, "bad": EvalStatus.FAILED}
    assert report.case_results[0].execution.agent_trace[0].thought == "need weather"


# --- positional constructors of multivon's dataclasses --------------------------------------

def test_positional_case_case_result_and_report():
    case = EvalCase("What is 2+2?", "4", "arithmetic facts", source_id="doc-1", revision="r2")
    assert (case.input, case.expected_output, case.context) == ("What is 2+2?", "4",
                                                                "arithmetic facts")
    assert case.source_id == "doc-1" and case.metadata["revision"] == "r2"
    assert case.context_str() == "arithmetic facts" and case.case_id == case.eval_id
    with pytest.raises(TypeError, match="got 'input' twice"):
        EvalCase("a", input="b")
    with pytest.raises(TypeError, match="at most 3 positional"):
        EvalCase("a", "b", "c", [])
    row = CaseResult("q", "a", [EvalResult("x", 1.0, True)], 250.0)
    assert row.status == EvalStatus.PASSED and row.latency_ms == 250.0
    assert CaseResult("q", "", []).status == EvalStatus.SKIPPED  # nothing was measured
    report = EvalReport("suite", [row], "model-x")
    assert (report.suite_name if hasattr(report, "suite_name") else report.name) == "suite"
    assert report.case_results[0] is row and report.model_id == "model-x"


# --- AcceptancePolicy ----------------------------------------------------------------------

def run_exact(cases: list[EvalCase], answers: dict[str, str], **run_kwargs):
    from referee import ExactMatch
    suite = EvalSuite("release").add_cases(cases).add_evaluator(ExactMatch())
    return suite.run(lambda q: answers[q], verbose=False, save=False, **run_kwargs)


def exact_policy(**kwargs) -> AcceptancePolicy:
    return AcceptancePolicy((CheckRequirement("exact_match"),), **kwargs)


def test_acceptance_accepts_rejects_and_withholds():
    good = run_exact([EvalCase("a", "yes", source_id="s1"), EvalCase("b", "yes", source_id="s2")],
                     {"a": "yes", "b": "yes"})
    accepted = exact_policy(min_source_groups=2).evaluate(good)
    assert (accepted.decision, accepted.exit_code, accepted.findings) == ("accept", 0, ())
    accepted.assert_accepted()

    bad = run_exact([EvalCase("a", "yes")], {"a": "no"})
    rejected = exact_policy(min_cases=5).evaluate(bad)
    assert rejected.decision == "reject" and rejected.exit_code == 1
    assert {f.kind for f in rejected.findings} == {"quality", "evidence"}
    with pytest.raises(EvalGateFailure, match="Acceptance reject") as caught:
        rejected.assert_accepted()
    assert caught.value.code == 1 and caught.value.acceptance is rejected

    # Two variants of one source are one group; a missing check is missing evidence.
    same_source = run_exact([EvalCase("a", "yes", source_id="s"), EvalCase("b", "yes", source_id="s")],
                            {"a": "yes", "b": "yes"})
    result = exact_policy(min_source_groups=2).evaluate(same_source)
    assert result.decision == "indeterminate"
    assert [f.code for f in result.findings] == ["insufficient_source_groups"]
    other_check = AcceptancePolicy((CheckRequirement("not_empty"),)).evaluate(good)
    assert other_check.decision == "indeterminate" and other_check.exit_code == 2


def test_acceptance_slices_and_critical_checks():
    report = run_exact([EvalCase("a", "yes"), EvalCase("b", "yes", tags=["edge"])],
                       {"a": "yes", "b": "no"})
    lenient = AcceptancePolicy((CheckRequirement("exact_match", min_pass_rate=0.5),))
    assert lenient.evaluate(report).decision == "accept"
    sliced = AcceptancePolicy((CheckRequirement("exact_match", min_pass_rate=0.5),),
                              slices=(SliceRequirement("edge", min_pass_rate=1.0),))
    result = sliced.evaluate(report)
    assert result.decision == "reject" and {f.scope for f in result.findings} == {"tag:edge"}
    critical = AcceptancePolicy((CheckRequirement("exact_match", min_pass_rate=0, critical=True),))
    assert critical.evaluate(report).findings[0].code == "critical_failure"
    missing_slice = exact_policy(slices=(SliceRequirement("absent"),)).evaluate(report)
    assert "insufficient_slice" in {f.code for f in missing_slice.findings}


def test_acceptance_counts_retried_attempts_unless_told_final_attempt_only():
    flaky = Flaky(fail=1)
    suite = EvalSuite("retried").add_cases([EvalCase(input="a")]).add_evaluator(flaky)
    report = suite.run(lambda _: "x", verbose=False, save=False,
                       judge_retry=JudgeRetry(max_attempts=2, base_backoff=0))
    assert report.case_results[0].status == EvalStatus.PASSED
    checks = (CheckRequirement("flaky"),)
    every = AcceptancePolicy(checks, max_error_rate=1.0).evaluate(report)
    assert every.decision == "indeterminate"  # the outage attempt measured nothing
    assert "check_coverage" in {f.code for f in every.findings}
    assert AcceptancePolicy(checks, trial_scope="final_attempt").evaluate(report).decision == "accept"
    assert AcceptancePolicy(checks).evaluate(report).measurements[0]["errored_cases"] == 1


def test_acceptance_policy_is_data_with_a_digest():
    policy = exact_policy(min_cases=2, slices=(SliceRequirement("edge"),))
    data = json.loads(json.dumps(policy.to_dict()))
    assert AcceptancePolicy.from_dict(data) == policy
    assert AcceptancePolicy.from_dict(data).digest == policy.digest
    import dataclasses
    assert dataclasses.replace(policy, min_cases=3).digest != policy.digest
    with pytest.raises(ValueError, match="field 'schema'"):
        AcceptancePolicy.from_dict({**data, "schema": "other/v9"})
    for bad in (lambda: AcceptancePolicy(()), lambda: CheckRequirement(""),
                lambda: CheckRequirement("x", min_pass_rate=1.5), lambda: SliceRequirement("t", 0),
                lambda: exact_policy(trial_scope="sometimes"),
                lambda: AcceptancePolicy((CheckRequirement("x"), CheckRequirement("x")))):
        with pytest.raises(ValueError):
            bad()
    report = run_exact([EvalCase("a", "yes")], {"a": "yes"})
    decided = json.loads(json.dumps(policy.evaluate(report).to_dict()))
    assert decided["policy_digest"] == policy.digest and decided["exit_code"] == 2


async def test_aevaluate_scores_an_output_the_multivon_way():
    from referee import Contains, MaxLatency

    case = EvalCase(input="q")
    found = await Contains(["refund"]).aevaluate(case, "your refund is on its way")
    assert found.passed and found.evaluator == "contains"
    slow = await MaxLatency(max_ms=100).aevaluate(case, "x", latency_ms=250.0)
    assert not slow.passed and slow.metadata["latency_ms"] == 250.0
    # A user's Evaluator: its sync evaluate on a worker thread.
    assert (await WordBudget(limit=2).aevaluate(case, "a b")).passed


def test_check_evaluator_empty_questions_message():
    from referee import CheckEvaluator

    with pytest.raises(ValueError, match="questions list must not be empty"):
        CheckEvaluator("Is it polite?", questions=[])


def test_report_methods_under_multivon_names(tmp_path):
    import xml.etree.ElementTree as ET

    from referee.report.html import render_html
    from referee.report.junit import render_junit

    rows = [CaseResult("q1", "a", [EvalResult("x", 1.0, True)]),
            CaseResult("q2", "b", [EvalResult("x", 0.0, False, "wrong")])]
    report = EvalReport("suite", rows)
    assert report.to_junit_xml() == render_junit(report)
    assert ET.fromstring(report.to_junit_xml().split("?>", 1)[1]).get("failures") == "1"
    assert report.to_html() == render_html(report)
    report.save_json(tmp_path / "new" / "r.json")  # the folder is created
    report.save_html(tmp_path / "r.html")
    report.save_junit_xml(tmp_path / "r.xml")
    loaded = EvalReport.from_dict(json.loads((tmp_path / "new" / "r.json").read_text()))
    assert [c.status for c in loaded.case_results] == [EvalStatus.PASSED, EvalStatus.FAILED]
    assert (tmp_path / "r.html").read_text() == report.to_html()
    assert (tmp_path / "r.xml").read_text() == report.to_junit_xml()
    # Wilson interval of 1 passed of 2 evaluated, 95%.
    low, high = report.pass_rate_ci()
    assert (low, high) == (pytest.approx(0.0945, abs=1e-4), pytest.approx(0.9055, abs=1e-4))
    assert EvalReport("empty", []).pass_rate_ci() == (0.0, 1.0)
    with pytest.raises(ValueError, match="confidence"):
        report.pass_rate_ci(1.5)
    candidate = EvalReport("suite", [rows[0], CaseResult("q2", "b", [EvalResult("x", 1.0, True)])])
    comparison = report.compare(candidate)
    assert comparison == referee.compare_reports(report, candidate)
    assert len(comparison.improvements) == 1 and not comparison.regressions


def test_evaluator_with_an_async_evaluate_is_awaited_in_a_suite():
    class AsyncEvaluate(Evaluator):
        name = "async_evaluate"

        async def evaluate(self, case, output):
            return self._result(1.0 if output == "ok" else 0.0, "checked")

    suite = EvalSuite("async-evaluate").add_cases([EvalCase(input="q")])
    suite.add_evaluator(AsyncEvaluate())
    case = suite.run(lambda _: "ok", verbose=False, save=False).case_results[0]
    assert case.status == EvalStatus.PASSED and case.results[0].reason == "checked"


def test_report_views_by_tag_evaluator_and_distribution():
    rows = [CaseResult("q1", "a", [EvalResult("x", 1.0, True), EvalResult("y", 0.5, True)],
                       tags=["billing"]),
            CaseResult("q2", "b", [EvalResult("x", 0.0, False)], tags=["billing", "edge"]),
            CaseResult("q3", "c", [EvalResult("x", 1.0, True)], judge_error="429", tags=["edge"])]
    report = EvalReport("views", rows)
    assert [c.score for c in rows[:2]] == [0.75, 0.0] and rows[1].tags == ["billing", "edge"]
    # Evaluated cases only: the judge-error case counts in count_by_tag, nowhere else.
    assert report.scores_by_tag() == {"billing": 0.375, "edge": 0.0}
    assert report.passed_by_tag() == {"billing": 0.5, "edge": 0.0}
    assert report.count_by_tag() == {"billing": 2, "edge": 2}
    assert report.scores_by_evaluator()["y"] == 0.5 and report.passed_by_evaluator()["y"] == 1.0
    assert [c.case_input for c in report.filter_by_evaluator("x")] == ["q2"]
    assert report.score_percentiles() == {"p10": 0.075, "p50": 0.375, "p90": 0.675}
    assert report.score_percentiles([0, 100]) == {"p0": 0.0, "p100": 0.75}
    assert EvalReport("empty", []).score_percentiles() == {}
    with pytest.raises(ValueError, match="between 0 and 100"):
        report.score_percentiles([101])
    assert report.sample(2, seed=7) == report.sample(2, seed=7)
    assert len(report.sample(10)) == 3
    assert [c.case_input for c in report.sample(5, failed_only=True)] == ["q2"]

