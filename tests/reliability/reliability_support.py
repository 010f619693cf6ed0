"""Shared pieces of the reliability tests: a per-case judge script and request accounting.

Every case's input carries a marker ``[case-N]``; the judge prompt quotes the input, so the
scripted server can tell which case a request belongs to and the tests can count requests
per case.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from chromium_support import browser_env, find_chromium

from referee.testing import Fault, RecordedRequest, Reply, ScriptedJudgeServer

MARKER = re.compile(r"\[case-(\d+)\]")
GEVAL_TASK_HINT = "continuous scale"  # in GEval's task; QAG's asks for Yes/No

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
    return GEVAL_TASK_HINT in request.prompt


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


# Payloads that leave a visible trace in the DOM if they ever run or break out of their place.
# The traces are computed ("pw" + "ned"), so the payload's own text, shown escaped, has none.
SCRIPT_PAYLOAD = '</script><script>document.title="pw"+"ned"</script>'
IMG_PAYLOAD = "<img src=x onerror=\"document.body.setAttribute('data-pw'+'ned','onerror')\">"
SVG_PAYLOAD = "<svg/onload=\"document.body.setAttribute('data-pw'+'ned','onload')\">"
BREAKOUT_PAYLOAD = "</pre></td></details><b id=\"escaped-markup\">x</b>"
HOSTILE = SCRIPT_PAYLOAD + IMG_PAYLOAD + SVG_PAYLOAD + BREAKOUT_PAYLOAD
assert "pwned" not in HOSTILE


def payload_traces(dom: str) -> list[str]:
    """What a payload that ran, or markup that escaped its text node, leaves in the DOM."""
    traces = []
    page_title = re.search(r"<title>([^<]*)</title>", dom)  # charts' SVG <title>s come later
    if page_title and "pwned" in page_title.group(1):
        traces.append("a script changed the title")
    if re.search(r"<body[^>]*data-pwned", dom):
        traces.append("an event handler ran")
    if '<b id="escaped-markup"' in dom:
        traces.append("markup escaped its container")
    return traces


def rendered_dom(url: str, profile: Path) -> str:
    """The DOM once the page has loaded and its scripts and handlers had their chance to run."""
    profile.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [find_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-extensions", "--disable-background-networking", "--disable-sync",
         "--disable-component-update", f"--user-data-dir={profile}",
         "--virtual-time-budget=2000", "--dump-dom", url],
        capture_output=True, text=True, timeout=90, env=browser_env(profile.parent))
    assert done.returncode == 0, f"chromium failed ({done.returncode}): {done.stderr[-1500:]}"
    assert "<body" in done.stdout, f"chromium returned no DOM: {done.stderr[-1500:]}"
    return done.stdout
