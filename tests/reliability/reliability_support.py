"""Shared pieces of the reliability tests: a per-case judge script and request accounting.

Every case's input carries a marker ``[case-N]``; the judge prompt quotes the input, so the
scripted server can tell which case a request belongs to and the tests can count requests
per case.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Callable

from referee.testing import Fault, RecordedRequest, Reply, ScriptedJudgeServer

MARKER = re.compile(r"\[case-(\d+)\]")
GEVAL_SYSTEM_HINT = "continuous scale"  # GEval's system prompt; QAG's asks for Yes/No

# The three provider surfaces the fault matrix covers.
PROVIDERS = [("openai", "chat"), ("openai", "responses"), ("anthropic", "chat")]
PROVIDER_IDS = ["openai-chat", "openai-responses", "anthropic"]


def case_input(i: int) -> str:
    return f"[case-{i}] What is the refund window?"


def case_of(request: RecordedRequest) -> int | None:
    found = MARKER.search(request.prompt)
    return int(found.group(1)) if found else None


def requests_per_case(server: ScriptedJudgeServer) -> Counter[int | None]:
    return Counter(case_of(r) for r in server.requests)


def is_geval(request: RecordedRequest) -> bool:
    return GEVAL_SYSTEM_HINT in (request.system or "")


def good_reply(request: RecordedRequest, good: bool = True) -> str:
    """What an honest judge says: QAG Yes/No, GEval a JSON score."""
    if is_geval(request):
        return json.dumps({"score": 0.9 if good else 0.1,
                           "reason": "meets the criterion" if good else "misses the criterion"})
    return "Yes" if good else "No"


@dataclass
class FaultPlan:
    """What the faulty case's requests get.

    ``fault`` for the first ``count`` requests (None: every request), then honest replies;
    or ``content(request)`` for every request: a 200 whose text is the problem.
    """

    fault: Fault | None = None
    count: int | None = None
    content: Callable[[RecordedRequest], str | Reply | Fault] | None = None


class CaseJudge:
    """A responder: honest judge for every case, ``bad`` cases judged as failing, one faulty case."""

    def __init__(self, faulty: int | None = None, plan: FaultPlan | None = None,
                 bad: frozenset[int] = frozenset()) -> None:
        self.faulty = faulty
        self.plan = plan or FaultPlan()
        self.bad = bad
        self._lock = threading.Lock()
        self.faults_served = 0

    def __call__(self, request: RecordedRequest) -> str | Reply | Fault:
        case = case_of(request)
        if case is not None and case == self.faulty:
            plan = self.plan
            if plan.content is not None:
                return plan.content(request)
            if plan.fault is not None:
                with self._lock:
                    if plan.count is None or self.faults_served < plan.count:
                        self.faults_served += 1
                        return plan.fault
        return good_reply(request, good=case not in self.bad)
