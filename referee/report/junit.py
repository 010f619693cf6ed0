"""JUnit XML: one <testcase> per case x criterion, so CI shows exactly which check broke.

A criterion that failed is a <failure>; one that could not be scored (judge outage, broken
evaluator, or a case whose model call errored or timed out) is an <error>; a skipped one is
<skipped>. A case that never reached its criteria (MODEL_ERROR, TIMEOUT) gets one <error>
per criterion the run knows about that it did not reach, so an outage cannot shrink the test
count.
"""

from __future__ import annotations

import re
import time
import xml.etree.ElementTree as ET
from typing import Any

from referee.record import CaseResult, CaseStatus, EvalReport, criterion_status, format_rate
from referee.result import CriterionResult

# XML 1.0 forbids most control characters; a model output containing one must not make the
# whole file unparseable.
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
MAX_BODY_CHARS = 4000


def _clean(text: Any) -> str:
    return _INVALID_XML.sub("\ufffd", str(text))


def _clip(text: str, limit: int = MAX_BODY_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n… ({len(text) - limit} more characters)"


def _outcome(case: CaseResult, r: CriterionResult | None) -> tuple[str, str, str, str]:
    """(element, type, message, body); element is '', 'failure', 'error' or 'skipped'."""
    if r is None:
        if case.status == CaseStatus.SKIPPED:
            return "skipped", "", case.error or "case skipped", ""
        status = case.status.value
        return "error", status, f"{status}: {case.error or 'criterion did not run'}", ""
    if case.status in (CaseStatus.MODEL_ERROR, CaseStatus.TIMEOUT):
        # Whatever the criterion produced, it judged an output that never properly existed.
        status = case.status.value
        return "error", status, f"{status}: {case.error or 'no output'}", ""
    if r.skipped:
        return "skipped", "", r.details.get("reason") or "skipped", ""  # not multivon's mark
    body = f"score {r.score:.4f}, threshold {r.threshold:.4f}"
    if r.is_error:
        kind = criterion_status(r).value
        return "error", kind, f"{kind}: {r.error or r.reason or 'criterion could not be scored'}", body
    if not r.passed:
        output = case.actual_response
        if output:
            body += "\n\noutput:\n" + _clip(output)
        message = r.reason or f"score {r.score:.4f} below threshold {r.threshold:.4f}"
        return "failure", CaseStatus.FAILED.value, message, body
    return "", "", "", ""


def render_junit(report: EvalReport, *, suites_name: str = "referee") -> str:
    """The run as JUnit XML; ``suites_name`` names the outer ``<testsuites>`` element."""
    suite_name = report.name or report.eval_set_id or report.run_id
    known = list(report.summary.criterion_stats)
    suite = ET.Element("testsuite", name=_clean(suite_name))
    # The JUnit schema allows one <properties> per testsuite, before its testcases.
    properties = ET.SubElement(suite, "properties")
    if report.model_id:
        ET.SubElement(properties, "property", name="model_id", value=_clean(report.model_id))
    counts = {"tests": 0, "failure": 0, "error": 0, "skipped": 0}
    total_time = 0.0
    for case in report.cases:
        # Criterion results carry unique labels (CaseResult), so each is its own test.
        labels = [r.criterion for r in case.criterion_results]
        entries: list[tuple[str, CriterionResult | None]] = list(zip(labels, case.criterion_results))
        if case.status.is_error or case.status == CaseStatus.SKIPPED:
            # The criteria that never ran still count, so the case fails visibly in CI.
            entries += [(n, None) for n in known if n not in labels]
        outcomes = [(label, _outcome(case, r)) for label, r in entries]
        if case.status == CaseStatus.FAILED and not any(o[0] == "failure" for _, o in outcomes):
            # A failing case is never green in CI, whatever its criterion results say.
            outcomes.append(("(case)", ("failure", CaseStatus.FAILED.value,
                                        case.error or "case failed", "")))
        if not outcomes:
            outcomes = [("(case)", _outcome(case, None))]
        per_test_time = case.duration_seconds / len(outcomes)
        total_time += case.duration_seconds
        for name, (kind, err_type, message, body) in outcomes:
            tc = ET.SubElement(suite, "testcase", classname=_clean(f"{suite_name}/{case.label}"),
                               name=_clean(name), time=f"{per_test_time:.3f}")
            counts["tests"] += 1
            if kind:
                counts[kind] += 1
                child = ET.SubElement(tc, kind, message=_clean(message))
                if err_type:
                    child.set("type", err_type)
                if body:
                    child.text = _clean(body)
    # The run's own numbers, for CI tools that show suite properties; "n/a" when nothing was
    # evaluated, never a pass rate of 0.
    for key, value in (("pass_rate", format_rate(report.pass_rate, report.evaluated)),
                       ("evaluated", str(report.evaluated)),
                       ("error_rate", format_rate(report.error_rate, report.total)),
                       ("criterion_errors", str(report.criterion_errors))):
        ET.SubElement(properties, "property", name=key, value=value)
    # The judge's spend and the model under test's, each on its own line.
    for key, usage in (("judge_spend", report.token_usage),
                       ("model_under_test_spend", report.model_token_usage)):
        if usage is not None:
            ET.SubElement(properties, "property", name=key, value=_clean(usage.describe()))
    suite.set("tests", str(counts["tests"]))
    suite.set("failures", str(counts["failure"]))
    suite.set("errors", str(counts["error"]))
    suite.set("skipped", str(counts["skipped"]))
    suite.set("time", f"{total_time:.3f}")
    suite.set("timestamp", time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(report.started_at)))
    suite.set("id", _clean(report.run_id))
    root = ET.Element("testsuites", name=_clean(suites_name), tests=suite.get("tests", "0"),
                      failures=suite.get("failures", "0"), errors=suite.get("errors", "0"),
                      skipped=suite.get("skipped", "0"), time=suite.get("time", "0"))
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
