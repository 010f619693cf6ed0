"""Issue 30: judge requests through the providers' batch APIs, spoken through the real SDKs to
referee's scripted batch service (OpenAI Files + Batches, Anthropic Message Batches)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from referee import CheckEvaluator, EvalCase, EvalSuite
from referee.errors import JudgeUnavailable
from referee.evaluators import CustomRubric, GEval
from referee.judge import JudgeConfig
from referee.judge.batch import JOURNAL_FILE, BatchJournal, batch_journal, request_id
from referee.judge.client import get_judge
from referee.judge.pricing import usage_for
from referee.record import CaseStatus
from referee.testing import Fault, ScriptedJudgeServer
from referee.testing.batch_service import ScriptedBatchService

pytestmark = pytest.mark.usefixtures("isolated_judge", "fast_batches")

MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-haiku-4-5",
          "google": "gemini-2.5-flash"}
PROVIDERS = list(MODELS)
RUBRIC = [("Does it state the refund window?", True), ("Is it polite?", True)]


@pytest.fixture
def fast_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches go out after 250 ms of quiet (what a test submits together stays one batch on
    a loaded machine) and are polled every few tens of ms."""
    monkeypatch.setenv("REFEREE_BATCH_QUIET_S", "0.25")
    monkeypatch.setenv("REFEREE_BATCH_FIRST_POLL_S", "0.02")
    monkeypatch.setenv("REFEREE_BATCH_MAX_POLL_S", "0.05")


@pytest.fixture
def service() -> Iterator[ScriptedBatchService]:
    with ScriptedBatchService(reply="Yes", processing_s=0.1) as svc:
        yield svc


def script(judge: ScriptedJudgeServer | ScriptedBatchService) -> None:
    """The same script for the online server and the batch service: rude cases fail."""
    judge.add_rule(lambda r: "polite" in r.prompt and "rude" in r.prompt, "No")
    judge.set_reply("Yes")


def suite_of(judge: JudgeConfig) -> EvalSuite:
    suite = EvalSuite("batch")
    suite.add_cases([EvalCase(input=f"[case-{i}] refund window?", name=f"case {i}")
                     for i in range(6)])
    suite.add_evaluator(CustomRubric(RUBRIC, judge=judge))
    return suite


def model(prompt: str) -> str:
    tone = "rude" if "case-1" in prompt or "case-4" in prompt else "kind"
    return f"Refunds within 30 days ({tone}). {prompt}"


def verdicts(report) -> dict[str, tuple[str, float | None]]:
    return {c.case.name: (c.status.value, c.criterion_results[0].score) for c in report.cases}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_same_suite_gives_the_same_verdicts_online_and_by_batch_at_half_the_bill(
        provider, service, tmp_path):
    script(service)
    with ScriptedJudgeServer(prompt_cache=False) as online:
        script(online)
        online_report = suite_of(online.judge_config(provider, MODELS[provider])).run(
            model, verbose=False, runs_dir=tmp_path / "online")
    batch_report = suite_of(service.judge_config(provider, MODELS[provider])).run(
        model, verbose=False, runs_dir=tmp_path / "batch")

    assert verdicts(batch_report) == verdicts(online_report)
    assert {v[0] for v in verdicts(batch_report).values()} == {"PASSED", "FAILED"}
    assert service.items_received == online.request_count == 12
    # Every request went in a batch, none online; 6 cases arriving together make one batch.
    assert service.batches_created == 1
    online_usage, batch_usage = online_report.summary.total_token_usage, batch_report.summary.total_token_usage
    assert (batch_usage.input_tokens, batch_usage.output_tokens) == (
        online_usage.input_tokens, online_usage.output_tokens)
    assert batch_usage.batch_requests == batch_usage.requests == 12
    assert online_usage.batch_requests == 0
    assert batch_usage.cost_usd == pytest.approx(0.5 * online_usage.cost_usd)
    assert batch_usage.online_cost_usd == pytest.approx(online_usage.cost_usd)
    assert "12 by batch API (online: $" in batch_usage.describe()


def test_a_batch_run_keeps_every_case_in_flight_unless_a_concurrency_is_chosen(service,
                                                                              tmp_path):
    """At the default of 8 cases at once, 20 cases went out as 3 batches one after another
    (hours each at a provider); unchosen, a batch run keeps them all in flight: one batch."""
    from referee.run.engine import DEFAULT_CONCURRENCY
    from referee.run.session import BATCH_API_CASE_CONCURRENCY

    assert BATCH_API_CASE_CONCURRENCY > DEFAULT_CONCURRENCY
    cfg = service.judge_config("openai", MODELS["openai"])

    def twenty(run: str) -> EvalSuite:  # the run in each prompt: no reply cached for the other
        suite = EvalSuite("batch")
        suite.add_cases([EvalCase(input=f"[{run} case-{i}] refund window?") for i in range(20)])
        return suite.add_evaluator(CustomRubric([RUBRIC[0]], judge=cfg))

    report = twenty("default").run(model, verbose=False, runs_dir=tmp_path / "default")
    assert report.passed == 20
    assert (service.batches_created, service.items_received) == (1, 20)
    report = twenty("chosen").run(model, verbose=False, runs_dir=tmp_path / "chosen",
                                  concurrency=8)
    assert report.passed == 20
    assert service.batches_created == 1 + 3  # 8 + 8 + 4: the chosen concurrency holds


def test_batch_price_is_half_the_online_price_for_identical_tokens():
    for provider, model_name in MODELS.items():
        online = usage_for(model_name, 12_000, 800, cached_input_tokens=4_000)
        batch = usage_for(model_name, 12_000, 800, cached_input_tokens=4_000,
                          batch_provider=provider)
        assert online.cost_usd and batch.cost_usd == pytest.approx(0.5 * online.cost_usd)
        assert batch.batch_savings_usd == pytest.approx(0.5 * online.cost_usd)
        total = online + batch
        assert total.batch_requests == 1 and total.online_cost_usd == pytest.approx(
            2 * online.cost_usd)


def test_responses_api_bodies_go_in_a_responses_batch(service):
    cfg = service.judge_config("openai", MODELS["openai"], api_style="responses")

    async def ask() -> list[str]:
        judge = get_judge(cfg)
        return [r.text for r in await asyncio.gather(*(judge.complete(f"q{i}")
                                                       for i in range(3)))]

    assert asyncio.run(ask()) == ["Yes"] * 3
    assert {r.path for r in service.requests} == {"/v1/responses"}
    assert service.batches_created == 1


def test_check_evaluator_generates_then_asks_in_two_rounds_of_batches(service):
    questions = ["Does it name the window?", "Does it say how to return?"]
    service.add_rule(lambda r: "yes/no question(s) for this criterion" in r.prompt,
                     json.dumps({"questions": questions}))
    service.add_rule(lambda r: "how to return" in r.prompt, "No")
    check = CheckEvaluator("Mentions the return policy",
                           judge=service.judge_config("openai", MODELS["openai"]))
    suite = EvalSuite("check")
    suite.add_cases([EvalCase(input=f"q{i}") for i in range(3)])
    suite.add_evaluator(check)
    report = suite.run(lambda p: "30 days", verbose=False, save=False)

    scores = [c.criterion_results[0].score for c in report.cases]
    assert scores == [0.5, 0.5, 0.5]
    assert service.batches_created >= 2  # the questions first, then their answers
    assert service.items_received == 1 + 3 * len(questions)


def test_geval_steps_then_scores_by_batch(service):
    service.add_rule(lambda r: "evaluation steps" in r.prompt.lower(),
                     json.dumps({"steps": ["Read it.", "Judge clarity."]}))
    service.set_reply('{"score": 0.8, "reason": "clear"}')
    ev = GEval(criteria="Is it clear?", judge=service.judge_config("anthropic",
                                                                   MODELS["anthropic"]))
    suite = EvalSuite("geval")
    suite.add_cases([EvalCase(input=f"q{i}") for i in range(2)])
    suite.add_evaluator(ev)
    report = suite.run(lambda p: "An answer.", verbose=False, save=False)

    assert [c.criterion_results[0].score for c in report.cases] == [
        pytest.approx(0.8), pytest.approx(0.8)]
    assert service.items_received == len(service.requests) >= 2
    assert report.summary.total_token_usage.batch_requests == report.summary.total_token_usage.requests


def _ask_all(cfg: JudgeConfig, prompts: list[str]) -> list[str | JudgeUnavailable]:
    async def ask() -> list[str | JudgeUnavailable]:
        judge = get_judge(cfg)
        replies = await asyncio.gather(*(judge.complete(p) for p in prompts),
                                       return_exceptions=True)
        return [r if isinstance(r, JudgeUnavailable) else r.text  # type: ignore[union-attr]
                for r in replies]
    return asyncio.run(ask())


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_item_error_is_retried_in_a_new_batch(provider, service):
    failed_once: set[str] = set()

    def reply(request):
        if "flaky" in request.prompt and request.prompt not in failed_once:
            failed_once.add(request.prompt)
            return Fault.server_error(500)
        return "Yes"

    service.set_reply(reply)
    assert _ask_all(service.judge_config(provider, MODELS[provider]),
                    ["flaky one", "steady"]) == ["Yes", "Yes"]
    assert service.batches_created == 2  # the flaky item went again, alone
    assert service.items_received == 3


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_item_the_provider_refuses_is_a_judge_error_never_a_verdict(provider, service):
    service.add_rule("broken", Fault.http(400))
    results = _ask_all(service.judge_config(provider, MODELS[provider]), ["broken", "fine"])

    assert results[1] == "Yes"
    error = results[0]
    assert isinstance(error, JudgeUnavailable)
    assert "batch item failed after 1 batch(es)" in str(error)
    assert service.batches_created == 1  # a 400 is the request's own fault: not sent again


def test_an_item_that_keeps_failing_is_a_judge_error_after_the_attempt_bound(service,
                                                                             monkeypatch):
    monkeypatch.setenv("REFEREE_BATCH_ITEM_ATTEMPTS", "2")
    service.add_rule("doomed", Fault.server_error(503))
    results = _ask_all(service.judge_config("openai", MODELS["openai"]), ["doomed"])

    assert isinstance(results[0], JudgeUnavailable)
    assert "after 2 batch(es)" in str(results[0]) and "HTTP 503" in str(results[0])
    assert service.batches_created == 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_expired_items_go_out_again_and_the_answered_ones_are_kept(provider, service):
    service.expire_next_batches(1, answered=1)
    results = _ask_all(service.judge_config(provider, MODELS[provider]),
                       ["first", "second", "third"])

    assert results == ["Yes", "Yes", "Yes"]
    assert service.batches_created == 2
    assert service.items_received == 3 + 2  # only the two expired items went again
    assert list(service.batch_states().values()) == ["expired", "ended"]


def test_items_that_expire_every_time_are_judge_errors(service, monkeypatch):
    monkeypatch.setenv("REFEREE_BATCH_ITEM_ATTEMPTS", "2")
    service.expire_next_batches(2)
    results = _ask_all(service.judge_config("anthropic", MODELS["anthropic"]), ["a", "b"])

    assert all(isinstance(r, JudgeUnavailable) for r in results)
    assert all("expired" in str(r) for r in results)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_batch_over_the_enqueued_token_limit_is_split_not_failed(provider):
    prompts = [f"request {i}: " + "word " * 200 for i in range(4)]  # ~250 tokens each
    with ScriptedBatchService(processing_s=0.05, enqueued_token_limit=600) as svc:
        results = _ask_all(svc.judge_config(provider, MODELS[provider]), prompts)
        assert results == ["Yes"] * 4
        assert svc.calls.get("batches.rejected", 0) >= 1
        # Every request was answered exactly once.
        assert sorted(r.prompt for r in svc.requests) == sorted(prompts)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_request_alone_over_the_enqueued_token_limit_is_a_judge_error(provider):
    with ScriptedBatchService(processing_s=0.05, enqueued_token_limit=10) as svc:
        results = _ask_all(svc.judge_config(provider, MODELS[provider]), ["word " * 100])
        assert isinstance(results[0], JudgeUnavailable)
        assert "enqueued-token limit" in str(results[0])
        assert svc.requests == []


def test_a_provider_without_a_batch_api_is_a_judge_error_naming_it():
    from referee.testing import FakeJudge

    fake = FakeJudge()
    results = _ask_all(fake.judge_config(batch_api=True), ["q"])
    assert isinstance(results[0], JudgeUnavailable)
    assert "batch API is not available for judge provider 'fake'" in str(results[0])
    assert fake.request_count == 0  # never sent online behind the user's back


def test_the_environment_variable_turns_batching_on(monkeypatch):
    assert JudgeConfig().effective_batch_api is False
    monkeypatch.setenv("REFEREE_JUDGE_BATCH_API", "1")
    assert JudgeConfig().effective_batch_api is True
    assert JudgeConfig(batch_api=False).effective_batch_api is False
    monkeypatch.setenv("REFEREE_JUDGE_BATCH_API", "maybe")
    with pytest.raises(ValueError, match="REFEREE_JUDGE_BATCH_API"):
        JudgeConfig().effective_batch_api  # noqa: B018


def test_identical_requests_waiting_together_share_one_item(service):
    assert _ask_all(service.judge_config("openai", MODELS["openai"]), ["same"] * 3) == [
        "Yes"] * 3
    assert service.items_received == 1


def test_the_journal_records_keys_before_and_the_batch_id_after_submission(service, tmp_path):
    cfg = service.judge_config("anthropic", MODELS["anthropic"])

    async def ask() -> None:
        with batch_journal(tmp_path):
            await asyncio.gather(*(get_judge(cfg).complete(p) for p in ("a", "b")))

    asyncio.run(ask())
    lines = [json.loads(line) for line in (tmp_path / JOURNAL_FILE).read_text().splitlines()]
    assert [line["event"] for line in lines] == ["submitting", "submitted"]
    assert len(lines[0]["custom_ids"]) == 2
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", i) for i in lines[0]["custom_ids"])
    assert lines[1]["batch_id"] == next(iter(service.batch_states()))
    journal = BatchJournal(tmp_path)
    assert {journal.batch_of(i).batch_id for i in lines[0]["custom_ids"]} == {  # type: ignore[union-attr]
        lines[1]["batch_id"]}
    assert journal.batch_of(request_id("never sent")) is None


def test_a_torn_journal_line_counts_as_never_submitted(tmp_path):
    (tmp_path / JOURNAL_FILE).write_text(
        '{"event":"submitting","local":"a","provider":"openai","path":"/chat/completions",'
        '"custom_ids":["r1"]}\n{"event":"submitted","local":"a","batch_')
    journal = BatchJournal(tmp_path)
    assert journal.batch_of("r1") is None
    assert journal.unconfirmed == 1


def test_a_resumed_process_follows_the_journalled_batch_and_resubmits_nothing(tmp_path):
    with ScriptedBatchService(processing_s=0.3) as svc:
        cfg = svc.judge_config("openai", MODELS["openai"])

        async def submit_then_stop() -> None:
            with batch_journal(tmp_path):
                tasks = [asyncio.ensure_future(get_judge(cfg).complete(p)) for p in "abc"]
                journal = tmp_path / JOURNAL_FILE
                while not journal.is_file() or '"submitted"' not in journal.read_text():
                    await asyncio.sleep(0.01)  # until the batch id is journalled
                for task in tasks:
                    task.cancel()  # the process "dies" before the results

        asyncio.run(submit_then_stop())
        assert svc.batches_created == 1

        async def resume() -> list[str]:
            with batch_journal(tmp_path):
                replies = await asyncio.gather(*(get_judge(cfg).complete(p) for p in "abc"))
            return [r.text for r in replies]

        assert asyncio.run(resume()) == ["Yes"] * 3
        assert svc.batches_created == 1 and svc.items_received == 3


def test_batch_judge_errors_end_the_case_as_a_judge_error(service, tmp_path):
    service.add_rule("polite", Fault.http(400))
    report = suite_of(service.judge_config("openai", MODELS["openai"])).run(
        model, verbose=False, runs_dir=tmp_path)
    assert {c.status for c in report.cases} == {CaseStatus.JUDGE_ERROR}


COHERENCE_GOOD = {"logical order": "Yes", "contradict itself": "No", "abrupt jumps": "No",
                  "understandable": "Yes"}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_judge_panel_sends_each_members_requests_in_its_own_model_batch(provider, service):
    from referee.evaluators import Coherence
    from referee.execution import ExecutionResult
    from referee.judge import JudgePanel

    def responder(request):
        question = re.search(r"^Question: (.*)$", request.prompt, re.MULTILINE).group(1)
        good = next(a for f, a in COHERENCE_GOOD.items() if f in question)
        if request.model == "judge-b" and "logical order" in question:
            return "No"  # outvoted by the other two
        return good

    service.set_reply(responder)
    panel = JudgePanel(members=[service.judge_config(provider, model=m)
                                for m in ("judge-a", "judge-b", "judge-c")])

    async def judge() -> object:
        return await Coherence(judge=panel).evaluate(
            ExecutionResult(actual_response="Plants make sugar."), EvalCase(input="Explain."))

    result = asyncio.run(judge())
    assert result.score == 1.0  # type: ignore[attr-defined]
    assert result.details["panel"]["answered"] == 3  # type: ignore[attr-defined]
    assert service.items_received == 12
    assert service.batches_created == 3  # one model a batch
    assert all(state == "ended" for state in service.batch_states().values())


def test_pairwise_asks_both_orders_by_batch(service):
    from referee.pairwise import PairwiseJudge

    good, bad = "Paris is the capital of France.", "I think it is Lyon."

    def prefers_good(request) -> str:
        first = request.prompt.split("RESPONSE 1", 1)[1].split("RESPONSE 2", 1)[0]
        return json.dumps({"winner": "1" if good in first else "2", "reason": "correct"})

    service.set_reply(prefers_good)
    judge = PairwiseJudge("The answer is correct.",
                          judge=service.judge_config("openai", MODELS["openai"]))
    verdict = asyncio.run(judge.compare("Capital of France?", bad, good))

    assert (verdict.preferred, verdict.position_consistent) == ("b", True)
    assert service.items_received == 2 and service.batches_created == 1
    assert verdict.token_usage.batch_requests == 2


def faithfulness_answer(request) -> str:
    """A judge that sees [bad] outputs as unfaithful and misses the first two of them."""
    bad = "[bad]" in request.prompt
    if "contradicts the context" in request.prompt:
        return "Yes" if bad else "No"
    if "outside knowledge" in request.prompt:
        return "No"
    return "No" if bad else "Yes"


def labels_file(tmp_path, rows: int = 8):
    lines = [json.dumps({"id": f"row-{i}", "input": f"Q{i}?", "context": f"Fact {i}.",
                         "output": f"{'[ok]' if i % 2 == 0 or i < 2 else '[bad]'} answer {i}",
                         "label": "pass" if i % 2 == 0 else "fail"}) for i in range(rows)]
    path = tmp_path / "labels.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_calibrate_runs_in_batch_mode_with_the_online_agreement(tmp_path, monkeypatch):
    pytest.importorskip("numpy")
    from referee.calibrate import calibrate, load_labels
    from referee.evaluators import Faithfulness
    from referee.testing import DUMMY_API_KEY

    labels = labels_file(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", DUMMY_API_KEY)

    def agreement(base_url: str, runs: str) -> tuple[int, int, int, int]:
        monkeypatch.setenv("OPENAI_BASE_URL", base_url)
        report = calibrate(Faithfulness(), load_labels(labels), judge="openai/gpt-4o-mini",
                           folds=2, resamples=50, runs_dir=tmp_path / runs)
        a = report.agreement
        return a.tp, a.fp, a.fn, a.tn

    with ScriptedJudgeServer(faithfulness_answer) as online:
        expected = agreement(online.base_url("openai"), "online")
    with ScriptedBatchService(faithfulness_answer, processing_s=0.05) as batch:
        monkeypatch.setenv("REFEREE_JUDGE_BATCH_API", "1")
        assert agreement(batch.base_url("openai"), "batch") == expected
        assert batch.items_received == online.request_count > 0


def test_batch_replies_enter_the_reply_cache_and_a_rerun_sends_nothing(service, tmp_path):
    cfg = service.judge_config("openai", MODELS["openai"], cache=True,
                               cache_path=str(tmp_path / "cache.sqlite"))
    assert _ask_all(cfg, ["a", "b"]) == ["Yes", "Yes"]
    assert service.items_received == 2

    async def again() -> list[bool]:
        replies = await asyncio.gather(*(get_judge(cfg).complete(p) for p in ("a", "b")))
        return [r.cached for r in replies]

    assert asyncio.run(again()) == [True, True]
    assert service.batches_created == 1 and service.items_received == 2


def test_a_bad_batch_setting_is_a_judge_error_naming_the_variable(service, monkeypatch):
    monkeypatch.setenv("REFEREE_BATCH_WINDOW_S", "soon")
    results = _ask_all(service.judge_config("openai", MODELS["openai"]), ["q"])
    assert isinstance(results[0], JudgeUnavailable)
    assert "REFEREE_BATCH_WINDOW_S='soon' is not a number" in str(results[0])
    assert service.batches_created == 0


def test_calibrate_command_takes_judge_batch_api_for_that_command_only(tmp_path, monkeypatch,
                                                                       capsys):
    pytest.importorskip("numpy")
    import os

    from referee.cli import main
    from referee.testing import DUMMY_API_KEY

    labels = labels_file(tmp_path)
    with ScriptedBatchService(faithfulness_answer, processing_s=0.05) as svc:
        monkeypatch.setenv("OPENAI_BASE_URL", svc.base_url("openai"))
        monkeypatch.setenv("OPENAI_API_KEY", DUMMY_API_KEY)
        code = main(["calibrate", str(labels), "--evaluator", "faithfulness", "--judge",
                     "openai/gpt-4o-mini", "--judge-batch-api", "--folds", "2",
                     "--resamples", "50", "--out", str(tmp_path / "runs"),
                     "--calibration-file", str(tmp_path / "calibration.json")])
        assert code == 0, capsys.readouterr().err
        assert svc.items_received == 8 * 4 and svc.batches_created >= 1
    assert "REFEREE_JUDGE_BATCH_API" not in os.environ


@pytest.mark.parametrize("provider", PROVIDERS)
def test_batch_fallback_online_asks_what_no_batch_answered_online_at_the_online_price(
        provider, service, monkeypatch):
    monkeypatch.setenv("REFEREE_BATCH_ITEM_ATTEMPTS", "1")
    service.expire_next_batches(1, answered=1)  # "second" expires, and is not sent again
    cfg = service.judge_config(provider, MODELS[provider], batch_fallback="online")

    async def ask() -> list[Any]:
        judge = get_judge(cfg)
        return list(await asyncio.gather(*(judge.complete(p) for p in ("first", "second"))))

    first, second = asyncio.run(ask())
    assert (first.text, second.text) == ("Yes", "Yes")
    assert service.online_requests == 1 and service.batches_created == 1
    assert first.usage.batch_requests == 1 and second.usage.batch_requests == 0
    assert second.usage.batch_savings_usd == 0.0


def test_without_the_fallback_nothing_goes_online(service, monkeypatch):
    monkeypatch.setenv("REFEREE_BATCH_ITEM_ATTEMPTS", "1")
    service.expire_next_batches(1)
    results = _ask_all(service.judge_config("openai", MODELS["openai"]), ["only"])
    assert isinstance(results[0], JudgeUnavailable)
    assert service.online_requests == 0


def test_the_reliability_recheck_is_asked_again_by_batch_never_from_the_first_answers(
        service, tmp_path):
    script(service)
    cfg = service.judge_config("anthropic", MODELS["anthropic"], reliability_check=True,
                               reliability_sample=2)
    report = suite_of(cfg).run(model, verbose=False, runs_dir=tmp_path)

    assert report.judge_reliability == 1.0
    assert service.items_received == 12 + 2 * 2  # two cases' two questions asked again
    assert service.batches_created == 2
    assert service.online_requests == 0


def test_a_verbose_run_prints_each_batchs_progress_and_the_batch_bill(service, tmp_path,
                                                                      capsys):
    script(service)
    suite_of(service.judge_config("anthropic", MODELS["anthropic"])).run(
        model, verbose=True, runs_dir=tmp_path)
    out, err = capsys.readouterr()
    [batch_id] = service.batch_states()
    assert f"judge anthropic/claude-haiku-4-5: batch {batch_id} submitted, 12 request(s)" in err
    assert re.search(rf"batch {batch_id} ended \(12/12 done, 0 failed, \d+s\)", err)
    assert "12 by batch API (online: $" in out
    # Quiet runs print none of it.
    suite_of(service.judge_config("anthropic", MODELS["anthropic"])).run(
        model, verbose=False, runs_dir=tmp_path)
    assert "submitted" not in capsys.readouterr().err


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_batch_cancelled_at_the_provider_has_its_requests_sent_again(provider):
    with ScriptedBatchService(processing_s=60) as svc:  # runs until it is cancelled
        cfg = svc.judge_config(provider, MODELS[provider])

        async def ask_and_cancel() -> list[str]:
            judge = get_judge(cfg)
            asks = asyncio.gather(*(judge.complete(p) for p in ("a", "b")))
            while not svc.batch_states():
                await asyncio.sleep(0.01)
            [batch_id] = svc.batch_states()
            svc.processing_s = 0.05  # the batch sent next ends at once
            await asyncio.to_thread(_cancel_through_sdk, svc, provider, batch_id)
            return [r.text for r in await asks]

        assert asyncio.run(ask_and_cancel()) == ["Yes", "Yes"]
        assert sorted(svc.batch_states().values()) == ["cancelled", "ended"]
        assert svc.calls["batches.cancel"] == 1
        assert svc.items_received == 4 and len(svc.requests) == 2  # answered once each


def _cancel_through_sdk(svc: ScriptedBatchService, provider: str, batch_id: str) -> None:
    from referee.testing import DUMMY_API_KEY

    if provider == "openai":
        import openai

        openai.OpenAI(base_url=svc.base_url("openai"), api_key=DUMMY_API_KEY).batches.cancel(
            batch_id)
    elif provider == "anthropic":
        import anthropic

        anthropic.Anthropic(base_url=svc.base_url("anthropic"),
                            api_key=DUMMY_API_KEY).messages.batches.cancel(batch_id)
    else:
        from google import genai

        client = genai.Client(api_key=DUMMY_API_KEY,
                              http_options={"base_url": svc.base_url("google")})
        client.batches.cancel(name=f"batches/{batch_id}")  # the client must outlive the call


def test_each_requests_stand_in_client_is_released_once_answered(service):
    import gc

    from referee.judge.providers._direct import _direct_http

    assert _ask_all(service.judge_config("anthropic", MODELS["anthropic"]),
                    [f"q{i}" for i in range(5)]) == ["Yes"] * 5
    gc.collect()
    assert [k for k in list(_direct_http.keys()) if type(k).__name__ == "_Lane"] == []


@pytest.mark.parametrize(("provider", "found"), [("openai", True), ("google", True),
                                                 ("anthropic", False)])
def test_a_batch_whose_id_was_never_journalled_is_found_by_its_label(provider, found,
                                                                     tmp_path, monkeypatch):
    """The process died inside the create call: the journal has the requests, not the id."""
    with ScriptedBatchService(processing_s=0.3) as svc:
        cfg = svc.judge_config(provider, MODELS[provider])

        async def submit_then_die() -> None:
            with batch_journal(tmp_path):
                tasks = [asyncio.ensure_future(get_judge(cfg).complete(p)) for p in "abc"]
                while svc.batches_created == 0:
                    await asyncio.sleep(0.01)
                await asyncio.sleep(0.05)
                for task in tasks:
                    task.cancel()

        with monkeypatch.context() as patch:
            patch.setattr(BatchJournal, "submitted", lambda *args: None)
            asyncio.run(submit_then_die())
        assert BatchJournal(tmp_path).unconfirmed == 1

        async def resume() -> list[str]:
            with batch_journal(tmp_path):
                replies = await asyncio.gather(*(get_judge(cfg).complete(p) for p in "abc"))
            return [r.text for r in replies]

        assert asyncio.run(resume()) == ["Yes"] * 3
        assert (svc.batches_created, svc.calls.get("batches.list", 0)) == (
            (1, 1) if found else (2, 0)), svc.calls


def test_compare_judge_takes_judge_batch_api(tmp_path, capsys, monkeypatch):
    from test_pairwise_models import checking_judge, number, right

    from referee.cli import main
    from referee.testing import DUMMY_API_KEY

    cases = [EvalCase(input=f"What is {i} + {i}?", eval_id=f"sum-{i}") for i in range(6)]

    def wrong(question: str) -> str:
        n = number(question)
        return f"{2 * n + 1}" if n % 3 else f"{2 * n}"  # every third case: the same answer

    def stored(name: str, answer) -> str:
        EvalSuite(name).add_cases(cases).run(answer, verbose=False, runs_dir=tmp_path / name)
        [run_dir] = (tmp_path / name).iterdir()
        return str(run_dir)

    a, b = stored("wrong", wrong), stored("right", right)
    with ScriptedBatchService(checking_judge, processing_s=0.05) as svc:
        monkeypatch.setenv("OPENAI_BASE_URL", svc.base_url("openai"))
        monkeypatch.setenv("OPENAI_API_KEY", DUMMY_API_KEY)
        code = main(["compare", a, b, "--judge", "openai/gpt-4o-mini", "--criterion",
                     "The sum is correct.", "--judge-batch-api"])
        out, err = capsys.readouterr()
        assert code == 0, err
        assert "B won 4, tied 2, lost 0 of 6 judged pair(s)" in out
        assert svc.items_received == 8 and svc.online_requests == 0  # 4 pairs, both orders
