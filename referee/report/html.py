"""The HTML report: one self-contained file, safe to open whatever the model under test said.

Safety rests on two independent layers. Every value reaches the page through Jinja2 with
autoescaping on, so model output, case names, judge replies and details render as text.
And the page carries a Content-Security-Policy that only allows the report's own inline
script and style (by SHA-256 hash) and forbids every fetch, so even markup that slipped
through escaping could neither run a script nor phone home.

The data lives once, as HTML: cases are server-rendered <details> elements and the script
only filters and searches them, so a large run does not ship its results twice.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, StrictUndefined

from referee.case import flattened
from referee.content._gallery import Gallery
from referee.content._thumbs import without_bytes
from referee.messages import NOT_RECORDED
from referee.record import (
    CaseResult,
    CaseStatus,
    EvalReport,
    criterion_errors_line,
    describe_member_usage,
    format_rate,
)
from referee.redact import redacted_head
from referee.report import charts
from referee.report.compare_stats import ALPHA
from referee.report.console import (
    flaky_lines,
    judge_consistency_line,
    judge_label,
    repeated_runs_line,
    sequential_line,
)
from referee.report.diff import align_calls, align_nodes, word_diff
from referee.report.json_report import strip_raw_http
from referee.report.label_estimates import label_estimates_view
from referee.result import CriterionResult

if TYPE_CHECKING:
    from referee.report.compare import Comparison
    from referee.store import RunInfo

ERROR_RATE_FLAG = 0.10
# Past this many cases the case details ship gzip-compressed, BODY_CHUNK cases per block, and
# the page inflates a block when one of its cases is opened or searched: a 2,000-case report
# stays a few MB and opens at once, because the browser lays out only the summary rows.
COMPRESS_CASES_OVER = 200
BODY_CHUNK = 100
# The case table and list of such a run show this many matching cases at a time ("show more"
# adds as many again): laying out thousands of table rows at once is what makes a page slow.
PAGE_ROWS = 200
# A single field larger than this (a runaway 1 MB output) is cut, and the cut is stated.
MAX_FIELD_CHARS = 100_000

_QUESTION_KEYS = ("question", "text", "q")
_VERDICT_KEYS = ("verdict", "answer", "result", "passed")
_REPLY_KEYS = ("reply", "raw_reply", "judge_reply", "raw", "response", "raw_response",
               "replies", "raw_replies", "reasoning", "reasonings")
_PARALLEL_VERDICTS = ("verdicts",)
_PARALLEL_REPLIES = ("replies", "raw_replies", "judge_replies")
# details keys rendered by dedicated sections; the rest is shown as JSON.
_SHOWN_KEYS = {"reason", "questions", "reasonings", "individual_scores", "sub_results", "skipped"}


@lru_cache(maxsize=1)
def _env() -> Environment:
    return Environment(
        loader=PackageLoader("referee.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


@cache
def _asset(name: str) -> str:
    return resources.files("referee.report").joinpath(f"templates/{name}").read_text(encoding="utf-8")


def _sha256_source(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def content_security_policy(script: str | None, *, forms: bool = False,
                            connect: bool = False) -> str:
    """Allow exactly our inline style and script; no network, no plugins, no base rewriting."""
    css = _asset("report.css")
    parts = [
        "default-src 'none'",
        f"style-src {_sha256_source(css)}",
        f"script-src {_sha256_source(script)}" if script else "script-src 'none'",
        "img-src data:",  # the case thumbnails, inline (content/_gallery.py); nothing fetched
        "object-src 'none'",
        "base-uri 'none'",
        "form-action " + ("'self'" if forms else "'none'"),
    ]
    if connect:  # the viewer's labelling page saves labels back to its own server
        parts.append("connect-src 'self'")
    return "; ".join(parts)


def _page(template: str, *, script: str | None = None, forms: bool = False,
          connect: bool = False, **context: Any) -> str:
    return _env().get_template(template).render(
        csp=content_security_policy(script, forms=forms, connect=connect), css=_asset("report.css"),
        script=script, **context,
    )


# Formatting ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Clipped:
    text: str
    clipped: int


def _clip(value: Any) -> Clipped | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else _json(value)
    if text == "":
        return None
    return Clipped(*redacted_head(text, MAX_FIELD_CHARS))


def _cut(text: str) -> str:
    shown, left_out = redacted_head(text, MAX_FIELD_CHARS)
    return shown + f"\n… {left_out} more character(s) not shown" if left_out else shown


def _json(value: Any) -> str:
    return _cut(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def _when(ts: float | None) -> str:
    if not ts:
        return "—"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))


def _group(status: CaseStatus) -> str:
    if status.is_error:
        return "error"
    return status.value.lower()


# View models -----------------------------------------------------------------------------

def _verdict_class(verdict: Any) -> str:
    text = str(verdict).strip().lower()
    if text in ("yes", "true", "pass", "passed", "1"):
        return "yes"
    if text in ("no", "false", "fail", "failed", "0"):
        return "no"
    return "unknown"


def _as_replies(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, list):
        return [_cut(v) if isinstance(v, str) else _json(v) for v in value]
    return [_cut(value) if isinstance(value, str) else _json(value)]


def _first(item: dict[str, Any], keys: Iterable[str]) -> tuple[str | None, Any]:
    for key in keys:
        if key in item:
            return key, item[key]
    return None, None


def _questions(details: dict[str, Any]) -> tuple[list[dict[str, Any]], set[str]]:
    """Per-question rows from details["questions"], whatever shape an evaluator chose."""
    raw = details.get("questions")
    if not isinstance(raw, list) or not raw:
        return [], set()
    used = {"questions"}
    verdicts: list[Any] = []
    replies: list[Any] = []
    # Some evaluators keep verdicts and replies in lists parallel to a list of question strings.
    for key in _PARALLEL_VERDICTS:
        if isinstance(details.get(key), list) and len(details[key]) == len(raw):
            verdicts = details[key]
            used.add(key)
    for key in _PARALLEL_REPLIES:
        if isinstance(details.get(key), list) and len(details[key]) == len(raw):
            replies = details[key]
            used.add(key)
    rows = []
    for i, item in enumerate(raw):
        if isinstance(item, dict):
            qk, question = _first(item, _QUESTION_KEYS)
            vk, verdict = _first(item, _VERDICT_KEYS)
            reply_keys = [k for k in _REPLY_KEYS if k in item]
            reply_list = [r for k in reply_keys for r in _as_replies(item[k])]
            expected_answer = item.get("expected")
            matched = item.get("matched")
            # "cached" is a flag, shown as a word when true: a box of {"cached": false} on
            # every row said nothing.
            judges = _panel_votes(item)
            if judges:  # a judge panel: each member's reply, named, and its vote by the verdict
                reply_list = [f"{name}: {_cut(str(reply))}" for name, reply
                              in (item.get("judge_replies") or {}).items() if reply]
            extra = {k: v for k, v in item.items()
                     if k not in {qk, vk, "expected", "matched", "cached", *reply_keys,
                                  *(_PANEL_KEYS if judges else ())}}
        else:
            question, verdict, reply_list, extra, judges = item, None, [], {}, ""
            expected_answer = matched = None
        if verdict is None and verdicts:
            verdict = verdicts[i]
        if not reply_list and replies:
            reply_list = _as_replies(replies[i])
        if isinstance(item, dict) and "matched" in item:
            # The evaluator says which answer it wanted, so colour by agreement: a "no" can be good.
            verdict_class = "unknown" if matched is None else "yes" if matched else "no"
        else:
            verdict_class = _verdict_class(verdict)
        rows.append({
            "question": _cut(question) if isinstance(question, str) else _json(question),
            "expected": "—" if expected_answer is None else str(expected_answer),
            "verdict": "—" if verdict is None else str(verdict),
            "verdict_class": verdict_class,
            "replies": reply_list,
            "extra": _json(extra) if extra else "",
            "cached": isinstance(item, dict) and item.get("cached") is True,
            "judges": judges,
        })
    return rows, used


_PANEL_KEYS = ("judges", "judge_replies", "judges_answered")


def _panel_votes(item: dict[str, Any]) -> str:
    """A panel's votes on one question, one line: "a: yes, b: no, c: no answer (2 answered)"."""
    judges = item.get("judges")
    if not isinstance(judges, dict) or not judges:
        return ""
    votes = ", ".join(f"{name}: {vote or 'no answer'}" for name, vote in judges.items())
    answered = item.get("judges_answered")
    return f"{votes} ({answered} answered)" if isinstance(answered, int) else votes


def _samples(details: dict[str, Any]) -> list[dict[str, Any]]:
    """Repeated judge runs: an AgentEvaluator-style criterion's sample list, or a list of run
    records (GEval)."""
    runs = details.get("runs")
    if isinstance(runs, list) and runs and all(isinstance(r, dict) and "score" in r for r in runs):
        return [{
            "score": f"{r['score']:.3f}" if isinstance(r["score"], (int, float)) else "no score",
            "reasoning": _cut(str(r.get("reason") or r.get("reasoning") or "")),
            "reply": _cut(str(r.get("raw_reply") or r.get("reply") or "")),
        } for r in runs]
    reasonings = details.get("reasonings")
    scores = details.get("individual_scores")
    reasonings = reasonings if isinstance(reasonings, list) else []
    scores = scores if isinstance(scores, list) else []
    rows = []
    for i in range(max(len(reasonings), len(scores))):
        score = scores[i] if i < len(scores) else None
        reasoning = reasonings[i] if i < len(reasonings) else ""
        rows.append({
            "score": f"{score:.3f}" if isinstance(score, (int, float)) else ("—" if score is None else str(score)),
            "reasoning": _cut(reasoning) if isinstance(reasoning, str) else _json(reasoning),
            "reply": "",
        })
    return rows


def _outcome(r: CriterionResult) -> str:
    if r.skipped:
        return "skipped"
    if r.is_error:
        return "error"
    return "passed" if r.passed else "failed"


def _criterion_view(r: CriterionResult) -> dict[str, Any]:
    details = strip_raw_http(r.details) if isinstance(r.details, dict) else {}
    questions, used = _questions(details)
    samples = _samples(details)
    subs = []
    for sub in details.get("sub_results") or []:
        try:
            subs.append(_criterion_view(CriterionResult.model_validate(sub)))
        except Exception:  # a serialised sub-result of unknown shape is still shown, as JSON
            subs.append({"name": "sub-result", "outcome": "skipped", "score": None, "threshold": 0.0,
                         "reason": "", "error": None, "questions": [], "samples": [], "batch_reply": "",
                         "sub_results": [], "other": _json(sub)})
    hidden = _SHOWN_KEYS | used
    if samples and isinstance(details.get("runs"), list):
        hidden |= {"runs", "scores"}
    elif not samples:
        hidden -= {"reasonings", "individual_scores"}
    batch_reply = details.get("batch_reply")
    if isinstance(batch_reply, str):
        hidden.add("batch_reply")
    if not subs:
        hidden.discard("sub_results")
    other = {k: v for k, v in details.items() if k not in hidden}
    return {
        "name": r.criterion,
        "outcome": _outcome(r),
        "score": None if r.skipped else r.score,
        "threshold": r.threshold,
        "reason": _cut(str(r.details.get("reason") or r.error or "")),  # the error once, unmarked
        "error": _cut(r.error) if r.error else r.error,
        "questions": questions,
        "samples": samples,
        "batch_reply": _cut(batch_reply) if isinstance(batch_reply, str) else "",
        "sub_results": subs,
        "other": _json(other) if other else "",
    }


def _diff(expected: str | None, actual: str | None) -> list[dict[str, str]] | None:
    """Word-level diff of expected against actual, when both exist and differ."""
    if not expected or actual is None or expected == actual:
        return None
    pieces = word_diff(expected, actual)
    return None if pieces is None else [{"op": p.op, "text": p.text} for p in pieces]


def _trajectory(expected: Iterable[Any], actual: Iterable[Any],
                include_nested: bool = False) -> list[dict[str, Any]]:
    """Expected calls aligned with actual ones. An actual agent used as a tool is followed by
    its inner run (outcome ``nested``, not aligned), unless the trajectory criterion read the
    inner calls (``include_nested``): then they are aligned like the others."""
    expected, actual = list(expected), list(actual)
    if include_nested:
        actual = flattened(actual)
    if not expected:
        return []
    rows: list[dict[str, Any]] = []
    made = iter(actual)  # the alignment keeps the actual calls in order
    for row in align_calls(expected, actual):
        rows.append({"outcome": row.outcome, "expected_name": row.expected_name or "",
                     "expected_args": row.expected_args or "",
                     "actual_name": row.actual_name or "", "actual_args": row.actual_args or "",
                     "differing": ", ".join(row.differing_keys)})
        if row.actual_name is not None:
            call = next(made)
            if not include_nested:
                rows.extend({**inner, "outcome": "nested"} for inner in _inner_run(call, "", 1))
    return rows


def _reads_nested_calls(case: CaseResult) -> bool:
    return any(r.criterion == "tool_trajectory_avg_score" and r.details.get("include_nested")
               for r in case.criterion_results)


def _nodes(expected: list[str], actual: list[str]) -> list[dict[str, str]]:
    if not expected:
        return []
    return [{"outcome": row.outcome, "expected": row.expected or "", "actual": row.actual or ""}
            for row in align_nodes(expected, actual)]


def _calls(calls: Iterable[Any], prefix: str = "", depth: int = 0) -> list[dict[str, Any]]:
    """Table rows of tool calls, numbered 1, 2, ...; an agent used as a tool is followed by its
    inner run (its agents, then its calls numbered 1.1, 1.2, ...), one ``depth`` further in."""
    rows: list[dict[str, Any]] = []
    for number, c in enumerate(calls, 1):
        rows.append({"number": f"{prefix}{number}", "depth": depth, "agent": "", "name": c.name,
                     "args": _json(c.args) if c.args else NOT_RECORDED if c.args is None else "{}",
                     "result": "" if c.result is None else (_cut(c.result) if isinstance(c.result, str) else _json(c.result))})
        rows.extend(_inner_run(c, f"{prefix}{number}.", depth + 1))
    return rows


def _inner_run(call: Any, prefix: str, depth: int) -> list[dict[str, Any]]:
    """The rows of what an agent used as a tool did (none for any other call)."""
    visits = getattr(call, "nested_node_visits", None) or []
    rows = [{"number": "", "depth": depth, "agent": " → ".join(visits), "name": "", "args": "",
             "result": ""}] if visits else []
    return rows + _calls(getattr(call, "nested_calls", None) or [], prefix, depth)


def _criterion_cells(case: CaseResult, criteria: list[str]) -> list[dict[str, Any]]:
    """One table cell per run criterion: its outcome, score and a sort key (-1 when not scored)."""
    by_name = {r.criterion: r for r in case.criterion_results}
    cells = []
    for name in criteria:
        r = by_name.get(name)
        if r is None:
            cells.append({"outcome": "none", "text": "", "sort": -2})
            continue
        outcome = _outcome(r)
        scored = outcome in ("passed", "failed")
        cells.append({"outcome": outcome,
                      "text": f"{r.score:.2f} {'✓' if r.passed else '✗'}" if scored else outcome,
                      "sort": round(r.score, 6) if scored else -1})
    return cells


def _case_view(case: CaseResult, criteria: list[str] | None = None) -> dict[str, Any]:
    spec = case.case
    ex = case.execution
    turns: list[dict[str, Any]] = []
    nested = _reads_nested_calls(case)
    if spec is not None and len(spec.conversation) > 1:
        actual_turns = ex.turns if ex is not None else []
        for i, inv in enumerate(spec.conversation):
            got = actual_turns[i] if i < len(actual_turns) else None
            turns.append({
                "user": _clip(inv.user_text),
                "expected": _clip(inv.expected_final_response),
                "response": _clip(got.response) if got else None,
                "diff": _diff(inv.expected_final_response, got.response if got else None),
                "tool_calls": _calls(got.tool_calls) if got else [],
                "trajectory": _trajectory(inv.expected_tool_trajectory,
                                          got.tool_calls if got else [], nested),
                "nodes": _nodes(list(inv.expected_node_order), list(got.node_visits) if got else []),
                "node_visits": " → ".join(got.node_visits) if got else "",
            })
    model_seconds = ex.latency_s if ex is not None else None
    facts = [f"#{case.index}", f"case {case.duration_seconds:.2f}s"]
    if model_seconds is not None:
        facts.append(f"model {model_seconds:.3f}s")
    if case.scoring_seconds is not None:
        facts.append(f"scoring {case.scoring_seconds:.3f}s")
    usage = case.token_usage
    if usage is not None and (usage.requests or usage.total_tokens):
        facts.append(f"judge: {usage.requests} request(s), {usage.total_tokens} tokens")
    if spec is not None and spec.tags:
        facts.append("tags: " + ", ".join(spec.tags))
    extra: dict[str, Any] = {}
    if case.metadata:
        extra["case result"] = strip_raw_http(case.metadata)
    if spec is not None and spec.metadata:
        extra["case"] = strip_raw_http(spec.metadata)
    if ex is not None and ex.metadata:
        extra["execution"] = strip_raw_http(ex.metadata)
    extra = without_bytes(extra)  # images and PDFs show as thumbnails, not as base64
    error = case.error or (ex.error if ex is not None else None)
    return {
        "status": case.status.value,
        "group": _group(case.status),
        "name": case.label,
        "name_short": case.label if len(case.label) <= 90 else case.label[:89] + "…",
        "eval_id": case.eval_id,
        "error": _cut(error) if error else None,
        "error_short": (error or "")[:160],
        "traceback": _cut(case.traceback) if case.traceback else None,
        "turns": turns,
        "input": _clip(spec.input_text) if spec is not None else None,
        "context": _clip(spec.context_text) if spec is not None else None,
        "expected": _clip(spec.expected_output) if spec is not None else None,
        "output": _clip(ex.actual_response) if ex is not None else None,
        # An agent that reported no per-turn results still has a final answer to show.
        "final_output": _clip(ex.actual_response) if turns and ex is not None and not ex.turns else None,
        "diff": None if turns or spec is None or ex is None else _diff(spec.expected_output,
                                                                       ex.actual_response),
        "trajectory": [] if turns or spec is None else _trajectory(
            spec.expected_tool_trajectory, ex.tool_calls if ex is not None else [], nested),
        "nodes": [] if turns or spec is None else _nodes(
            list(spec.expected_node_order), list(ex.node_visits) if ex is not None else []),
        "tool_calls": _calls(ex.tool_calls) if ex is not None and not turns else [],
        "expected_tools": _calls(spec.expected_tool_trajectory) if spec is not None else [],
        "node_visits": " → ".join(ex.node_visits) if ex is not None else "",
        "expected_nodes": " → ".join(spec.expected_node_order) if spec is not None else "",
        "criteria": [_criterion_view(r) for r in case.criterion_results],
        "extra": _json(extra) if extra else "",
        "facts": " · ".join(facts),
        "index": case.index,
        "model_seconds": model_seconds,
        "scoring_seconds": case.scoring_seconds,
        "tokens": usage.total_tokens if usage is not None else 0,
        "cost": usage.cost_usd if usage is not None and usage.cost_usd is not None else None,
        "chunk": None,
        "cells": (cells := _criterion_cells(case, criteria or [])),
        "outcomes": [cell["outcome"] for cell in cells],
    }


def _charts(report: EvalReport) -> list[charts.Chart]:
    """Outcome bars per criterion, a score histogram per criterion, latency and judge tokens."""
    stats = report.summary.criterion_stats
    out: list[charts.Chart] = []
    if stats:
        out.append(charts.outcome_bars([
            charts.OutcomeCounts(name, s.passed, s.failed, s.errors, s.skipped)
            for name, s in stats.items()]))
    scores: dict[str, list[float]] = {name: [] for name in stats}
    durations: list[float] = []
    tokens: list[int] = []
    for case in report.cases:  # one pass: a stored run's cases are read from disk
        durations.append(case.duration_seconds)
        if case.token_usage is not None:
            tokens.append(case.token_usage.total_tokens)
        for r in case.criterion_results:
            if _outcome(r) in ("passed", "failed"):
                scores.setdefault(r.criterion, []).append(r.score)
    for name, values in scores.items():
        if values:
            chart = charts.histogram(values, kind="scores", title=f"{name}: scores",
                                     low=0.0, high=1.0)
            chart.data["criterion"] = name
            out.append(chart)
    if durations:
        out.append(charts.histogram(durations, kind="latency",
                                    title="Case duration (s)", low=0.0))
    if any(tokens):
        out.append(charts.histogram(tokens, kind="tokens", title="Judge tokens per case", low=0.0))
    return out


def resume_command(report: EvalReport) -> str:
    """The command that finishes an interrupted run, when the run says where it lives."""
    run_dir = report.run_dir
    if not run_dir:
        return ""
    target = report.metadata.get("target")
    if not target:  # started from Python: the same call with resume=
        return f"resume={str(run_dir)!r} in the run call, or referee run EVAL_FILE --resume {run_dir}"
    return f"referee run {target} --resume {run_dir}"


def _timing(summary: Any) -> str:
    """The mean model latency and scoring time per case, apart ("" for runs stored before)."""
    parts = [f"{label} {seconds:.3f}s" for label, seconds in (
        ("model latency", summary.avg_model_latency_seconds),
        ("scoring", summary.avg_scoring_seconds)) if seconds is not None]
    return "mean per case: " + ", ".join(parts) if parts else ""


def _summary_view(report: EvalReport) -> dict[str, Any]:
    by_status = report.status_counts
    counts = [(s.value, by_status[s]) for s in CaseStatus]
    usage = report.token_usage
    usage_text = ""
    if usage.requests or usage.cached_requests or usage.total_tokens:
        usage_text = f"judge spend: {usage.describe()}"
    if report.summary.judge_member_token_usage:
        usage_text += ("; by panel member: "
                       + describe_member_usage(report.summary.judge_member_token_usage))
    model_usage = report.model_token_usage
    if model_usage is not None:
        usage_text += ("; " if usage_text else "") + f"model under test spend: {model_usage.describe()}"
    stats = report.summary.criterion_stats
    groups: dict[str, int] = {}
    for status, n in by_status.items():
        if n:
            groups[_group(status)] = groups.get(_group(status), 0) + n
    return {
        "title": report.name or report.eval_set_id or report.run_id,
        "run_id": report.run_id,
        "model_id": report.model_id,
        "judge": judge_label(report.judge),
        "started": _when(report.started_at),
        "duration": f"{report.duration_seconds:.1f}s" if report.finished_at else "unfinished",
        "timing": _timing(report.summary),
        "usage": usage_text,
        "interrupted": bool(report.metadata.get("interrupted")),
        "sequential": sequential_line(report),
        "warnings": report.warnings,
        "running": bool(report.metadata.get("running")),
        "resume_command": resume_command(report) if report.metadata.get("interrupted")
        and not report.metadata.get("running") else "",
        "charts": _charts(report),
        "criteria": list(stats),
        "expected_cases": report.metadata.get("expected_cases", "?"),
        "total": report.total,
        "evaluated": report.evaluated,
        "passed": report.passed,
        "errors": report.errors,
        "pass_rate": format_rate(report.pass_rate, report.evaluated),
        "error_rate": format_rate(report.error_rate, report.total),
        "criterion_errors": criterion_errors_line(report) if report.criterion_errors else "",
        "repeated_runs": repeated_runs_line(report) if report.runs_per_case > 1 else "",
        "flaky": flaky_lines(report) if report.runs_per_case > 1 else [],
        "judge_consistency": judge_consistency_line(report),
        "flagged": report.total > 0 and report.error_rate >= ERROR_RATE_FLAG,
        "errors_by_kind": ", ".join(f"{k}={n}" for k, n in report.errors_by_kind.items()),
        "counts": [(name, n) for name, n in counts if n],
        "groups": [(g, groups[g]) for g in ("passed", "failed", "error", "skipped") if g in groups],
        "evaluators": [
            {"name": name, "passed": s.passed, "failed": s.failed, "errors": s.errors,
             "skipped": s.skipped, "scored": s.scored, "pass_rate": format_rate(s.pass_rate, s.scored),
             "avg_score": f"{s.avg_score:.3f}" if s.scored else "n/a"}
            for name, s in stats.items()
        ],
        "corrected": _corrected_view(report),
        "by_labels": label_estimates_view(report),
    }


def _corrected_view(report: EvalReport) -> dict[str, Any] | None:
    """Pass rates corrected for judge error, when some judged criterion's calibration entry
    was found; the statistics are the record's (record/_correction.py)."""
    if not report.calibration_found:
        return None
    rates = report.corrected_pass_rates()
    rows = []
    for label, record in report.judge_calibration.items():
        rate = rates.get(label)
        supported = rate is not None and rate.supported
        shown = rate if supported else None
        rows.append({
            "name": label, "judge": record.judge,
            "raw": f"{rate.observed:.1%} ({rate.passed}/{rate.scored})" if rate else "",
            "corrected": f"{shown.value:.1%}" if shown else "n/a",
            "interval": f"{shown.low:.1%} – {shown.high:.1%}" if shown else "",
            "value": shown.value if shown else "", "low": shown.low if shown else "",
            "high": shown.high if shown else "",
            "calibration": (f"TPR {record.tpr:.2f} of {record.positives}, TNR {record.tnr:.2f} "
                            f"of {record.negatives}, κ {record.kappa:.2f}; {record.date}, "
                            f"{record.agreement_source}"
                            if rate is not None and record.kappa is not None else ""),
            "note": rate.reason if rate is not None else (record.reason or "nothing was scored"),
            "drift": f"Judge drift: {record.drift}" if record.drift else "",
        })
    note = report.corrected_run_note()
    return {"rows": rows, "run_note": note[:1].upper() + note[1:] + "." if note else ""}


# Pages -----------------------------------------------------------------------------------

# A page holds every case up to HTML_ALL_CASES_UP_TO; a larger run's page holds the summary of
# every case and HTML_SAMPLE_CASES of them: every failure and error first (up to half the
# sample, in case order), then an evenly spaced sample of the others. The page says so; the
# full record stays in cases.jsonl (`referee view`, the JSON report).
HTML_ALL_CASES_UP_TO = 20_000
HTML_SAMPLE_CASES = 5_000


def _shown_cases(report: EvalReport) -> tuple[list[CaseResult], str]:
    total = report.total
    if total <= HTML_ALL_CASES_UP_TO:
        return list(report.cases), ""
    ok = (CaseStatus.PASSED, CaseStatus.SKIPPED)
    problems = total - report.passed - report.skipped
    problem_slots = min(problems, HTML_SAMPLE_CASES // 2)
    stride = max(1, -(-(total - problems) // (HTML_SAMPLE_CASES - problem_slots)))
    shown: list[CaseResult] = []
    taken_problems = seen_ok = 0
    for case in report.cases:
        if case.status not in ok:
            if taken_problems < problem_slots:
                shown.append(case)
                taken_problems += 1
        else:
            if seen_ok % stride == 0:
                shown.append(case)
            seen_ok += 1
    note = (f"This run has {total:,} cases; the page shows {len(shown):,} of them: "
            f"the first {taken_problems:,} of its {problems:,} failures and errors, and every "
            f"{stride:,}th other case. The counts above cover every case; every case is in "
            f"the run's cases.jsonl (referee view, or the JSON report).")
    return shown, note


def _scorings_view(report: EvalReport, run_key: str | None) -> list[dict[str, Any]]:
    """The run's scorings (``versions``), each linked in the viewer (``run_key``: the run's URL
    name); empty for a run scored once."""
    versions = [n for n in report.metadata.get("versions") or () if isinstance(n, int)]
    if len(versions) < 2:
        return []
    this = report.metadata.get("version")
    return [{"n": n, "current": n == this,
             "href": None if run_key is None or n == this else
             f"/run/{quote(run_key)}" + ("" if n == versions[-1] else f"@{n}")}
            for n in versions]


def render_html(report: EvalReport, *, index_href: str | None = None,
                run_key: str | None = None, label_href: str | None = None) -> str:
    """The report as one HTML file: no external resources, every value escaped."""
    summary = _summary_view(report)
    summary["scorings"] = _scorings_view(report, run_key)
    shown, sample_note = _shown_cases(report)
    cases = [_case_view(c, summary["criteria"]) for c in shown]
    media = Gallery(report.metadata.get("run_dir"), blob_href=(
        (lambda sha256: f"/run/{quote(run_key)}/blob/{sha256}") if run_key else None))
    for view, case in zip(cases, shown):
        view["media"] = media.of_case(case.case, case.execution)
    chunks = _compressed_bodies(cases) if len(cases) > COMPRESS_CASES_OVER else []
    from referee.labels._queue import nothing_to_label

    # A run no judge scored says so where the queue would be, and links to no labelling page.
    why_not = nothing_to_label(report)
    if why_not is not None:
        label_href = None
    labelling = None
    if label_href is None and why_not is None:  # a file on its own: it labels into the browser
        from referee.labels._review import report_labelling

        labelling = report_labelling(report, shown, max_field_chars=MAX_FIELD_CHARS)
        # Packed as the case details are: the queue names every judged result of the run.
        page_data = {key: labelling[key] for key in ("queue", "rows", "blobs") if key in labelling}
        labelling["data"] = _page_data(page_data, packed=bool(chunks))
        labelling["packed"] = bool(chunks)
    return _page(
        "report.html.j2", script=_asset("report.js") + "\n" + _asset("labels.js"), r=summary,
        cases=cases, chunks=chunks, sample_note=sample_note,
        page_rows=PAGE_ROWS if chunks else 0, index_href=index_href, label_href=label_href,
        labelling=labelling if labelling and labelling["queue"] else None,
        nothing_to_label=why_not,
    )


def _compressed_bodies(cases: list[dict[str, Any]]) -> list[str]:
    """Render each case's details once, escaped as always, and pack them as base64 gzip blocks.

    The page inserts a block's markup only after inflating it: it is the same autoescaped
    markup that a small report carries inline, under the same Content-Security-Policy.
    """
    case_body = _env().get_template("macros.html.j2").module.case_body  # type: ignore[attr-defined]
    chunks = []
    for start in range(0, len(cases), BODY_CHUNK):
        part = cases[start:start + BODY_CHUNK]
        chunks.append(_packed("".join(str(case_body(c)) for c in part)))
        for c in part:
            c["chunk"] = start // BODY_CHUNK
    return chunks


def _page_data(data: Any, *, packed: bool = False) -> str:
    """``data`` as the text of a <script type="application/json">: "<" escaped, so that no
    value can close the element; or gzip-packed (base64 has no "<")."""
    text = json.dumps(data, ensure_ascii=False)
    return _packed(text) if packed else text.replace("<", "\\u003c")


def _packed(text: str) -> str:
    """``text`` gzip-compressed and base64-encoded, as the page inflates it."""
    return base64.b64encode(gzip.compress(text.encode("utf-8"), mtime=0)).decode("ascii")


def render_labelling_html(*, run_name: str, scoring: int, labeller: str, token: str,
                          post_href: str, run_href: str, items: list[dict[str, Any]],
                          nothing_to_label: str | None = None) -> str:
    """The viewer's labelling page: the review queue (labels.js builds a section per
    criterion result), with the per-session token its script sends back with every label;
    ``nothing_to_label``: why a run no judge scored has no queue, said in its place."""
    for item in items:
        item["fields"] = [(name, clipped.text) for name, value in item.get("fields", [])
                          if (clipped := _clip(value)) is not None]
    return _page("labels.html.j2", script=_asset("labels.js"), connect=True, run_name=run_name,
                 scoring=scoring, labeller=labeller, token=token, post_href=post_href,
                 run_href=run_href, count=len(items), data=_page_data({"queue": items}),
                 labelled=sum(1 for item in items if item.get("label")),
                 nothing_to_label=nothing_to_label)


def render_index_html(runs: list[RunInfo], *, runs_dir: str, keys: list[str],
                      serves: list[dict[str, Any]] | None = None) -> str:
    """The viewer's run index; ``keys`` are the URL names of ``runs``, in the same order;
    ``serves`` groups the windows of each `referee serve` (report.serve_view)."""
    rows = [{
        "key": key, "name": run.name, "model_id": run.model_id, "date": _when(run.started_at),
        "total": run.total, "passed": run.passed, "failed": run.failed, "errors": run.errors,
        "pass_rate": format_rate(run.pass_rate, run.passed + run.failed),
        "error_rate": format_rate(run.error_rate, run.total),
        "flagged": run.error_rate >= ERROR_RATE_FLAG,
        "state": ("finished" if run.finished else "running" if run.running else "interrupted")
                 + (f"; damaged: {'; '.join(run.damaged)}" if run.damaged else "")
                 + ("" if run.finished else _waiting_on_batches(run.path)),
        "earlier": [f"{key}@{n}" for n in run.versions if n != run.version],
    } for key, run in zip(keys, runs)]
    return _page("index.html.j2", forms=True, runs=rows, runs_dir=runs_dir, serves=serves or [])


def _waiting_on_batches(run_dir: Path) -> str:
    """What an unfinished run left at the provider, from its batch journal (no provider is
    asked: the viewer makes no network call); `referee resume RUN_DIR` reports their states."""
    from referee.judge.batch import JOURNAL_FILE, BatchJournal

    if not (run_dir / JOURNAL_FILE).is_file():
        return ""
    described = BatchJournal(run_dir).describe()
    return f"; waiting on {described}" if described else ""


_KIND_ORDER = {"regression": 0, "improvement": 1, "removed": 2, "added": 3, "unchanged": 4}


def _p(p: float | None) -> str:
    return "—" if p is None else f"{p:.2g}" if p < 0.001 else f"{p:.3f}"


def render_compare_html(comparison: Comparison, *, a_href: str | None = None,
                        b_href: str | None = None, index_href: str | None = None) -> str:
    return _page("compare.html.j2", **compare_page_context(
        comparison, a_href=a_href, b_href=b_href, index_href=index_href))


def compare_page_context(comparison: Comparison, *, a_href: str | None = None,
                         b_href: str | None = None,
                         index_href: str | None = None) -> dict[str, Any]:
    """What compare.html.j2 shows of a comparison (also for pages that extend it)."""
    a, b = _summary_view(comparison.a), _summary_view(comparison.b)
    a["href"], b["href"] = a_href, b_href
    changes = sorted(comparison.changes, key=lambda c: _KIND_ORDER[c.kind])
    counts = (f"{len(comparison.regressions)} regression(s), {len(comparison.improvements)} "
              f"improvement(s), {len(comparison.unchanged)} unchanged, {len(comparison.added)} added, "
              f"{len(comparison.removed)} removed")
    deltas = comparison.criterion_deltas
    chart = charts.delta_bars([charts.Delta(d.criterion, d.delta, d.ci_low, d.ci_high, d.n)
                               for d in deltas]) if deltas else None

    def case_href(run_href: str | None, index: int | None) -> str | None:
        return f"{run_href}#case-{index}" if run_href and index is not None else None

    gallery_a, gallery_b = run_gallery(comparison.a, a_href), run_gallery(comparison.b, b_href)

    by_id_a = {case.eval_id: case for case in comparison.a.cases}
    by_id_b = {case.eval_id: case for case in comparison.b.cases}

    def media(cases: dict[str, CaseResult], gallery: Gallery, eval_id: str
              ) -> list[dict[str, Any]]:
        case = cases.get(eval_id)
        return [] if case is None else gallery.of_case(case.case, case.execution)

    return dict(
        a=a, b=b, counts=counts, index_href=index_href, chart=chart,
        deltas=[{"criterion": d.criterion, "n": d.n, "mean_a": f"{d.mean_a:.3f}",
                 "mean_b": f"{d.mean_b:.3f}", "delta": f"{d.delta:+.3f}",
                 "ci": f"{d.ci_low:+.3f} to {d.ci_high:+.3f}", "hint": d.hint,
                 "significant": d.significant, "p": _p(d.wilcoxon.p_value if d.wilcoxon else None),
                 "holm_p": _p(d.adjusted_p), "real": d.real,
                 "dz": "—" if d.effect_dz is None else f"{d.effect_dz:+.2f}",
                 "mde": "—" if d.mde is None else f"{d.mde:.3f}"} for d in deltas],
        verdicts=[{"criterion": v.criterion, "n": v.n, "newly_failing": v.newly_failing,
                   "newly_passing": v.newly_passing, "method": v.test.method,
                   "p": _p(v.test.p_value), "holm_p": _p(v.adjusted_p), "real": v.real,
                   "mde": f"{v.mde * 100:.0f} points"} for v in comparison.verdict_shifts],
        statements=comparison.statements(), alpha=f"{ALPHA:.0%}",
        changes=[{"name": c.name or c.eval_id, "eval_id": c.eval_id, "kind": c.kind,
                  "status_a": c.status_a.value if c.status_a else "—",
                  "status_b": c.status_b.value if c.status_b else "—",
                  "href_a": case_href(a_href, c.index_a), "href_b": case_href(b_href, c.index_b),
                  "output_a": _clip(c.output_a), "output_b": _clip(c.output_b),
                  "diff": _diff(c.output_a, c.output_b) if c.output_changed else None,
                  "media_a": media(by_id_a, gallery_a, c.eval_id),
                  "media_b": media(by_id_b, gallery_b, c.eval_id),
                  "reasons": list(c.reasons)} for c in changes],
    )


def run_gallery(report: EvalReport, run_href: str | None, budget: int | None = None) -> Gallery:
    """A compared run's images: linked through the viewer when its page is the viewer's,
    else to the files in its run directory (``budget``: its inline thumbnails' bytes)."""
    run_dir = report.metadata.get("run_dir")
    if run_href and run_href.startswith("/run/"):
        base = run_href.split("#", 1)[0]
        return Gallery(run_dir, budget, blob_href=lambda sha256: f"{base}/blob/{sha256}")
    if run_dir:
        blobs = Path(run_dir).resolve() / "blobs"
        return Gallery(run_dir, budget,
                       blob_href=lambda sha256: (blobs / sha256[:2] / sha256).as_uri())
    return Gallery(None, budget)
