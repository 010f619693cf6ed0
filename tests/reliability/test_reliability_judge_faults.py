"""Issue 7, item 1: judge faults, per provider, through whole suite runs.

Each scenario runs four cases through two judged evaluators (a one-question CustomRubric and
a one-run GEval, so every case costs exactly two judge calls when nothing goes wrong): case 0
and 3 are good, case 1 is judged failing, case 2 meets the fault. The run must finish with a
definite status for every case, the faulty case's judge requests counted at the server must
match the retry bound exactly, and ``error_rate`` must count exactly the errored cases.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from reliability_support import (
    PROVIDER_IDS,
    PROVIDERS,
    CaseJudge,
    FaultPlan,
    case_input,
    is_geval,
    requests_per_case,
)

from referee import EvalCase, EvalSuite
from referee.evaluators import CustomRubric, GEval
from referee.judge import retry as retry_module
from referee.report.model import CaseStatus, EvalReport
from referee.testing import Fault, RecordedRequest, Reply, ScriptedJudgeServer

MAX_RETRIES = 2
ATTEMPTS = 1 + MAX_RETRIES
CALLS_PER_CASE = 2  # CustomRubric (one question) + GEval (one run)
FAULTY, BAD = 2, 1
HANG_TIMEOUT_S = 1.0  # generous: a normal reply must never be cut by it, even on a busy machine


pytestmark = pytest.mark.usefixtures("isolated_judge")


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Delays the retry loop asked for, recorded instead of waited out."""
    recorded: list[float] = []

    async def record(seconds: float) -> None:
        recorded.append(seconds)

    monkeypatch.setattr(retry_module, "sleep", record)
    return recorded


def _backoff_only(sleeps: list[float]) -> bool:
    # Full-jitter backoff of the first two retries: [0.25, 0.5] then [0.5, 1.0].
    return bool(sleeps) and all(0.25 <= s <= 1.0 for s in sleeps)


def _geval_score(value: float) -> Callable[[RecordedRequest], str]:
    def content(request: RecordedRequest) -> str:
        if is_geval(request):
            return json.dumps({"score": value, "reason": "off the scale"})
        return "Yes"
    return content


HEDGE = "It depends on how you read it; possibly, but I cannot say for sure."


@dataclass(frozen=True)
class Scenario:
    id: str
    plan: FaultPlan
    status: CaseStatus
    requests: int  # judge requests the faulty case may cost, counted at the server
    error_words: tuple[str, ...] = ()
    sleeps_ok: Callable[[list[float]], bool] | None = None
    timeout: float | None = None
    requests_at_least: bool = False  # 429s: a time budget, so a floor rather than a count
    rate_limit_wait_s: float | None = None


PASS, JERR = CaseStatus.PASSED, CaseStatus.JUDGE_ERROR
EXHAUSTED = (f"after {ATTEMPTS} attempt(s)", "attempts exhausted")
SCENARIOS = [
    # A 429 is a pace: the whole endpoint pauses (so other cases' requests wait too) and the
    # request goes on until its pauses pass the rate-limit wait budget, whatever max_retries is.
    Scenario("429-retry-after-recovers", FaultPlan(Fault.rate_limit(retry_after=7), count=2),
             PASS, CALLS_PER_CASE + 2, sleeps_ok=lambda s: len(s) >= 2 and all(
                 6.5 <= x <= 7.0 for x in s)),
    Scenario("429-retry-after-persists", FaultPlan(Fault.rate_limit(retry_after=1)),
             JERR, CALLS_PER_CASE * 3, ("HTTP 429", "rate-limit wait budget (2.5s) exhausted"),
             sleeps_ok=lambda s: all(0.5 <= x <= 1.0 for x in s), requests_at_least=True,
             rate_limit_wait_s=2.5),
    Scenario("429-no-retry-after-recovers", FaultPlan(Fault.rate_limit(), count=2),
             PASS, CALLS_PER_CASE + 2,  # the endpoint's backoff, or what is left of it
             sleeps_ok=lambda s: bool(s) and all(0 < x <= 1.0 for x in s)),
    Scenario("429-no-retry-after-persists", FaultPlan(Fault.rate_limit()),
             JERR, CALLS_PER_CASE * 2, ("HTTP 429", "rate-limit wait budget (2s) exhausted"),
             requests_at_least=True, rate_limit_wait_s=2.0),
    Scenario("500-burst-recovers", FaultPlan(Fault.server_error(500), count=2),
             PASS, CALLS_PER_CASE + 2, sleeps_ok=_backoff_only),
    Scenario("503-burst-outlasts-retries", FaultPlan(Fault.http(503)),
             JERR, CALLS_PER_CASE * ATTEMPTS, ("HTTP 503", *EXHAUSTED)),
    Scenario("connection-reset-recovers", FaultPlan(Fault.reset(), count=1),
             PASS, CALLS_PER_CASE + 1),
    Scenario("connection-reset-persists", FaultPlan(Fault.reset()),
             JERR, CALLS_PER_CASE * ATTEMPTS, ("connection error", *EXHAUSTED)),
    Scenario("hang-past-timeout-recovers", FaultPlan(Fault.hang(), count=1),
             PASS, CALLS_PER_CASE + 1, timeout=HANG_TIMEOUT_S),
    # Every request here is at temperature 0: a deterministic request that timed out is
    # retried once, whatever max_retries is (it would most likely time out again).
    Scenario("hang-past-timeout-persists", FaultPlan(Fault.hang()),
             JERR, CALLS_PER_CASE * 2, ("timeout", "after 2 attempt(s)", "retried 1 time(s) only"),
             timeout=HANG_TIMEOUT_S),
    Scenario("truncated-json-recovers", FaultPlan(Fault.truncated(), count=1),
             PASS, CALLS_PER_CASE + 1),
    Scenario("truncated-json-persists", FaultPlan(Fault.truncated()),
             JERR, CALLS_PER_CASE * ATTEMPTS, EXHAUSTED),
    Scenario("non-json-body-recovers", FaultPlan(Fault.non_json(), count=1),
             PASS, CALLS_PER_CASE + 1),
    Scenario("non-json-body-persists", FaultPlan(Fault.non_json()),
             JERR, CALLS_PER_CASE * ATTEMPTS, EXHAUSTED),
    # A 200 whose content is the problem is an answer, not an outage: never retried.
    Scenario("empty-content", FaultPlan(content=lambda r: Reply(text="")),
             JERR, CALLS_PER_CASE, ("every judge verdict was unparseable",
                                    "returned a score between 0.0 and 1.0")),
    Scenario("hedged-verdicts", FaultPlan(content=lambda r: HEDGE),
             JERR, CALLS_PER_CASE, ("1 of 1 question(s) UNKNOWN",
                                    "returned a score between 0.0 and 1.0")),
    Scenario("score-above-one", FaultPlan(content=_geval_score(7)),
             JERR, CALLS_PER_CASE, ("g_eval: ", "returned a score between 0.0 and 1.0")),
    Scenario("score-below-zero", FaultPlan(content=_geval_score(-0.5)),
             JERR, CALLS_PER_CASE, ("g_eval: ", "returned a score between 0.0 and 1.0")),
]


def _suite(cfg, n_cases: int = 4) -> EvalSuite:
    suite = EvalSuite("judge-fault-matrix")
    suite.add_cases([EvalCase(input=case_input(i), name=f"case {i}") for i in range(n_cases)])
    suite.add_evaluators(
        CustomRubric([("Does the answer state the refund window?", True)], judge=cfg),
        GEval("states the refund window correctly", runs=1, judge=cfg),
    )
    return suite


async def _model(prompt: str) -> str:
    return f"Refunds are accepted within 30 days. ({prompt[:9]})"


def _check_accounting(report: EvalReport, expected: dict[int, CaseStatus]) -> None:
    statuses = {c.index: c.status for c in report.cases}
    assert statuses == expected
    errored = [c for c in report.cases if c.status.is_error]
    assert report.errors == len(errored)
    assert report.error_rate == pytest.approx(len(errored) / report.total)
    assert report.total == len(expected)
    for case in report.cases:
        assert case.status in (CaseStatus.PASSED, CaseStatus.FAILED, CaseStatus.JUDGE_ERROR)
        if case.status is CaseStatus.JUDGE_ERROR:
            assert case.error, f"case {case.index} is a judge error without a reason"
            judged = [r for r in case.criterion_results if r.error_kind == "judge"]
            assert judged and all(r.error for r in judged)
        else:
            assert all(r.error_kind is None for r in case.criterion_results)


@pytest.mark.parametrize(("provider", "api_style"), PROVIDERS, ids=PROVIDER_IDS)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS])
async def test_judge_fault(judge_server: ScriptedJudgeServer, sleeps: list[float], provider: str,
                           api_style: str, scenario: Scenario) -> None:
    judge_server.set_reply(CaseJudge(faulty=FAULTY, plan=scenario.plan, bad=frozenset({BAD})))
    overrides = {"max_retries": MAX_RETRIES}
    if scenario.timeout is not None:
        overrides["timeout"] = scenario.timeout
    if scenario.rate_limit_wait_s is not None:
        overrides["rate_limit_wait_s"] = scenario.rate_limit_wait_s
    cfg = judge_server.judge_config(provider=provider, api_style=api_style, **overrides)

    report = await _suite(cfg).run_async(_model, verbose=False, save=False)

    expected = {0: CaseStatus.PASSED, BAD: CaseStatus.FAILED, FAULTY: scenario.status,
                3: CaseStatus.PASSED}
    _check_accounting(report, expected)
    per_case = requests_per_case(judge_server)
    if scenario.requests_at_least:
        assert per_case[FAULTY] >= scenario.requests, "the request gave up too early"
    else:
        assert per_case[FAULTY] == scenario.requests, "the retry bound was not kept"
    assert {per_case[i] for i in (0, BAD, 3)} == {CALLS_PER_CASE}
    assert per_case[None] == 0  # every request quoted its case
    faulty = report.cases[FAULTY]
    for word in scenario.error_words:
        assert word in (faulty.error or ""), (word, faulty.error)
    if scenario.sleeps_ok is not None:
        assert scenario.sleeps_ok(sleeps), sleeps


@pytest.mark.parametrize(("provider", "api_style"), PROVIDERS, ids=PROVIDER_IDS)
async def test_some_hedged_answers_are_excluded_not_scored_as_zero(
        judge_server: ScriptedJudgeServer, sleeps: list[float], provider: str,
        api_style: str) -> None:
    """One hedged verdict of three, one out-of-range GEval run of three: disclosed, not 0.0."""

    geval_calls: list[int] = []  # GEval's runs differ only in framing: pick one by arrival

    def responder(request: RecordedRequest) -> str:
        if is_geval(request):
            geval_calls.append(1)
            score = 42 if len(geval_calls) == 2 else 0.8
            return json.dumps({"score": score, "reason": "fine"})
        return HEDGE if "second:" in request.prompt else "Yes"

    judge_server.set_reply(responder)
    cfg = judge_server.judge_config(provider=provider, api_style=api_style, max_retries=0)
    suite = EvalSuite("partial")
    suite.add_case(EvalCase(input=case_input(0)))
    suite.add_evaluators(
        CustomRubric([("first: is it polite?", True), ("second: is it concise?", True),
                      ("third: is it correct?", True)], judge=cfg),
        GEval("helpful", runs=3, judge=cfg),
    )
    report = await suite.run_async(_model, verbose=False, save=False, concurrency=1)
    [case] = report.cases
    assert case.status is CaseStatus.PASSED
    rubric, geval = case.criterion_results
    assert rubric.score == 1.0 and rubric.details["unknown"] == 1
    assert "1 of 3 question(s) UNKNOWN — excluded from score denominator" in rubric.details["reason"]
    assert geval.score == pytest.approx(0.8)
    assert "1 of 3 run(s) returned no usable score" in geval.details["reason"]
    assert report.errors == 0 and report.error_rate == 0.0
