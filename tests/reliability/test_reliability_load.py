"""Issue 7, item 5: 2,000 cases x 4 judged evaluators against a judge that rate-limits 30%.

The judge answers at once (latency ~0, so the test stays bounded); the 429s carry
``Retry-After: 0``. The full 2,000 cases (about 11,000 judge requests) go through the
in-process FakeJudge, which sits behind the same judge layer (endpoint limiter, retries,
Retry-After, accounting) but skips the SDK's ~3 ms of CPU per request; 250 cases go through
the loopback HTTP server and the real OpenAI SDK, so the wire path is held to the same bar. The run must complete with every case accounted for, every 429 must cost
exactly one more request (no lost and no duplicated calls), and the server must never see more
requests in flight than the endpoint's concurrency cap, although the engine runs far more
cases at once than the cap allows judge calls.
"""

from __future__ import annotations

import random
import threading

import pytest
from reliability_support import case_input, case_of, requests_per_case

from referee import EvalCase, EvalSuite
from referee.evaluators import CustomRubric
from referee.report.model import CaseStatus
from referee.testing import FakeJudge, Fault, RecordedRequest, Reply, ScriptedJudgeServer

N_CASES = 2000
EVALUATORS = 4
RATE_LIMITED = 0.30
JUDGE_CAP = 6
CASE_CONCURRENCY = 48  # x4 evaluators: up to 192 judge calls want to run at once
FAILING = frozenset(range(0, N_CASES, 9))


class RateLimitingJudge:
    """429 on ~30% of requests (seeded), never more than 3 in a row for one call."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rng = random.Random(7)
        self._streak: dict[str, int] = {}
        self.rate_limited = 0
        self.answered = 0

    def __call__(self, request: RecordedRequest) -> Reply | Fault:
        key = request.prompt
        with self._lock:
            if self._streak.get(key, 0) < 3 and self._rng.random() < RATE_LIMITED:
                self._streak[key] = self._streak.get(key, 0) + 1
                self.rate_limited += 1
                return Fault.rate_limit(retry_after=0)
            self._streak.pop(key, None)
            self.answered += 1
        # A millisecond of latency: the in-process judge must yield, or nothing overlaps.
        return Reply("No" if case_of(request) in FAILING else "Yes", latency_s=0.001)


pytestmark = pytest.mark.usefixtures("isolated_judge")


@pytest.fixture(params=["in-process-2000", "http-250"])
def judge(request: pytest.FixtureRequest):
    """(judge config factory, record of requests, number of cases) for one backend."""
    if request.param.startswith("http"):
        with ScriptedJudgeServer() as server:
            yield (lambda **kw: server.judge_config(provider="openai", **kw)), server, 250
    else:
        fake = FakeJudge()
        yield fake.judge_config, fake, N_CASES


@pytest.mark.timeout(110)
async def test_cases_under_30_percent_rate_limiting(judge) -> None:
    make_config, server, n_cases = judge
    script = RateLimitingJudge()
    server.set_reply(script)
    cfg = make_config(max_concurrency=JUDGE_CAP)
    suite = EvalSuite("load")
    suite.add_cases([EvalCase(input=case_input(i)) for i in range(n_cases)])
    suite.add_evaluators([
        CustomRubric([(f"Check {name}: is the answer acceptable?", True)], name=f"rubric_{name}",
                     judge=cfg)
        for name in "abcd"[:EVALUATORS]
    ])

    report = await suite.run_async(lambda prompt: "30 days. " + prompt, verbose=False,
                                   save=False, concurrency=CASE_CONCURRENCY)

    assert report.total == n_cases
    assert sorted(c.index for c in report.cases) == list(range(n_cases))
    expected = {i: CaseStatus.FAILED if i in FAILING else CaseStatus.PASSED
                for i in range(n_cases)}
    assert {c.index: c.status for c in report.cases} == expected
    assert report.errors == 0 and report.error_rate == 0.0
    assert all(len(c.criterion_results) == EVALUATORS for c in report.cases)

    # Each call got through exactly once; each 429 cost exactly one retry.
    assert script.answered == n_cases * EVALUATORS
    assert server.request_count == script.answered + script.rate_limited
    assert 0.25 < script.rate_limited / server.request_count < 0.35
    assert set(requests_per_case(server)) == set(range(n_cases))
    assert 1 <= server.max_in_flight <= JUDGE_CAP, server.max_in_flight
