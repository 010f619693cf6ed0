"""A pairwise comparison as one self-contained HTML page: the summary, then each pair side by
side with the judge's reason. It uses the run report's layout, stylesheet and
Content-Security-Policy (no script); every value reaches the page through Jinja2's escaping."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from importlib import resources

from jinja2 import ChoiceLoader, Environment, PackageLoader, StrictUndefined

from referee.pairwise._compare import PairwiseComparison
from referee.redact import redact
from referee.report.html import content_security_policy

OUTCOME = {"b": "B better", "a": "A better", "tie": "tie", "judge_error": "JUDGE_ERROR",
           "not_compared": "not compared"}


@lru_cache(maxsize=1)
def _env() -> Environment:
    loader = ChoiceLoader([PackageLoader("referee.pairwise", "templates"),
                           PackageLoader("referee.report", "templates")])
    return Environment(loader=loader, autoescape=True, undefined=StrictUndefined,
                       trim_blocks=True, lstrip_blocks=True)


def render_pairwise_html(comparison: PairwiseComparison, *, runs: Sequence[str] = ()) -> str:
    """The page; ``runs`` are lines about the two runs (their summaries, their regressions)."""
    rate = comparison.win_rate
    usage = comparison.token_usage
    pairs = []
    for pair in comparison.pairs:
        orders = [f"{o.judge + ': ' if o.judge else ''}"
                  f"{'On ' + repr(o.question) + ', ' if o.question else ''}"
                  f"{o.first.upper()} shown first: judge preferred "
                  f"{o.preferred.upper() if o.preferred != 'tie' else 'neither (tie)'}"
                  f"{' — ' + o.reason if o.reason else ''}"
                  for o in (pair.verdict.orders if pair.verdict is not None else ())]
        pairs.append({"eval_id": pair.eval_id, "name": pair.name, "status": pair.status,
                      "outcome": OUTCOME[pair.status], "reason": redact(pair.reason),
                      "input": redact(pair.user_input or ""), "output_a": redact(pair.output_a or ""),
                      "output_b": redact(pair.output_b or ""), "orders": [redact(o) for o in orders]})
    css = resources.files("referee.report").joinpath("templates/report.css").read_text(
        encoding="utf-8")
    return _env().get_template("pairwise.html.j2").render(
        csp=content_security_policy(None), css=css, script=None, c=comparison,
        judge=comparison.judge_label, judges=[r.describe() for r in comparison.member_records()],
        judge_agreement=comparison.judge_agreement,
        orders="both orders asked" if comparison.both_orders else "one order asked",
        spend=(f"{usage.requests} judge request(s), {usage.input_tokens} input / "
               f"{usage.output_tokens} output tokens"),
        runs=[redact(line) for line in runs], criterion=comparison.criterion.render(), s=rate.to_dict(),
        win_rate="n/a" if rate.rate is None else f"{rate.rate:.0%}",
        summary=rate.describe(), pairs=pairs)
