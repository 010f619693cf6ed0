"""Pairwise comparisons as HTML: one section (the numbers, then each pair side by side with the
judge's reasons), rendered alike on the standalone page of ``compare --judge --html`` and on the
viewer's compare page. Both use the run report's layout, stylesheet and
Content-Security-Policy; every value reaches the page through Jinja2's escaping."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from jinja2 import ChoiceLoader, Environment, PackageLoader, StrictUndefined

from referee.content._gallery import THUMBNAIL_BUDGET
from referee.judge import JudgeConfig
from referee.judge.panel import JudgePanel
from referee.pairwise._compare import PairwiseComparison, paired
from referee.pairwise._defaults import DEFAULT_PAIRWISE_CRITERION
from referee.pairwise._ranking import rank
from referee.record import EvalReport
from referee.redact import redact
from referee.report.compare import Comparison
from referee.report.html import compare_page_context, content_security_policy, run_gallery

OUTCOME = {"b": "B better", "a": "A better", "tie": "tie", "judge_error": "JUDGE_ERROR",
           "not_compared": "not compared"}


@lru_cache(maxsize=1)
def _env() -> Environment:
    loader = ChoiceLoader([PackageLoader("referee.pairwise", "templates"),
                           PackageLoader("referee.report", "templates")])
    return Environment(loader=loader, autoescape=True, undefined=StrictUndefined,
                       trim_blocks=True, lstrip_blocks=True)


def _asset(package: str, name: str) -> str:
    return resources.files(package).joinpath(f"templates/{name}").read_text(encoding="utf-8")


def _notes(comparison: PairwiseComparison) -> list[dict[str, Any]]:
    """What a reader must know before the numbers: an unfinished or failing comparison."""
    rate = comparison.win_rate
    notes = []
    if not comparison.complete:
        notes.append({"kind": "interrupted", "flag": True, "text": (
            f"Interrupted: {len(comparison.pairs)} of {comparison.expected_pairs} pair(s) "
            "judged. Ask again with the same settings to judge the rest; the judged pairs are "
            "not asked again.")})
    if rate.judge_errors:
        first = next(p for p in comparison.pairs if p.status == "judge_error")
        notes.append({"kind": "judge-error", "flag": True, "text": (
            f"{rate.judge_errors} pair(s) got no verdict from the judge (JUDGE_ERROR), e.g. "
            f"{first.name}: {redact(first.reason)}. They count in no number below; ask again "
            "to retry them (decided pairs are kept).")})
    if comparison.resumed:
        notes.append({"kind": "resumed", "flag": False, "text": (
            f"{len(comparison.resumed)} pair(s) taken from the stored comparison, not asked "
            "again.")})
    return notes


def _bradley_terry(comparison: PairwiseComparison) -> str:
    """The two-variant Bradley-Terry estimate (ties half a win), Elo scale, with its interval."""
    if not comparison.win_rate.judged:
        return ""
    ranking = rank(["A", "B"], [(0, 1, comparison)])
    by_name = {v.name: v for v in ranking.variants}
    return "Bradley-Terry (Elo scale, a tie half a win, 95% bootstrap interval over cases): " + (
        ", ".join(f"{name} {by_name[name].rating:.0f} ({by_name[name].ci_low:.0f} to "
                  f"{by_name[name].ci_high:.0f})" for name in ("A", "B")))


@dataclass(frozen=True)
class ComparedRuns:
    """The two runs a comparison judged, where the page finds their images (blobs/), and
    the links to the runs' pages (the viewer's) that a blob link is made under."""

    a: EvalReport
    b: EvalReport
    a_href: str | None = None
    b_href: str | None = None


_NO_MEDIA: dict[str, list[dict[str, Any]]] = {"case": [], "a": [], "b": []}


def _pair_media(runs: ComparedRuns | None) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Each pair's images as the judge was shown them (the case's, A's, B's), as thumbnails
    within one report's image budget, split between the two runs; by pair key."""
    if runs is None:
        return {}
    half = THUMBNAIL_BUDGET // 2
    galleries = {"a": run_gallery(runs.a, runs.a_href, half),
                 "b": run_gallery(runs.b, runs.b_href, half)}
    shown: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for pair in paired(runs.a, runs.b):
        media = pair.media
        if not media:
            continue
        items = {"case": galleries["a"].of_case(list(media.case), None),
                 "a": galleries["a"].of_case(None, list(media.a)),
                 "b": galleries["b"].of_case(None, list(media.b))}
        for side in ("a", "b"):
            for item in items[side]:
                item["where"] = side.upper()
        shown[pair.key] = items
    return shown


def pairwise_view(comparison: PairwiseComparison,
                  runs: ComparedRuns | None = None) -> dict[str, Any]:
    """What pairwise_section.html.j2 shows of a comparison, secrets removed; with ``runs``,
    each pair's images too."""
    rate = comparison.win_rate
    usage = comparison.token_usage
    media = _pair_media(runs)
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
                      "input": redact(pair.user_input or ""),
                      "output_a": redact(pair.output_a or ""),
                      "output_b": redact(pair.output_b or ""),
                      "orders": [redact(o) for o in orders],
                      "media": media.get(pair.pair_key or pair.eval_id, _NO_MEDIA)})
    return {
        "c": comparison, "judge": comparison.judge_label,
        "judges": [record.describe() for record in comparison.member_records()],
        "judge_agreement": comparison.judge_agreement,
        "orders": "both orders asked" if comparison.both_orders else "one order asked",
        "spend": (f"{usage.requests} judge request(s), {usage.input_tokens} input / "
                  f"{usage.output_tokens} output tokens"),
        "criterion": comparison.criterion.render(), "s": rate.to_dict(),
        "win_rate": "n/a" if rate.rate is None else f"{rate.rate:.0%}",
        "summary": rate.describe(), "bradley_terry": _bradley_terry(comparison),
        "notes": _notes(comparison), "pairs": pairs}


def render_pairwise_html(comparison: PairwiseComparison, *, runs: Sequence[str] = (),
                         compared: ComparedRuns | None = None) -> str:
    """The standalone page; ``runs`` are lines about the two runs (summaries, regressions),
    ``compared`` the two runs themselves, whose images each pair shows."""
    return _env().get_template("pairwise.html.j2").render(
        csp=content_security_policy(None), css=_asset("referee.report", "report.css"),
        script=None, p=pairwise_view(comparison, compared),
        runs=[redact(line) for line in runs])


def judge_text(judge: JudgeConfig | JudgePanel) -> str:
    """The judge as the viewer's form spells it: PROVIDER/MODEL, a panel's comma-separated."""
    members = judge.members if isinstance(judge, JudgePanel) else [judge]
    return ", ".join(f"{m.provider}/{m.model}" for m in members)


@dataclass(frozen=True)
class JudgeForm:
    """What the viewer's judging form holds: the shown comparison's settings, or the defaults."""

    criterion: str
    questions: str
    judge: str
    both_orders: bool

    @classmethod
    def of(cls, shown: PairwiseComparison | None, default_judge: str) -> JudgeForm:
        if shown is None:
            return cls(DEFAULT_PAIRWISE_CRITERION, "", default_judge, True)
        spec = shown.criterion
        return cls(spec.text if not spec.questions else "", "\n".join(spec.questions),
                   judge_text(shown.judge), shown.both_orders)


@dataclass(frozen=True)
class JudgedPage:
    """The viewer's side of its compare page: where the form posts, what it shows."""

    token: str
    post_href: str
    status_href: str
    a_key: str
    b_key: str
    form: JudgeForm
    shown: PairwiseComparison | None
    # (link, description) of the other comparisons stored for these two runs
    others: Sequence[tuple[str, str]] = ()
    job: dict[str, Any] | None = None  # the latest judging of these runs in this viewer
    unstorable: str = ""  # why these runs cannot be judged here (B is a report file)


def render_judged_compare_html(comparison: Comparison, page: JudgedPage, *,
                               a_href: str | None = None, b_href: str | None = None,
                               index_href: str | None = None) -> str:
    """The viewer's compare page: the regressions, then the judged comparison of the two runs
    (the latest stored, or the one asked for) and the form that asks for one."""
    script = _asset("referee.pairwise", "judge_form.js")
    return _env().get_template("compare_judged.html.j2").render(
        csp=content_security_policy(script, connect=True),
        css=_asset("referee.report", "report.css"), script=script,
        **compare_page_context(comparison, a_href=a_href, b_href=b_href, index_href=index_href),
        judged=page, p=pairwise_view(page.shown, ComparedRuns(comparison.a, comparison.b, a_href,
                                                              b_href))
        if page.shown is not None else None)
