"""Hand-built runs shared by the report, viewer and compare tests, plus a headless-Chromium helper.

The sample run covers every case status and the details shapes criteria produce
(QAG questions with verdicts and judge replies, sampled judge reasonings, composite
sub-results) and carries hostile markup wherever model-controlled text can reach a page.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from chromium_support import browser_env, find_chromium

from referee.case import EvalCase, Invocation, ToolCall
from referee.execution import ExecutionResult, TurnResult
from referee.report.model import CaseResult, CaseStatus, EvalReport
from referee.result import CriterionResult
from referee.usage import TokenUsage

# Each would leave a visible trace if it ever ran: a changed title or an attribute on <body>.
SCRIPT_PAYLOAD = '</script><script>document.title="pwned-script"</script>'
IMG_PAYLOAD = "<img src=x onerror=\"document.body.setAttribute('data-pwned','img')\">"
SVG_PAYLOAD = "<svg onload=\"document.body.setAttribute('data-pwned','svg')\"></svg>"
STYLE_BREAK = "</pre></details></style><b id=\"injected\">x</b>"
PAYLOAD = SCRIPT_PAYLOAD + IMG_PAYLOAD + SVG_PAYLOAD + STYLE_BREAK + "\u2028&amp;"
RAW_HTTP_MARKER = "RAW-HTTP-BODY-MUST-NOT-SHIP"


def _qag(name: str, verdicts: list[str], threshold: float = 0.7, reason: str = "") -> CriterionResult:
    # The record shape referee.evaluators.qag writes for each question.
    questions = [
        {"question": f"Does the answer state fact {i + 1}?", "expected": "yes", "verdict": v.lower(),
         "matched": None if v == "UNKNOWN" else v == "YES",
         "raw_reply": f"{v.capitalize()}. The answer mentions it in its second sentence.", "cached": False}
        for i, v in enumerate(verdicts)
    ]
    counted = [v for v in verdicts if v != "UNKNOWN"]
    matched = sum(v == "YES" for v in counted)
    score = matched / len(counted) if counted else 0.0
    return CriterionResult(
        criterion=name, score=score, passed=score >= threshold, threshold=threshold,
        details={"reason": reason or f"{matched} of {len(counted)} question(s) answered as expected",
                 "questions": questions, "matched": matched, "answered": len(counted),
                 "unknown": len(verdicts) - len(counted), "mode": "per_question",
                 "judge_provider": "anthropic", "judge_model": "claude-haiku-4-5"},
        token_usage=TokenUsage(input_tokens=300, output_tokens=30, requests=len(verdicts)),
    )


def _contains(passed: bool) -> CriterionResult:
    return CriterionResult(criterion="contains", score=1.0 if passed else 0.0, passed=passed,
                           threshold=1.0, details={"reason": "found 'ok'" if passed else "'ok' not found"})


def sample_report(name: str = "checkout-bot", run_id: str = "20261129-120000-abc123") -> EvalReport:
    usage = TokenUsage(input_tokens=900, output_tokens=90, requests=3, cached_requests=1, cost_usd=0.0012)
    cases = [
        CaseResult(
            index=0, eval_id="refund", name="refund policy", status=CaseStatus.PASSED,
            case=EvalCase(input="What is the refund window?", expected_output="30 days",
                          context=["Refunds are accepted within 30 days."]),
            execution=ExecutionResult(actual_response="Refunds are ok within 30 days.",
                                      tool_calls=[ToolCall(name="lookup_policy", args={"topic": "refunds"},
                                                           result={"days": 30})],
                                      node_visits=["router", "policy"]),
            criterion_results=[_contains(True), _qag("faithfulness", ["YES", "YES", "YES"])],
            duration_seconds=1.5, token_usage=usage,
        ),
        CaseResult(
            index=1, eval_id="hostile", name="hostile " + PAYLOAD, status=CaseStatus.FAILED,
            case=EvalCase(input="Say hi " + PAYLOAD, expected_output="hi " + PAYLOAD,
                          metadata={"note": PAYLOAD}),
            execution=ExecutionResult(
                actual_response="Model says " + PAYLOAD,
                tool_calls=[ToolCall(name="search" + IMG_PAYLOAD, args={"q": PAYLOAD}, result=PAYLOAD)],
                node_visits=["router", SVG_PAYLOAD],
                metadata={"http_response": {"body": RAW_HTTP_MARKER}, "trace_id": "t-1"},
            ),
            criterion_results=[
                _contains(False),
                _qag("faithfulness", ["NO", "UNKNOWN", "YES"],
                     reason="1 of 3 question(s) UNKNOWN — excluded from score denominator " + PAYLOAD),
                CriterionResult(
                    criterion="custom" + SCRIPT_PAYLOAD, score=0.2, passed=False, threshold=0.5,
                    details={"reason": "judge said " + PAYLOAD, PAYLOAD: [PAYLOAD],
                             "response_body": RAW_HTTP_MARKER},
                ),
            ],
            duration_seconds=2.0, token_usage=usage,
        ),
        CaseResult(index=2, eval_id="down", name="upstream down", status=CaseStatus.MODEL_ERROR,
                   case=EvalCase(input="question 2"), error="TimeoutError: upstream 504",
                   duration_seconds=0.1),
        CaseResult(
            index=3, eval_id="judge-down", name="judge outage", status=CaseStatus.JUDGE_ERROR,
            case=EvalCase(input="question 3"),
            execution=ExecutionResult(actual_response="ok"),
            criterion_results=[
                _contains(True),
                CriterionResult(criterion="faithfulness", score=0.0, passed=False, threshold=0.7,
                                error="judge unreachable after 3 attempts (HTTP 503)", error_kind="judge"),
            ],
            error="faithfulness: judge unreachable after 3 attempts (HTTP 503)", duration_seconds=3.0,
        ),
        CaseResult(
            index=4, eval_id="broken-eval", name="broken evaluator", status=CaseStatus.EVALUATOR_ERROR,
            case=EvalCase(input="question 4"), execution=ExecutionResult(actual_response="ok"),
            criterion_results=[
                _contains(True),
                CriterionResult(criterion="faithfulness", score=0.0, passed=False, threshold=0.7,
                                error="KeyError: 'context'", error_kind="evaluator"),
            ],
            error="faithfulness: KeyError: 'context'", duration_seconds=0.2,
        ),
        CaseResult(index=5, eval_id="slow", name="slow model", status=CaseStatus.TIMEOUT,
                   case=EvalCase(input="question 5"), error="case exceeded its 30s timeout",
                   duration_seconds=30.0),
        CaseResult(
            index=6, eval_id="no-context", name="no context", status=CaseStatus.SKIPPED,
            case=EvalCase(input="question 6"), execution=ExecutionResult(actual_response="ok"),
            criterion_results=[
                CriterionResult(criterion="faithfulness", score=0.0, passed=False, threshold=0.7,
                                skipped=True, details={"reason": "requires context", "skipped": True}),
            ],
        ),
        CaseResult(
            index=7, eval_id="multi", name="two turns", status=CaseStatus.PASSED,
            case=EvalCase.multi_turn([
                Invocation(user_content="Book a table", expected_final_response="For how many?"),
                Invocation(user_content="Two", expected_final_response="Booked for two ok",
                           expected_tool_trajectory=[ToolCall(name="book", args={"people": 2})]),
            ], eval_id="multi"),
            execution=ExecutionResult(
                actual_response="Booked for two ok",
                turns=[TurnResult(user_content="Book a table", response="For how many?"),
                       TurnResult(user_content="Two", response="Booked for two ok",
                                  tool_calls=[ToolCall(name="book", args={"people": 2})],
                                  node_visits=["planner", "booking"])],
            ),
            criterion_results=[
                _contains(True),
                CriterionResult(
                    criterion="response_evaluation_score", score=0.9, passed=True, threshold=0.8,
                    details={"samples": 3, "individual_scores": [1.0, 0.8, 0.9],
                             "reasonings": ["Matches.", "Mostly matches.", "Matches; terse."],
                             "judge_model": "gemini-2.5-flash", "reason": "Matches."},
                ),
            ],
            duration_seconds=4.0,
        ),
        CaseResult(
            index=8, eval_id="composite", name="composite check", status=CaseStatus.FAILED,
            case=EvalCase(input="question 8"), execution=ExecutionResult(actual_response="nope"),
            criterion_results=[
                CriterionResult(
                    criterion="composite", score=0.5, passed=False, threshold=1.0,
                    details={"require_all": True, "reason": "1 of 2 sub-criteria passed",
                             "sub_results": [_contains(True).model_dump(mode="json"),
                                             _contains(False).model_dump(mode="json")]},
                ),
                _contains(False),
                CriterionResult(
                    criterion="tone", score=0.55, passed=False, threshold=0.6,
                    details={"reason": "Curt but polite.", "criteria": "polite tone",
                             "scores": [0.6, 0.5],
                             "runs": [{"run": 0, "score": 0.6, "reason": "Curt but polite.",
                                       "raw_reply": '{"score": 0.6, "reason": "Curt but polite."}',
                                       "cached": False},
                                      {"run": 1, "score": 0.5, "reason": "Abrupt.",
                                       "raw_reply": '{"score": 0.5, "reason": "Abrupt."}', "cached": True}],
                             "judge_provider": "openai", "judge_model": "gpt-4o-mini"},
                ),
            ],
            duration_seconds=0.3,
        ),
    ]
    return EvalReport(
        run_id=run_id, name=name, model_id="gpt-4o-mini", started_at=1_790_000_000.0,
        finished_at=1_790_000_042.0, cases=cases,
        judge={"provider": "anthropic", "model": "claude-haiku-4-5", "temperature": 0.0},
        metadata={"run_dir": ".referee/runs/" + run_id},
    )


def chromium_dom(url: str, tmp_path: Path) -> str:
    """The DOM after the page loaded and its scripts and error handlers had time to run."""
    profile = tmp_path / "chromium-profile"
    profile.mkdir(exist_ok=True)
    proc = subprocess.run(
        [find_chromium(), "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", "--disable-extensions", f"--user-data-dir={profile}",
         "--virtual-time-budget=3000", "--dump-dom", url],
        capture_output=True, text=True, timeout=90, env=browser_env(tmp_path),
    )
    assert proc.returncode == 0, f"chromium failed ({proc.returncode}): {proc.stderr[-2000:]}"
    assert "<body" in proc.stdout, f"chromium dumped no DOM: {proc.stderr[-2000:]}"
    return proc.stdout


def test_sample_report_covers_every_status() -> None:
    report = sample_report()
    assert {c.status for c in report.cases} == set(CaseStatus)
    assert report.errors_by_kind == {"evaluator_error": 1, "judge_error": 1, "model_error": 1, "timeout": 1}
