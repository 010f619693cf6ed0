"""The console summary: what a person (or a CI log) needs to know about a run at a glance."""

from __future__ import annotations

import io
import itertools
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from referee.record import (
    CaseResult,
    CaseStatus,
    CriterionStats,
    EvalReport,
    criterion_errors_line,
    describe_member_usage,
    format_rate,
    nothing_evaluated_reason,
)
from referee.redact import clip, redact_secrets
from referee.report.cascade import cascade_lines
from referee.report.label_estimates import label_estimate_lines
from referee.terminal import terminal_safe

# The error rate at which a pass rate stops being trustworthy on its own (the multivon-style API's
# `view --dir` flag and the fail_threshold warning use the same line).
ERROR_RATE_FLAG = 0.10
MAX_FAILURES_LISTED = 25
MAX_REASON_CHARS = 300

_STATUS_STYLE = {
    CaseStatus.PASSED: "green",
    CaseStatus.FAILED: "red",
    CaseStatus.SKIPPED: "dim",
}


def _pct(value: float) -> str:
    return f"{value * 100:.1f}%"


def _plain(text: str) -> str:
    # Model output and case names may carry escape sequences; printed raw they could rewrite
    # the screen.
    return terminal_safe(text)


def _clip(text: str, limit: int = MAX_REASON_CHARS) -> str:
    return clip(terminal_safe(text), limit)


def judge_label(judge: dict[str, Any] | None) -> str:
    """A person-readable name for the run's judge config (one, or one per criterion)."""
    judge = redact_secrets(judge or {})

    def one(cfg: dict[str, Any]) -> str:
        cascade = cfg.get("cascade")
        if isinstance(cascade, dict):  # a judge cascade: its stages, cheapest first
            return "cascade " + " -> ".join(one(stage) for stage in cascade.get("stages") or []
                                            if isinstance(stage, dict))
        members = cfg.get("members")
        if isinstance(members, list):  # a judge panel
            return (f"panel of {len(members)} ({cfg.get('aggregate')}, quorum "
                    f"{cfg.get('quorum')}): "
                    + ", ".join(one(m) for m in members if isinstance(m, dict)))
        model = cfg.get("model") or cfg.get("judge_model")
        if not model:
            return ", ".join(f"{k}={v}" for k, v in cfg.items() if isinstance(v, (str, int, float)))
        provider = cfg.get("provider")
        label = f"{provider}/{model}" if provider else str(model)
        if cfg.get("judge"):  # "no provider available"
            label += f" ({cfg['judge']})"
        return label + (f" at {cfg['base_url']}" if cfg.get("base_url") else "")

    per = judge.get("per_criterion")
    if isinstance(per, dict) and per:
        return "; ".join(f"{name}: {one(cfg)}" for name, cfg in per.items() if isinstance(cfg, dict))
    return one(judge)


NON_TERMINAL_WIDTH = 200


def plain_console() -> Console:
    """stdout as rich sees it; piped (a CI log), lines are not folded at 80 columns."""
    console = Console()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(width=NON_TERMINAL_WIDTH, soft_wrap=True)
    return console


def render_text(report: EvalReport, *, width: int = NON_TERMINAL_WIDTH, soft_wrap: bool = True,
                color: bool = False, every_case: bool = False) -> str:
    """The summary :func:`render_console` prints, as text: plain (no colour, no terminal)
    unless ``color``, which adds the terminal's colour codes."""
    buffer = io.StringIO()
    render_console(report, Console(file=buffer, width=width, soft_wrap=soft_wrap,
                                   force_terminal=color, no_color=not color),
                   every_case=every_case)
    return buffer.getvalue()


def _failure_lines(case: CaseResult) -> list[str]:
    """Why a case did not pass: the case error, then each failing or errored criterion."""
    lines: list[str] = []
    for r in case.criterion_results:
        if r.skipped or (r.passed and not r.is_error):
            continue
        reason = r.explanation or "no reason given"
        # An error kind without an error text is the 10xgraph-style 0.5 placeholder: no score.
        lines.append(f"{r.criterion}: {reason}" if r.is_error
                     else f"{r.criterion} ({r.score:.2f} < {r.threshold:.2f}): {reason}")
    # The case error of a judge/evaluator error only joins its criteria's errors listed above.
    if case.error and not any(r.is_error for r in case.criterion_results):
        lines.insert(0, case.error)
    unique = list(dict.fromkeys(lines))
    return unique or [f"status {case.status.value}"]


_FRAME = re.compile(r'^\s*File "(?P<file>[^"]*)", line (?P<line>\d+), in (?P<function>.*)$')


def _traceback_lines(traceback: str) -> list[str]:
    """A failing case's stored traceback: whole with REFEREE_DEBUG=1, else where it was raised."""
    if os.environ.get("REFEREE_DEBUG"):
        return [f"      {line}" for line in traceback.rstrip().splitlines()]
    frames = [m for m in map(_FRAME.match, traceback.splitlines()) if m]
    if not frames:
        return []
    last = frames[-1]
    return [f"      raised at {_clip(last['file'], 100)}:{last['line']} in {last['function']} "
            f"(REFEREE_DEBUG=1 prints the traceback)"]


def judge_consistency_line(report: EvalReport) -> str:
    """multivon's line for the reliability check (JudgeConfig(reliability_check=True)); empty
    when the run made no such check or could compare nothing."""
    check = report.judge_reliability_check
    if report.judge_reliability is None or check is None:
        return ""
    left_out = f", {check.left_out} left out" if check.left_out else ""
    return (f"Judge consistency: {report.judge_reliability:.0%} agreement across repeated calls "
            f"(sampled {len(check.sampled_cases)} cases; {check.agreed}/{check.compared} "
            f"verdicts repeated{left_out})")


def corrected_lines(report: EvalReport) -> list[str]:
    """Pass rates corrected for judge error, when a calibration entry was found for some judged
    criterion; nothing otherwise (a run with no calibration has nothing to say here)."""
    if not report.calibration_found:
        return []
    corrected = report.corrected_pass_rates()
    lines = ["Pass rates corrected for judge error (Rogan-Gladen, 95% interval):"]
    for label, record in report.judge_calibration.items():
        rate = corrected.get(label)
        if rate is not None:
            lines.append(f"  {label}: {rate.describe()}")
        else:
            lines.append(f"  {label}: not corrected: {record.reason or 'nothing was scored'}")
        if record.drift:
            lines.append(f"  {label}: judge drift: {record.drift}")
    note = report.corrected_run_note()
    if note:
        lines.append(f"  run: {note}")
    return lines


def sequential_line(report: EvalReport) -> str:
    """What a sequential gate decided (run/sequential.py), or "" for a run without one."""
    sequential = report.metadata.get("sequential")
    return str(sequential.get("summary") or "") if isinstance(sequential, dict) else ""


FLAKY_CASES_SHOWN = 20


def flaky_lines(report: EvalReport) -> list[str]:
    """The flaky cases (a verdict that flipped between runs), highest flip rate first; the
    flip rate is the chance that two runs of the case disagree."""
    flaky = report.trial_summary()["flaky_cases"]
    if not flaky:
        return []
    lines = ["Flaky cases (the verdict flipped between runs; flip rate = the chance two runs "
             "disagree):"]
    for entry in flaky[:FLAKY_CASES_SHOWN]:
        lines.append(f"  {entry['name']}  passed {entry['passed_runs']} of {entry['runs']} "
                     f"runs, flip rate {entry['flip_rate']:.2f}")
    if len(flaky) > FLAKY_CASES_SHOWN:
        lines.append(f"  ... and {len(flaky) - FLAKY_CASES_SHOWN} more (report.json: "
                     "trials.flaky_cases)")
    return lines


def repeated_runs_line(report: EvalReport) -> str:
    """Runs per case, flaky cases and pass@k / pass^k at k = runs per case, in one line."""
    summary = report.trial_summary()
    k = summary["runs_per_case"]
    parts = [f"Runs per case: {k}",
             f"flaky cases: {summary['flaky_count']} of {report.total} "
             f"(stability {_pct(summary['stability_score'])})"]
    for metric, key in (("pass@", "pass_at_k"), ("pass^", "pass_hat_k")):
        result = summary[key]
        if result["value"] is None:
            parts.append(f"{metric}{k} {result['unknown_reason']}")
        else:
            parts.append(f"{metric}{k} {result['value']:.3f} (95% CI {result['ci_low']:.3f}-"
                         f"{result['ci_high']:.3f})")
    return "; ".join(parts)


def render_console(report: EvalReport, console: Console | None = None, *,
                   run_dir: str | Path | None = None, every_case: bool = False) -> None:
    """Print the run summary. Plain, line-oriented text when ``console`` is not a terminal.

    The summary lists the first failed and errored cases; ``every_case=True`` lists every
    case, passed and skipped ones too, with no limit."""
    console = console or plain_console()
    title = report.name or report.eval_set_id or report.run_id
    console.print(Text(_plain(f"referee run {report.run_id} — {title}"), style="bold"))
    facts = []
    if report.model_id:
        facts.append(f"model: {report.model_id}")
    judge = judge_label(report.judge)
    if judge:
        facts.append(f"judge: {judge}")
    facts.append(f"duration: {report.duration_seconds:.1f}s")
    if report.metadata.get("interrupted"):
        facts.append(
            f"INTERRUPTED: {report.total} of {report.metadata.get('expected_cases', '?')} cases finished"
        )
    console.print(Text(_plain("  ".join(facts))))
    if sequential_line(report):
        console.print(Text(_plain(sequential_line(report)), style="bold"))

    totals = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for col in ("total", "evaluated", "passed", "failed", "errors", "skipped", "pass rate", "error rate"):
        totals.add_column(col, justify="right")
    totals.add_row(
        str(report.total), str(report.evaluated), str(report.passed), str(report.failed),
        str(report.errors), str(report.skipped), format_rate(report.pass_rate, report.evaluated),
        format_rate(report.error_rate, report.total),
    )
    console.print(totals)
    if report.runs_per_case > 1:
        console.print(Text(repeated_runs_line(report)))
        for line in flaky_lines(report):
            console.print(Text(_plain(line)))

    summary = report.summary
    if summary.criterion_stats:
        per = Table(title="Per evaluator", title_justify="left", box=box.SIMPLE_HEAD,
                    show_edge=False, pad_edge=False)
        # Evaluator names are identifiers; folding them mid-word makes them unreadable. Columns
        # that would be all zeros are left out so the table fits an 80-column CI log.
        stats = summary.criterion_stats
        columns: list[tuple[str, Callable[[CriterionStats], str]]] = [
            ("passed", lambda s: str(s.passed)),
            ("failed", lambda s: str(s.failed)),
        ]
        if any(s.errors for s in stats.values()):
            columns.append(("errors", lambda s: str(s.errors)))
        if any(s.skipped for s in stats.values()):
            columns.append(("skipped", lambda s: str(s.skipped)))
        # Means and pass rates cover scored results only, so the count they rest on sits beside.
        columns += [("pass rate", lambda s: format_rate(s.pass_rate, s.scored)),
                    ("mean (n)", lambda s: f"{s.avg_score:.3f} ({s.scored})" if s.scored
                     else "n/a (0)")]
        rows = [(escape(_plain(name)), [cell(s) for _, cell in columns]) for name, s in stats.items()]
        widths = [max(len(col), 5, *(len(cells[k]) for _, cells in rows))
                  for k, (col, _) in enumerate(columns)]
        # Left unbounded, a long evaluator name pushes the last columns off a narrow console.
        widest = max(len(_plain(name)) for name in stats)
        room = console.width - sum(w + 3 for w in widths)
        per.add_column("evaluator", no_wrap=True, overflow="ellipsis", min_width=min(widest, 16),
                       max_width=max(room, min(widest, 16)))
        for (col, _), width in zip(columns, widths):
            per.add_column(col, justify="right", no_wrap=True, min_width=width)
        for name, cells in rows:
            per.add_row(name, *cells)
        console.print(per)
        for name, s in stats.items():
            if s.judge_agreement is not None:
                console.print(Text(_plain(f"Judge agreement, {name}: "
                                          f"{s.judge_agreement.describe()}")))
    for line in corrected_lines(report) + label_estimate_lines(report):
        console.print(Text(_plain(line)))
    for line in cascade_lines(report):
        console.print(Text(_plain(line)))

    if report.errors:
        kinds = ", ".join(f"{kind}={n}" for kind, n in report.errors_by_kind.items())
        console.print(Text(f"Errors by kind: {kinds}", style="yellow"))
    if report.criterion_errors:
        console.print(Text(criterion_errors_line(report), style="yellow"))
    if report.evaluated == 0:
        console.print(Text(f"Pass rate n/a: {nothing_evaluated_reason(report)}", style="bold yellow"))
    if report.total and report.error_rate >= ERROR_RATE_FLAG:
        console.print(Text(
            f"Warning: error rate {_pct(report.error_rate)} — pass rate "
            f"{format_rate(report.pass_rate, report.evaluated)} "
            f"covers only the {report.evaluated} evaluated case(s) of {report.total}.",
            style="bold yellow",
        ))

    for warning in report.warnings:
        console.print(Text(f"Warning: {_clip(warning, 2 * MAX_REASON_CHARS)}", style="yellow"))

    # Counted from the totals and listed from a stream: a large run is never held to print it.
    if every_case:
        listed_count, heading = report.total, "Cases"
        listed: Iterable[CaseResult] = report.cases
    else:
        listed_count, heading = report.total - report.passed - report.skipped, "Failures and errors"
        listed = list(itertools.islice(
            (c for c in report.cases if c.status not in (CaseStatus.PASSED, CaseStatus.SKIPPED)),
            MAX_FAILURES_LISTED))
    shown = 0
    for case in listed:
        if shown == 0:
            console.print(Text(f"{heading} ({listed_count}):", style="bold"))
        shown += 1
        style = _STATUS_STYLE.get(case.status, "yellow")
        head = Text("  ")
        head.append(case.status.value, style=style)
        head.append(f"  {_clip(case.label, 120)}")
        if case.run_results:
            evaluated = sum(r.status.is_evaluated for r in case.run_results)
            head.append(f"  (passed {max(case.pass_count, 0)} of {evaluated} evaluated run(s) "
                        f"of {case.runs})")
        console.print(head)
        if case.status in (CaseStatus.PASSED, CaseStatus.SKIPPED):
            continue
        for line in _failure_lines(case):
            console.print(Text(f"      {_clip(line)}"))
        if case.traceback:
            for line in _traceback_lines(case.traceback):
                console.print(Text(line, style="dim"))
    if listed_count > shown > 0:
        console.print(Text(f"  … and {listed_count - shown} more "
                           "(see the HTML or JSON report)"))

    consistency = judge_consistency_line(report)
    if consistency:
        agreement = report.judge_reliability or 0.0
        colour = "green" if agreement >= 0.85 else "yellow" if agreement >= 0.70 else "red"
        console.print(Text(consistency, style=colour))
    usage = report.token_usage
    if usage.requests or usage.cached_requests or usage.total_tokens:
        console.print(Text(f"Judge spend: {usage.describe()}"))
    members = report.summary.judge_member_token_usage
    if members:
        console.print(Text(_plain(f"Judge spend by panel member: "
                                  f"{describe_member_usage(members)}")))
    model_usage = report.model_token_usage
    if model_usage is not None:
        console.print(Text(f"Model under test spend: {model_usage.describe()}"))

    location = run_dir or report.run_dir
    if location:
        console.print(Text(f"Run stored in {location}"))
