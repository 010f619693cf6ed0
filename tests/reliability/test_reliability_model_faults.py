"""Issue 7, item 2: a model under test that crashes, hangs, returns junk or floods output.

Every fault lands on its own case as MODEL_ERROR or TIMEOUT; the cases around it pass, the run
is stored whole, and the 1 MB output survives in the run record while the HTML page cuts it.
"""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from referee import EvalCase, EvalSuite, ExecutionResult
from referee.evaluators.deterministic import Contains
from referee.report.html import MAX_FIELD_CHARS
from referee.report.model import CaseStatus
from referee.report.store import load_run

GOOD = "Refunds are accepted within 30 days."
HUGE = ("30 days. " + "x" * 1023 + "\n") * 1024  # 1 MiB and change
TIMEOUT_S = 1.0

# case input -> (what the model does, expected status, words the case error must carry)
FAULTS: dict[str, tuple[str, CaseStatus, tuple[str, ...]]] = {
    "good-0": ("good", CaseStatus.PASSED, ()),
    "raises": ("raise", CaseStatus.MODEL_ERROR, ("RuntimeError", "model blew up")),
    "async-hang": ("async-hang", CaseStatus.TIMEOUT, ("did not finish within its 1s timeout",)),
    "sync-hang": ("sync-hang", CaseStatus.TIMEOUT, ("did not finish within its 1s timeout",)),
    "returns-int": ("int", CaseStatus.MODEL_ERROR, ("model returned int", "expected str, dict")),
    "returns-none": ("none", CaseStatus.MODEL_ERROR, ("model returned NoneType",)),
    "returns-object": ("object", CaseStatus.MODEL_ERROR, ("model returned object",)),
    "bad-dict": ("bad-dict", CaseStatus.MODEL_ERROR,
                 ("model returned a dict", "actual_response", "got list")),
    "reports-error": ("error-result", CaseStatus.MODEL_ERROR, ("upstream said 502",)),
    "huge-output": ("huge", CaseStatus.PASSED, ()),
    "good-1": ("good", CaseStatus.PASSED, ()),
}


@pytest.fixture
def release() -> threading.Event:
    """Lets the hung sync model go at the end, so its worker thread does not outlive the test."""
    event = threading.Event()
    yield event
    event.set()


def test_model_faults_are_isolated_to_their_case(tmp_path, release: threading.Event) -> None:
    # A sync model (run on referee's worker threads) and an async one cover both call paths.
    def sync_model(prompt: str):
        action = FAULTS[prompt][0]
        if action == "sync-hang":
            release.wait(60)
            return GOOD
        if action == "raise":
            raise RuntimeError("model blew up")
        return {"int": 42, "none": None, "object": object(),
                "bad-dict": {"actual_response": ["not", "text"]},
                "error-result": ExecutionResult(error="upstream said 502"),
                "huge": HUGE}.get(action, GOOD)

    async def async_model(prompt: str):
        if FAULTS[prompt][0] == "async-hang":
            await asyncio.sleep(3600)
        return await asyncio.to_thread(sync_model, prompt)

    for label, model in (("sync", sync_model), ("async", async_model)):
        if label == "sync":
            cases = {k: v for k, v in FAULTS.items() if v[0] != "async-hang"}
        else:
            cases = {k: v for k, v in FAULTS.items() if v[0] != "sync-hang"}
        suite = EvalSuite(f"model-faults-{label}")
        suite.add_cases([EvalCase(input=name, name=name) for name in cases])
        suite.add_evaluator(Contains(["30 days"]))
        runs = tmp_path / label
        report = suite.run(model, verbose=False, concurrency=4, timeout=TIMEOUT_S,
                           runs_dir=runs, formats=["json", "junit", "html"])

        got = {c.name: c.status for c in report.cases}
        assert got == {name: spec[1] for name, spec in cases.items()}, label
        for case in report.cases:
            for word in cases[case.name][2]:
                assert word in (case.error or ""), (label, case.name, case.error)
        errored = sum(1 for spec in cases.values() if spec[1].is_error)
        assert report.errors == errored and report.total == len(cases)
        assert report.error_rate == pytest.approx(errored / len(cases))

        # The run on disk holds every case and the full 1 MB output; the page cuts it.
        [run_dir] = list(runs.iterdir())
        stored = load_run(run_dir)
        assert {c.name: c.status for c in stored.cases} == got
        huge = next(c for c in stored.cases if c.name == "huge-output")
        assert huge.actual_response == HUGE
        lines = (run_dir / "cases.jsonl").read_text(encoding="utf-8").splitlines()
        assert len(lines) == len(cases) and all(json.loads(line) for line in lines)
        page = (run_dir / "report.html").read_text(encoding="utf-8")
        assert f"{len(HUGE) - MAX_FIELD_CHARS} more character(s) not shown" in page
        assert len(page) < len(HUGE)
