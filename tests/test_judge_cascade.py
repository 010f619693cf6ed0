"""Judge cascades (issue 32, item 2): a cheap judge answers first, the strong one only where the
cheap one is unsure, and the strong judge's answer is the verdict wherever it was asked.

Two scripted judge servers of known behaviour, reached through the real OpenAI SDK: the cheap
one answers each case as the case's input says, the strong one always answers the same, so
which judge answered each case shows in its verdict and in each server's requests.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from referee import CriteriaConfig, CriterionConfig, EvalCase, EvalSuite, ExecutionResult
from referee.criteria.llm import ResponseMatchCriterion
from referee.errors import JudgeUnavailable
from referee.evaluators import AnswerAccuracy, GEval
from referee.evaluators.calibration import CalibrationEntry, CalibrationFile
from referee.judge import JudgeConfig, JudgePanel, set_price
from referee.judge.cascade import JudgeCascade, escalation_reasons
from referee.report.cascade import cascade_lines, cascade_summary
from referee.report.console import render_text
from referee.report.json_report import lean_report_dict
from referee.result import CriterionResult
from referee.testing import Reply, ScriptedJudgeServer

# The cheap judge's score for a case, by the word its input starts with.
CHEAP_SCORES = {"sure-pass": 0.95, "sure-fail": 0.05, "near": 0.55}
STRONG_SCORE = 0.2  # the strong judge fails every case: a pass can only be the cheap judge's


def _score_reply(score: float):
    def reply(request) -> Reply:
        if '"score"' not in request.prompt:
            return Reply("Yes")
        return Reply(json.dumps({"score": score, "reasoning": "scripted"}))
    return reply


_seen_lock = threading.Lock()
_seen_unclear: set[str] = set()


def _cheap_reply(request) -> Reply:
    for word, score in CHEAP_SCORES.items():
        if word in request.prompt:
            return _score_reply(score)(request)
    if "unclear" in request.prompt:  # the first question of each such case only
        with _seen_lock:
            first = request.prompt.split("unclear")[1][:20] not in _seen_unclear
            _seen_unclear.add(request.prompt.split("unclear")[1][:20])
        return Reply("I cannot tell" if first else "Yes")
    return Reply("I cannot tell")


@pytest.fixture
def judges(isolated_judge: None) -> Iterator[tuple[ScriptedJudgeServer, ScriptedJudgeServer]]:
    with ScriptedJudgeServer(_cheap_reply) as cheap, \
            ScriptedJudgeServer(_score_reply(STRONG_SCORE)) as strong:
        yield cheap, strong


def _cascade(cheap: ScriptedJudgeServer, strong: ScriptedJudgeServer, **settings) -> JudgeCascade:
    return JudgeCascade([cheap.judge_config(model="cheap-judge"),
                         strong.judge_config(model="strong-judge")], **settings)


def _cases(*words: str) -> list[EvalCase]:
    return [EvalCase(input=f"{word} question {i}", expected_output="the answer", eval_id=f"c{i}")
            for i, word in enumerate(words)]


def _match(cascade: JudgeCascade) -> ResponseMatchCriterion:
    return ResponseMatchCriterion(CriterionConfig(threshold=0.5, num_samples=1), judge=cascade)


def _matched(cascade: JudgeCascade, *words: str) -> list[CriterionResult]:
    """ResponseMatchCriterion's results in a suite run over a case per word."""
    suite = EvalSuite("cascade").add_cases(_cases(*words)).add_evaluators(_match(cascade))
    report = suite.run(lambda question: "the answer", verbose=False, save=False)
    return _results(report, "response_match_score")


def _results(report, name: str) -> list[CriterionResult]:
    return [r for c in report.cases for r in c.criterion_results if r.criterion == name]


def test_the_strong_judge_is_asked_only_near_the_threshold(judges, tmp_path: Path) -> None:
    cheap, strong = judges
    cascade = _cascade(cheap, strong, escalate_on=["margin"], margin=0.1)
    words = ["sure-pass", "sure-fail", "near", "sure-pass", "near", "sure-pass"]
    results = _matched(cascade, *words)
    assert [r.passed for r in results] == [True, False, False, True, False, True]
    # The near cases are the strong judge's verdict (0.2, a fail), the rest the cheap one's.
    assert [r.score for r in results] == [0.95, 0.05, STRONG_SCORE, 0.95, STRONG_SCORE, 0.95]
    assert [r.details["cascade"]["escalated"] for r in results] == [w == "near" for w in words]
    assert all(r.details["cascade"]["reasons"] == ["margin"] for r in results
               if r.details["cascade"]["escalated"])
    assert [r.details["cascade"]["answered_by"] for r in results] == [
        "openai/strong-judge" if w == "near" else "openai/cheap-judge" for w in words]
    assert len(cheap.requests) == 6
    assert len(strong.requests) == 2 and all("near" in r.prompt for r in strong.requests)
    assert {r.model for r in strong.requests} == {"strong-judge"}
    # A result's spend is both stages'.
    escalated = results[2]
    stages = escalated.details["cascade"]["stages"]
    assert [s["judge"] for s in stages] == ["openai/cheap-judge", "openai/strong-judge"]
    assert escalated.token_usage is not None and escalated.token_usage.requests == 2


def test_the_run_reports_escalations_spend_and_saving(judges, tmp_path: Path) -> None:
    cheap, strong = judges
    set_price("cheap-judge", 0.1, 0.4)
    set_price("strong-judge", 3.0, 15.0)
    cascade = _cascade(cheap, strong, escalate_on=["margin"])
    words = ["sure-pass", "near", "sure-fail", "sure-pass"]
    suite = EvalSuite("cascade").add_cases(_cases(*words)).add_evaluators(_match(cascade))
    report = suite.run(lambda question: "the answer", verbose=False, save=False)

    summary = cascade_summary(report.cases)["response_match_score"]
    assert summary["judged"] == 4 and summary["escalated"] == 1
    assert summary["escalation_rate"] == 0.25
    assert summary["reasons"] == {"margin": 1}
    assert summary["answered_by"] == {"openai/cheap-judge": 3, "openai/strong-judge": 1}
    cheap_stage, strong_stage = summary["stages"]
    assert (cheap_stage["asked"], strong_stage["asked"]) == (4, 1)
    cheap_tokens = sum(r.input_tokens + r.output_tokens for r in cheap.requests)
    strong_tokens = sum(r.input_tokens + r.output_tokens for r in strong.requests)
    assert cheap_stage["token_usage"]["total_tokens"] == cheap_tokens
    assert strong_stage["token_usage"]["total_tokens"] == strong_tokens
    # The strong judge alone: its own request for the near case, the cheap judge's tokens at the
    # strong price for the three others.
    confident = [r for r in cheap.requests if "near" not in r.prompt]
    alone_in = sum(r.input_tokens for r in confident) + sum(r.input_tokens for r in strong.requests)
    alone_out = sum(r.output_tokens for r in confident) + sum(
        r.output_tokens for r in strong.requests)
    assert summary["strong_alone"]["input_tokens"] == alone_in
    assert summary["strong_alone"]["cost_usd"] == pytest.approx(
        (alone_in * 3.0 + alone_out * 15.0) / 1e6)
    spent = summary["token_usage"]["cost_usd"]
    assert summary["saved"]["cost_usd"] == pytest.approx(
        summary["strong_alone"]["cost_usd"] - spent)
    assert summary["saved"]["cost_usd"] > 0
    assert summary["saved"]["requests"] == -1  # the near case asked both judges

    assert lean_report_dict(report)["judge_cascade"]["response_match_score"] == summary
    lines = cascade_lines(report)
    assert lines[0].startswith("Judge cascade, response_match_score: 1 of 4 escalated "
                               "(25%: margin 1)")
    assert lines[0].endswith(f"for openai/strong-judge alone (estimated): saved "
                             f"${summary['saved']['cost_usd']:.4f}")
    console = render_text(report)
    assert "judge: cascade openai/cheap-judge at " in console
    assert lines[0] in console


def _accuracy(judges, reason: str, question: str) -> CriterionResult:
    """AnswerAccuracy (four QAG questions) of one case through a cascade escalating on
    ``reason``."""
    cheap, strong = judges
    evaluator = AnswerAccuracy(judge=_cascade(cheap, strong, escalate_on=[reason]))
    case = EvalCase(input=question, expected_output="the answer")
    return _run(evaluator.evaluate(ExecutionResult(actual_response="the answer"), case))


def test_an_unknown_answer_of_the_cheap_judge_escalates(judges) -> None:
    cheap, strong = judges
    # The cheap judge answers one question of the case neither yes nor no, the rest yes.
    result = _accuracy(judges, "unknown", "an unclear question 1")
    cascade = result.details["cascade"]
    assert cascade["reasons"] == ["unknown"]
    assert cascade["stages"][0]["error"] is None
    assert cascade["answered_by"] == "openai/strong-judge"
    assert result.details["unknown"] == 0 and result.passed  # the strong judge said Yes
    assert {r.model for r in strong.requests} == {"strong-judge"}
    assert len(strong.requests) == len(cheap.requests)  # one request per question each


def test_a_cheap_judge_that_cannot_answer_escalates_as_an_error(judges) -> None:
    cheap, strong = judges
    # No readable verdict on any question: the cheap stage has no score at all.
    result = _accuracy(judges, "error", "a question with no word")
    cascade = result.details["cascade"]
    assert cascade["reasons"] == ["error"]
    assert "no parseable Yes/No verdict" in cascade["stages"][0]["error"]
    assert cascade["stages"][0]["token_usage"]["requests"] == len(cheap.requests)
    assert result.error is None and result.passed
    assert result.token_usage is not None
    assert result.token_usage.requests == len(cheap.requests) + len(strong.requests)


def test_a_strong_judge_that_cannot_answer_is_an_error_never_the_cheap_verdict(judges) -> None:
    cheap, strong = judges
    strong.set_reply("I cannot tell")
    with pytest.raises(JudgeUnavailable) as raised:
        _accuracy(judges, "unknown", "an unclear question 2")
    spent = raised.value.token_usage
    assert spent.requests == len(cheap.requests) + len(strong.requests)


def test_unknown_answers_escalate() -> None:
    cascade = JudgeCascade([JudgeConfig(provider="openai", model="a"),
                            JudgeConfig(provider="openai", model="b")])
    confident = CriterionResult(criterion="c", score=1.0, passed=True, threshold=0.5,
                                details={"unknown": 0})
    unsure = CriterionResult(criterion="c", score=1.0, passed=True, threshold=0.5,
                             details={"unknown": 1})
    assert escalation_reasons(confident, cascade) == []
    assert escalation_reasons(unsure, cascade) == ["unknown"]
    only_margin = cascade.model_copy(update={"escalate_on": ["margin"]})
    assert escalation_reasons(unsure, only_margin) == []


def test_a_split_cheap_panel_escalates(judges) -> None:
    cheap, strong = judges
    with ScriptedJudgeServer(_score_reply(0.9)) as other:
        panel = JudgePanel(members=[cheap.judge_config(model="cheap-judge"),
                                    other.judge_config(model="other-cheap")], aggregate="mean")
        cascade = JudgeCascade([panel, strong.judge_config(model="strong-judge")],
                               escalate_on=["split"])
        criterion = _match(cascade)
        case = EvalCase(input="sure-fail question", expected_output="the answer")
        split = _run(criterion.evaluate(ExecutionResult(actual_response="x"), case))
        agreed_case = EvalCase(input="sure-pass question", expected_output="the answer")
        agreed = _run(criterion.evaluate(ExecutionResult(actual_response="x"), agreed_case))
    assert split.details["cascade"]["reasons"] == ["split"]
    assert split.score == STRONG_SCORE
    assert not agreed.details["cascade"]["escalated"] and agreed.passed
    assert len(strong.requests) == 1
    assert agreed.details["cascade"]["answered_by"].startswith("panel(")


def _calibration_file(path: Path, model: str, tpr: float, tnr: float) -> str:
    entry = CalibrationEntry(evaluator="response_match_score", judge_provider="openai",
                             judge_model=model, question_set="-", threshold=0.5, metric="f1",
                             n=100, date="2026-12-01", data_fingerprint="f" * 8, tpr=tpr,
                             tnr=tnr, positives=50, negatives=50)
    path.write_text(CalibrationFile(entries=[entry]).model_dump_json(), encoding="utf-8")
    return str(path)


def test_a_confident_calibrated_cheap_judge_never_asks_the_strong_one(judges,
                                                                     tmp_path: Path) -> None:
    cheap, strong = judges
    calibration = _calibration_file(tmp_path / "calibration.json", "cheap-judge", 0.95, 0.93)
    cascade = _cascade(cheap, strong, calibration_file=calibration)
    words = ["sure-pass", "sure-fail"] * 4
    results = _matched(cascade, *words)

    assert strong.requests == []
    assert [r.passed for r in results] == [w == "sure-pass" for w in words]


def test_a_weak_calibration_escalates_the_verdicts_it_is_weak_at(judges, tmp_path: Path) -> None:
    cheap, strong = judges
    # Good at passing what should pass (TPR), poor at failing what should fail (TNR): its
    # passes are doubtful, its fails are not.
    calibration = _calibration_file(tmp_path / "calibration.json", "cheap-judge", 0.95, 0.6)
    cascade = _cascade(cheap, strong, calibration_file=calibration, escalate_on=["calibration"])
    passed, failed = _matched(cascade, "sure-pass", "sure-fail")
    assert passed.details["cascade"]["reasons"] == ["calibration"] and not passed.passed
    assert not failed.details["cascade"]["escalated"]
    assert len(strong.requests) == 1 and "sure-pass" in strong.requests[0].prompt


def test_an_uncalibrated_cheap_judge_escalates_every_case(judges, tmp_path: Path) -> None:
    cheap, strong = judges
    calibration = _calibration_file(tmp_path / "calibration.json", "another-judge", 0.99, 0.99)
    cascade = _cascade(cheap, strong, calibration_file=calibration, escalate_on=["calibration"])
    _matched(cascade, "sure-pass", "sure-fail")
    assert len(strong.requests) == 2


def test_the_audit_asks_the_strong_judge_on_a_seeded_sample(judges) -> None:
    cheap, strong = judges
    cascade = _cascade(cheap, strong, escalate_on=["margin"], audit_rate=0.5, audit_seed=7)
    words = ["sure-pass", "sure-fail"] * 10
    suite = EvalSuite("cascade").add_cases(_cases(*words)).add_evaluators(_match(cascade))
    report = suite.run(lambda question: "the answer", verbose=False, save=False)
    results = _results(report, "response_match_score")
    audited = [r for r in results if "audit" in r.details["cascade"]]

    assert 0 < len(audited) < len(results)
    assert len(strong.requests) == len(audited)
    # Where the strong judge was asked its answer is the verdict; it agrees on the fails only.
    assert all(r.score == STRONG_SCORE for r in audited)
    agreed = [r.details["cascade"]["audit"]["agreed"] for r in audited]
    assert agreed == [r.details["cascade"]["stages"][0]["passed"] is False for r in audited]
    summary = cascade_summary(report.cases)["response_match_score"]["audit"]
    assert summary == {"audited": len(audited), "agreed": sum(agreed),
                       "agreement": sum(agreed) / len(audited)}
    # The same seed samples the same cases again.
    again = suite.run(lambda question: "the answer", verbose=False, save=False)
    assert [("audit" in r.details["cascade"]) for r in _results(again, "response_match_score")] \
        == [("audit" in r.details["cascade"]) for r in results]


def test_a_geval_cascade_records_both_stages(judges) -> None:
    cheap, strong = judges
    geval = GEval("Is it right?", runs=1, threshold=0.5,
                  judge=_cascade(cheap, strong, escalate_on=["margin"], margin=0.5))
    case = EvalCase(input="sure-pass question", expected_output="x")
    result = _run(geval.evaluate(ExecutionResult(actual_response="x"), case))
    assert result.details["cascade"]["escalated"]  # 0.95 is within 0.5 of 0.5
    assert result.details["judge_model"] == "strong-judge"


def test_the_run_describes_and_announces_the_cascade(judges, capsys) -> None:
    from referee.run.describe import describe_run

    cheap, strong = judges
    description = describe_run([_match(_cascade(cheap, strong))])
    described = description.judges["response_match_score"]["cascade"]
    assert [s["model"] for s in described["stages"]] == ["cheap-judge", "strong-judge"]
    assert described["margin"] == 0.1
    description.announce()
    assert "cascade openai/cheap-judge -> openai/strong-judge" in capsys.readouterr().err


def test_a_cascade_needs_two_stages() -> None:
    with pytest.raises(ValueError, match="stages"):
        JudgeCascade([JudgeConfig(provider="openai", model="a")])
    with pytest.raises(ValueError, match="escalate_on"):
        JudgeCascade([JudgeConfig(provider="openai", model="a"),
                      JudgeConfig(provider="openai", model="b")], escalate_on=["sometimes"])


def _run(coroutine):
    import asyncio

    return asyncio.run(coroutine)


def test_each_stage_is_bound_once_per_run_and_never_while_scoring(judges) -> None:
    from scale.judge_lookups import install

    cheap, strong = judges
    counted: dict[str, int] = {}
    restore = install(lambda name: counted.__setitem__(name, counted.get(name, 0) + 1))
    try:
        cascade = _cascade(cheap, strong, escalate_on=["margin"])
        suite = EvalSuite("cascade").add_cases(_cases("sure-pass", "near", "sure-fail")) \
            .add_evaluators(AnswerAccuracy(judge=cascade), _match(cascade))
        before: dict[str, int] = {}

        def answer(question: str) -> str:
            before.update(counted) if not before else None
            return "the answer"

        report = suite.run(answer, verbose=False, save=False)
    finally:
        restore()
    # The EvalSuite-style evaluator resolves each of its two stages in layers, once; the
    # AgentEvaluator-style criterion takes its stages as given.
    assert before == {"effective_panel": 2, "resolve_judge_config": 2}
    assert counted == before
    assert len(_results(report, "response_match_score")) == 3


def _by_model(request) -> Reply:
    return (_cheap_reply if request.model == "cheap-judge" else _score_reply(STRONG_SCORE))(request)


def test_a_criteria_file_names_a_cascade(openai_judge_server) -> None:
    server = openai_judge_server(_by_model)
    config = CriteriaConfig.model_validate({"response_match": {
        "threshold": 0.5, "num_samples": 1, "api_style": "chat",
        "judge_cascade": {"models": ["openai/cheap-judge", "openai/strong-judge"],
                          "escalate_on": ["margin"], "margin": 0.1}}})
    assert config.response_match is not None
    criterion = ResponseMatchCriterion(config.response_match)
    suite = EvalSuite("cascade").add_cases(_cases("sure-pass", "near")).add_evaluators(criterion)
    report = suite.run(lambda question: "the answer", verbose=False, save=False)

    sure, near = _results(report, "response_match_score")
    assert not sure.details["cascade"]["escalated"] and sure.passed
    assert sure.details["judge_model"] == "openai/cheap-judge"
    assert near.details["cascade"]["reasons"] == ["margin"] and near.score == STRONG_SCORE
    assert near.details["judge_model"] == "openai/strong-judge"
    asked = [r.model for r in server.requests]
    assert sorted(asked) == ["cheap-judge", "cheap-judge", "strong-judge"]


@pytest.mark.parametrize(("config", "message"), [
    ({"response_match": {"judge_cascade": {"models": ["openai/a", "openai/b"],
                                           "escalate_on": ["sometimes"]}}}, "escalate_on"),
    ({"response_match": {"judge_cascade": ["openai/a"]}}, "models"),
    ({"response_match": {"judge_cascade": ["openai/a", "nobody-knows"]}}, "names no provider"),
    ({"response_match": {"judge_cascade": ["openai/a", "openai/b"],
                         "judge_panel": ["openai/a", "openai/b"]}}, "give one"),
    ({"rouge_match": {"judge_cascade": ["openai/a", "openai/b"]}}, "takes no judge cascade"),
])
def test_a_bad_cascade_in_a_criteria_file_is_named(config, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CriteriaConfig.model_validate(config)


def test_a_cascade_binding_travels_to_another_process_whole(judges, monkeypatch) -> None:
    import pickle

    from referee.evaluators import Relevance

    monkeypatch.setenv("OPENAI_API_KEY", "sk-cascade-env-key-77")
    cascade = JudgeCascade([JudgeConfig(provider="openai", model="cheap-judge"),
                            JudgeConfig(provider="openai", model="strong-judge")])
    shipped = Relevance(judge=cascade).judge_binding().for_elsewhere()
    assert shipped.cascade == cascade
    assert [s.judge.model for s in shipped.stages if s.judge] == ["cheap-judge", "strong-judge"]
    assert shipped.judge == shipped.stages[-1].judge  # outside scoring: the strong judge
    assert all(s.judge is not None and s.judge.api_key_value() == "sk-cascade-env-key-77"
               for s in shipped.stages)
    copy = pickle.loads(pickle.dumps(shipped))
    assert copy == shipped and "sk-cascade-env-key-77" not in repr(copy)


def test_a_broken_calibration_file_errors_each_case_naming_the_file(judges,
                                                                   tmp_path: Path) -> None:
    cheap, strong = judges
    broken = tmp_path / "calibration.json"
    broken.write_text("{not json", encoding="utf-8")
    results = _matched(_cascade(cheap, strong, calibration_file=str(broken)), "sure-pass")
    assert results[0].error is not None and str(broken) in results[0].error
    assert strong.requests == []
