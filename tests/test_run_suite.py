"""EvalSuite (document 001): gates, the error budget, entry points that agree, stored runs."""

from __future__ import annotations

import json

import pytest

from referee import EvalCase, EvalGateFailure, EvalSuite, ExecutionResult
from referee.evaluators.deterministic import Contains
from referee.report.model import CaseStatus


def test_document_mostly_down_example(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    suite = EvalSuite("checkout-bot")
    suite.add_cases([EvalCase(input=f"question {i}") for i in range(10)])
    suite.add_evaluators(Contains(["ok"]))

    def mostly_down(prompt: str) -> str:
        if prompt != "question 0":
            raise TimeoutError("upstream 504")   # stands in for judge/model outages
        return "ok"

    with pytest.raises(EvalGateFailure) as info:
        suite.run(mostly_down, fail_threshold=0.85, max_error_rate=0.10, verbose=False)
    assert str(info.value) == (
        "Eval gate INDETERMINATE: error rate 90.0% exceeds error budget 10.0% — "
        "9 of 10 case(s) errored before quality could be scored (model_error=9). "
        "pass_rate 100.0% covers only the 1 evaluated case(s); fix the errors "
        "before trusting this gate."
    )
    report = info.value.report
    assert info.value.pass_rate == pytest.approx(1.0)
    assert report.errors == 9 and report.evaluated == 1 and report.error_rate == pytest.approx(0.9)
    # The rejected run is still stored in full.
    run_dir = tmp_path / ".referee" / "runs" / report.run_id
    assert (run_dir / "report.json").is_file()
    assert len((run_dir / "cases.jsonl").read_text().splitlines()) == 10


def _suite_with_errors(errors: int, total: int = 10) -> tuple[EvalSuite, object]:
    suite = EvalSuite("budget").add_cases([EvalCase(input=f"q{i}") for i in range(total)])
    suite.add_evaluator(Contains(["fine"]))

    def model(prompt: str) -> str:
        if int(prompt[1:]) < errors:
            raise ConnectionError("model down")
        return "fine"

    return suite, model


def test_fail_threshold_without_budget_warns_on_stderr_at_ten_percent(capsys):
    suite, model = _suite_with_errors(1)
    report = suite.run(model, verbose=False, save=False, fail_threshold=0.5)
    assert report.pass_rate == 1.0 and report.error_rate == pytest.approx(0.1)
    err = capsys.readouterr().err
    assert "error budget" in err and "1/10" in err and "model_error=1" in err


def test_no_warning_below_ten_percent_or_without_a_gate(capsys):
    suite, model = _suite_with_errors(1, total=11)
    suite.run(model, verbose=False, save=False, fail_threshold=0.5)
    assert "error budget" not in capsys.readouterr().err
    suite, model = _suite_with_errors(5)
    suite.run(model, verbose=False, save=False)
    assert "error budget" not in capsys.readouterr().err


def test_error_rate_at_the_budget_passes_and_the_budget_works_without_fail_threshold():
    suite, model = _suite_with_errors(1)
    report = suite.run(model, verbose=False, save=False, fail_threshold=0.5, max_error_rate=0.10)
    assert report.errors == 1
    suite, model = _suite_with_errors(2)
    with pytest.raises(EvalGateFailure, match="exceeds error budget 10.0%"):
        suite.run(model, verbose=False, save=False, max_error_rate=0.10)


def test_fail_threshold_failure_message():
    suite = EvalSuite("quality").add_cases([EvalCase(input=f"q{i}") for i in range(4)])
    suite.add_evaluator(Contains(["good"]))
    with pytest.raises(EvalGateFailure) as info:
        suite.run(lambda p: "good" if p == "q0" else "meh", verbose=False, save=False,
                  fail_threshold=0.85)
    assert str(info.value) == (
        "Eval gate FAILED: pass rate 25.0% < threshold 85.0% (1 of 4 evaluated case(s) passed).")


def test_gate_values_are_checked_before_running():
    calls = []
    suite = EvalSuite("x").add_case(EvalCase(input="q")).add_evaluator(Contains(["a"]))
    with pytest.raises(ValueError, match="max_error_rate must be between 0.0 and 1.0"):
        suite.run(calls.append, verbose=False, save=False, max_error_rate=10)
    assert calls == []


def _mixed_suite() -> EvalSuite:
    suite = EvalSuite("agree")
    suite.add_cases([EvalCase(input=f"item {i}", expected_output=f"answer {i}") for i in range(6)])
    suite.add_evaluators(Contains(["answer"]), Contains(["1", "3"], match_any=True))
    return suite


def _mixed_model(prompt: str) -> str:
    i = int(prompt.split()[1])
    if i == 5:
        raise RuntimeError("boom")
    return f"answer {i}" if i % 2 else f"nothing for {i}"


def _digest(report) -> list[tuple]:
    return [(c.eval_id, c.status, c.output, [(r.criterion, r.score, r.passed)
                                             for r in c.criterion_results]) for c in report.cases]


async def test_run_async_and_run_on_cases_agree_with_run():
    suite = _mixed_suite()
    sync_report = suite.run(_mixed_model, verbose=False, save=False)  # inside a running loop
    async_report = await suite.run_async(_mixed_model, verbose=False, save=False)
    assert _digest(sync_report) == _digest(async_report)

    pairs = [(c.case, c.execution) for c in sync_report.cases if c.execution is not None]
    replay = suite.run_on_cases(pairs, verbose=False, save=False)
    replay_async = await suite.run_on_cases_async(pairs, verbose=False, save=False)
    ran = [d for d in _digest(sync_report) if d[1] != CaseStatus.MODEL_ERROR]
    assert _digest(replay) == ran == _digest(replay_async)
    assert (sync_report.passed, sync_report.failed, sync_report.errors) == (2, 3, 1)


def test_run_on_cases_takes_strings_and_rejects_bad_pairs():
    suite = EvalSuite("pairs").add_evaluator(Contains(["ok"]))
    case = EvalCase(input="q")
    report = suite.run_on_cases([(case, "ok"), (case, "no")], verbose=False, save=False)
    assert [c.status for c in report.cases] == [CaseStatus.PASSED, CaseStatus.FAILED]
    with pytest.raises(ValueError, match=r"pairs\[1\]\[1\].*expected a str, dict or ExecutionResult"):
        suite.run_on_cases([(case, "ok"), (case, 3)], verbose=False, save=False)
    with pytest.raises(ValueError, match=r"pairs\[0\].*\(case, output\) pair"):
        suite.run_on_cases(["ok"], verbose=False, save=False)


def test_building_api_chains_and_checks_evaluators():
    suite = EvalSuite("build", model_id="m1")
    assert suite.add_case(EvalCase(input="a")) is suite
    assert suite.add_cases([EvalCase(input="b")]).add_evaluators([Contains(["a"])]) is suite
    assert len(suite.cases) == 2 and len(suite._evaluators) == 1
    with pytest.raises(TypeError, match="no evaluate"):
        suite.add_evaluator(object())
    with pytest.raises(ValueError, match="either workers= or concurrency="):
        suite.run(lambda p: p, verbose=False, save=False, workers=2, concurrency=3)
    report = suite.run(lambda p: p, verbose=False, save=False, workers=1)
    assert report.model_id == "m1" and report.name == "build"


def test_add_check_builds_a_check_evaluator_with_pinned_questions():
    from referee.evaluators import CheckEvaluator

    suite = EvalSuite("return policy eval")
    suite.add_check("Response should mention the return policy", threshold=0.8,
                    questions=["Does the response mention a return window?"], name="policy")
    ev = suite._evaluators[0]
    assert isinstance(ev, CheckEvaluator)
    assert ev.name == "policy" and ev.threshold == 0.8


def test_a_run_writes_its_directory_without_secrets(tmp_path):
    from referee.judge import JudgeConfig

    class WithJudge(Contains):
        judge = JudgeConfig(provider="openai", model="gpt-4o-mini", api_key="sk-secret-123")

    suite = EvalSuite("stored").add_case(EvalCase(input="q")).add_evaluator(WithJudge(["q"]))
    report = suite.run(lambda p: p, verbose=False, runs_dir=tmp_path, formats=["json"])
    run_dir = tmp_path / report.run_id
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["name"] == "stored" and meta["case_ids"] == [report.cases[0].eval_id]
    assert meta["versions"]["referee"] and meta["versions"]["python"]
    assert meta["judge"]["model"] == "gpt-4o-mini" and "api_key" not in meta["judge"]
    for name in ("meta.json", "cases.jsonl", "report.json"):
        assert "sk-secret-123" not in (run_dir / name).read_text()
    assert report.metadata["run_dir"] == str(run_dir)


def test_model_output_as_execution_result_reaches_the_evaluators():
    suite = EvalSuite("exec").add_case(EvalCase(input="q")).add_evaluator(Contains(["tool said"]))
    report = suite.run(lambda p: ExecutionResult(actual_response="the tool said hi"),
                       verbose=False, save=False)
    assert report.passed == 1


def test_judge_token_usage_adds_up_per_criterion_case_and_run(judge_server, isolated_judge,
                                                             tmp_path):
    from referee import GEval, Relevance
    from referee.evaluators.deterministic import NotEmpty
    from referee.testing import Reply

    def respond(request):
        if "Criterion:" in request.prompt:  # GEval asks for a JSON score
            return Reply('{"score": 0.9, "reason": "ok"}', input_tokens=100, output_tokens=10)
        return Reply("Yes", input_tokens=40, output_tokens=1)

    judge_server.set_reply(respond)
    cfg = judge_server.judge_config(model="gpt-4o-mini")
    suite = EvalSuite("usage").add_cases([EvalCase(input="q1"), EvalCase(input="q2"),
                                          EvalCase(input="q3")])
    suite.add_evaluators(Relevance(judge=cfg), GEval("Is it fine?", judge=cfg), NotEmpty())
    report = suite.run(lambda prompt: "an answer", verbose=False, runs_dir=tmp_path)

    relevance = (4 * 40, 4 * 1, 4)   # per case: four questions, one call each
    geval = (2 * 100, 2 * 10, 2)     # per case: two runs
    for case in report.cases:
        by_name = {r.criterion: r.token_usage for r in case.criterion_results}
        assert by_name["not_empty"] is None  # no judge, no usage
        got = {name: (u.input_tokens, u.output_tokens, u.requests)
               for name, u in by_name.items() if u is not None}
        assert got == {"relevance": relevance, "g_eval": geval}
        usage = case.token_usage
        assert (usage.input_tokens, usage.output_tokens, usage.requests) == (360, 24, 6)
    assert judge_server.request_count == 18

    stats = report.summary.criterion_stats
    assert (stats["relevance"].token_usage.input_tokens, stats["relevance"].token_usage.requests) == (480, 12)
    assert (stats["g_eval"].token_usage.output_tokens, stats["g_eval"].token_usage.requests) == (60, 6)
    assert stats["not_empty"].token_usage is None
    total = report.token_usage
    assert (total.input_tokens, total.output_tokens, total.requests) == (1080, 72, 18)
    assert report.summary.total_token_usage == total
    # gpt-4o-mini list price (0.15 / 0.60 USD per million tokens) turns tokens into a cost.
    assert total.cost_usd == pytest.approx((1080 * 0.15 + 72 * 0.60) / 1_000_000)
    # The stored report keeps the same numbers.
    stored = json.loads((tmp_path / report.run_id / "report.json").read_text())
    assert stored["summary"]["total_token_usage"]["requests"] == 18
    assert stored["summary"]["criterion_stats"]["relevance"]["token_usage"]["requests"] == 12
