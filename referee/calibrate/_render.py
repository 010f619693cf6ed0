"""A calibration as a console table and as one self-contained HTML page with inline SVG pictures.

The page uses the run report's stylesheet and Content-Security-Policy. The pictures are SVG
elements styled by presentation attributes only (the policy forbids inline ``style``), drawn from
numbers, so no user text reaches them except through Jinja2's escaping.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any, TextIO

from jinja2 import ChoiceLoader, Environment, PackageLoader, StrictUndefined

from referee.calibrate._report import NOT_SEPARATED, Agreement, CalibrationReport, Estimate
from referee.report.html import content_security_policy

METRIC_ROWS = (("accuracy", "accuracy"), ("kappa", "Cohen's kappa"), ("tpr", "TPR (pass kept)"),
               ("tnr", "TNR (fail caught)"), ("precision", "precision"), ("recall", "recall"),
               ("f1", "F1"))
CURVE_COLOURS = {"kappa": "#1a56db", "f1": "#137333", "youden": "#a15c00"}
QUESTIONS_SHOWN = 10


def _num(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _estimate(e: Estimate) -> str:
    if e.value is None:
        return "n/a"
    if e.low is None or e.high is None:
        # Every resample gave this value: no interval, rather than [v, v] read as certainty.
        return f"{e.value:.2f} (constant)" if e.constant else _num(e.value)
    interval = f"{e.value:.2f} [{e.low:.2f}, {e.high:.2f}]"
    return interval + " W" if e.method == "wilson" else interval


def _column(e: Estimate) -> str:
    """An estimate in a right-aligned column: the flag keeps its own two characters, so a row
    with ``W`` lines up with the rows without it."""
    text = _estimate(e)
    return text if text.endswith(" W") else text + "  "


def console_text(report: CalibrationReport) -> str:
    """The calibration as plain text: the fitted threshold, agreement with intervals, questions."""
    a = report.agreement
    lines = [
        f"calibration of {report.evaluator} judged by {report.judge} "
        f"({report.scored} of {report.rows} rows scored)",
        f"fitted threshold ({report.metric}): {_estimate(report.threshold)}",
    ]
    if report.fit_problem is not None:
        lines.append(f"{NOT_SEPARATED}: {report.fit_problem}")
    if report.excluded:
        parts = ", ".join(f"{status} {count}" for status, count in sorted(report.excluded.items()))
        lines.append(f"left out of agreement: {parts}")
    lines.append(f"positive (pass) base rate {_num(a.base_rate)}; 95% bootstrap intervals "
                 "(W: Wilson's, where every resample gave the same proportion; constant: no "
                 "resample moved it, so no interval)")
    header = f"  {'metric':<20}{'at threshold ' + _num(a.threshold) + '  ':>26}"
    cv = report.cross_validation
    if cv is not None:
        header += f"{f'{cv.folds}-fold cross-validated  ':>30}"
    lines.append(header)
    for key, label in METRIC_ROWS:
        row = f"  {label:<20}{_column(getattr(a, key)):>26}"
        if cv is not None:
            row += f"{_column(getattr(cv.agreement, key)):>30}"
        lines.append(row)
    lines.append(f"  confusion: judge pass & human pass {a.tp}, judge pass & human fail {a.fp}, "
                 f"judge fail & human pass {a.fn}, judge fail & human fail {a.tn}")
    if cv is not None:
        lines.append("  fold thresholds: " + ", ".join(_num(t) for t in cv.thresholds))
    lines.extend(_panel_lines(report))
    if report.questions:
        lines.append("questions, most disagreement first (agreement with people, 95% interval):")
        for q in report.questions[:QUESTIONS_SHOWN]:
            lines.append(f"  {_estimate(q.agreement):<20} n={q.answered:<4} "
                         f"let through {q.judge_pass_human_fail:<3} rejected "
                         f"{q.judge_fail_human_pass:<3} {q.question}")
    if report.run_dir:
        lines.append(f"run stored in {report.run_dir}")
    return "\n".join(lines) + "\n"


def panel_rows(report: CalibrationReport) -> list[dict[str, str]]:
    """The panel and each member, side by side: rows, fitted threshold, agreement figures."""
    def row(judge: str, scored: int, threshold: Estimate, a: Agreement) -> dict[str, str]:
        return {"judge": judge, "rows": str(scored), "threshold": _num(threshold.value),
                "accuracy": _num(a.accuracy.value), "kappa": _estimate(a.kappa),
                "tpr": _num(a.tpr.value), "tnr": _num(a.tnr.value)}

    rows = [row("panel", report.scored, report.threshold, report.agreement)]
    rows += [row(m.judge, m.scored, m.threshold, m.agreement) for m in report.members]
    return rows


def _panel_lines(report: CalibrationReport) -> list[str]:
    if not report.is_panel:
        return []
    lines = ["the panel and each member on the same labels (each at its own fitted threshold; "
             "members scored from the answers they gave the panel):",
             f"  {'judge':<28}{'rows':>6}{'threshold':>11}{'accuracy':>10}  {'kappa':<22}"
             f"{'TPR':>6}{'TNR':>6}"]
    for r in panel_rows(report):
        lines.append(f"  {r['judge']:<28}{r['rows']:>6}{r['threshold']:>11}{r['accuracy']:>10}  "
                     f"{r['kappa']:<22}{r['tpr']:>6}{r['tnr']:>6}")
    versus = report.panel_versus_best()
    if versus:
        lines.append(versus)
    return lines


def print_console(report: CalibrationReport, stream: TextIO | None = None) -> None:
    import sys

    from referee.terminal import terminal_safe

    (stream or sys.stdout).write(terminal_safe(console_text(report)))  # labels are untrusted text


# SVG pictures ---------------------------------------------------------------------------------

_W, _H, _PAD = 520, 290, 44


def _x(t: float) -> float:
    return _PAD + t * (_W - 2 * _PAD)


def _y(v: float, low: float) -> float:
    return _H - _PAD - (v - low) / (1.0 - low) * (_H - 2 * _PAD)


def curve_svg(report: CalibrationReport) -> dict[str, Any]:
    """Coordinates for the agreement-curve picture (the template draws them)."""
    values = [v for name in CURVE_COLOURS for v in report.curve.get(name, []) if v is not None]
    low = min([-0.2, *values])
    lines = []
    for name, colour in CURVE_COLOURS.items():
        points = [(t, v) for t, v in zip(report.curve["threshold"], report.curve.get(name, []))
                  if t is not None and v is not None]
        lines.append({"name": name, "colour": colour,
                      "points": " ".join(f"{_x(t):.1f},{_y(v, low):.1f}" for t, v in points)})
    fitted = report.threshold
    band = None
    if fitted.low is not None and fitted.high is not None:
        band = {"x": _x(fitted.low), "width": max(1.0, _x(fitted.high) - _x(fitted.low))}
    ticks_y = [v for v in (-1.0, -0.5, 0.0, 0.25, 0.5, 0.75, 1.0) if v >= low]
    return {
        "width": _W, "height": _H, "lines": lines, "band": band,
        "fitted_x": _x(fitted.value) if fitted.value is not None else None,
        "fitted": _num(fitted.value), "left": _PAD, "right": _W - _PAD,
        "top": _y(1.0, low), "bottom": _y(low, low), "zero": _y(0.0, low),
        "ticks_x": [{"x": _x(t), "label": f"{t:.2f}"} for t in (0, 0.25, 0.5, 0.75, 1.0)],
        "ticks_y": [{"y": _y(v, low), "label": f"{v:.2f}"} for v in ticks_y],
    }


def confusion_svg(agreement: Agreement) -> dict[str, Any]:
    """Cells of the 2x2 confusion picture; shade by each cell's share of the rows."""
    total = max(1, agreement.n)
    cells = []
    for row, (human, counts) in enumerate((("human pass", (agreement.tp, agreement.fn)),
                                           ("human fail", (agreement.fp, agreement.tn)))):
        for col, count in enumerate(counts):
            agree = row == col
            share = count / total
            cells.append({"x": 120 + col * 130, "y": 40 + row * 80, "count": count,
                          "share": f"{share:.0%}", "opacity": f"{0.12 + 0.78 * share:.2f}",
                          "fill": "#137333" if agree else "#b3261e",
                          "title": f"{human}, judge {'pass' if col == 0 else 'fail'}: {count}"})
    return {"cells": cells}


@lru_cache(maxsize=1)
def _env() -> Environment:
    # The run report's layout (stylesheet, policy) wraps the calibration page.
    loader = ChoiceLoader([PackageLoader("referee.calibrate", "templates"),
                           PackageLoader("referee.report", "templates")])
    return Environment(loader=loader, autoescape=True,
                       undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)


@lru_cache(maxsize=1)
def _css() -> str:
    return resources.files("referee.report").joinpath("templates/report.css").read_text(
        encoding="utf-8")


def render_html(report: CalibrationReport) -> str:
    """One HTML file: no script, no external resources, every value escaped."""
    def row(a: Agreement | None, key: str) -> str:
        return _estimate(getattr(a, key)) if a is not None else ""

    cv = report.cross_validation
    return _env().get_template("calibration.html.j2").render(
        csp=content_security_policy(None), css=_css(), script=None, r=report, judge=report.judge,
        threshold=_estimate(report.threshold), base_rate=_num(report.agreement.base_rate),
        metrics=[{"label": label, "at": row(report.agreement, key),
                  "cv": row(cv.agreement if cv else None, key)} for key, label in METRIC_ROWS],
        fold_thresholds=", ".join(_num(t) for t in cv.thresholds) if cv else "",
        curve=curve_svg(report), confusion=confusion_svg(report.agreement),
        questions=[{"text": q.question, "expected": q.expected, "agreement": _estimate(q.agreement),
                    "kappa": _num(q.kappa), "answered": q.answered, "unknown": q.unknown,
                    "let_through": q.judge_pass_human_fail, "rejected": q.judge_fail_human_pass}
                   for q in report.questions],
        excluded=sorted(report.excluded.items()), not_separated=NOT_SEPARATED,
        panel=panel_rows(report) if report.is_panel else [],
        panel_versus_best=report.panel_versus_best())
