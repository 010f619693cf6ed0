"""The viewer's judged comparison of two stored runs: what its compare page shows and what its
form asks for. The viewer (referee.report.viewer) checks the request (Host, Origin, the
per-session token) before anything here runs; this module reads the form, starts the judging
as a background job and finds the stored comparisons to show."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from referee.judge import JudgeConfig, resolve_judge_config, split_judge_model
from referee.judge.config import BUILTIN_PROVIDERS
from referee.judge.panel import JudgePanel, build_panel, effective_panel
from referee.pairwise._compare import PairwiseComparison, compare_runs
from referee.pairwise._html import JudgedPage, JudgeForm, judge_text
from referee.pairwise._jobs import JobRefused, PairwiseJob, PairwiseJobs
from referee.pairwise._judging import PairCriterion
from referee.pairwise._store import stored_comparisons
from referee.record import EvalReport

UNSTORABLE = ("Run B is a report file, not a run directory, so a judged comparison has "
              "nowhere to be kept; open run directories to judge them pairwise.")


class RefusedJudging(ValueError):
    """A form the viewer cannot act on; the message says what to change."""


@dataclass(frozen=True)
class StoredRun:
    """A run the viewer serves: its URL name, its report and, for a run directory, where
    comparisons against it are kept."""

    key: str
    report: EvalReport
    home: Path | None


def compare_href(a_key: str, b_key: str, comparison_key: str | None = None) -> str:
    href = f"/compare?a={quote(a_key, safe='')}&b={quote(b_key, safe='')}"
    return href + (f"&c={quote(comparison_key, safe='')}" if comparison_key else "")


def configured_judge() -> str:
    """The judge a form left as it is asks: the configured panel, else the configured judge."""
    panel = effective_panel(None)
    return judge_text(panel if panel is not None else resolve_judge_config(None))


def _judge_from(value: Any) -> JudgeConfig | JudgePanel | None:
    """The form's PROVIDER/MODEL, or several comma-separated for a panel (a majority vote with
    the default quorum); None for the configured judge (with all its settings)."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    if ", ".join(part.strip() for part in text.split(",")) == configured_judge():
        return None
    members = [_member_from(part.strip()) for part in text.split(",")]
    if len(members) == 1:
        return members[0]
    try:
        return build_panel(members, None, None, source="judge")
    except ValueError as exc:
        raise RefusedJudging(str(exc)) from None


def _member_from(text: str) -> JudgeConfig:
    provider, model = split_judge_model(text)
    prefix, slash, rest = text.partition("/")
    if not slash or not rest.strip():
        raise RefusedJudging(f"judge {text!r}: expected PROVIDER/MODEL, e.g. openai/gpt-4o-mini "
                             "(several, comma-separated, for a judge panel)")
    if provider is None:
        raise RefusedJudging(f"judge {text!r}: unknown provider {prefix.strip()!r} (expected "
                             f"one of {', '.join(sorted(BUILTIN_PROVIDERS))} or a registered "
                             "one)")
    return JudgeConfig(provider=provider, model=model.strip())


def _form(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise RefusedJudging("the form must be sent as a JSON object") from None
    if not isinstance(data, dict):
        raise RefusedJudging("the form must be sent as a JSON object")
    return data


def start_judging(body: bytes, load: Callable[[str], StoredRun], jobs: PairwiseJobs
                  ) -> PairwiseJob:
    """Start judging the two runs the form names; refuses (before asking the judge) a form
    without runs, with a bad criterion or judge, or a run B that cannot keep the result."""
    data = _form(body)
    a_key, b_key = data.get("a"), data.get("b")
    if not isinstance(a_key, str) or not isinstance(b_key, str) or not a_key or not b_key:
        raise RefusedJudging("the form must name runs a and b")
    questions = data.get("questions") or []
    criterion = data.get("criterion")
    if not isinstance(questions, list):
        raise RefusedJudging("questions must be a list of yes/no questions")
    try:
        spec = PairCriterion.of(None if questions else criterion, None, questions,
                                owner="the judged comparison")
    except (TypeError, ValueError) as exc:
        raise RefusedJudging(str(exc)) from None
    judge = _judge_from(data.get("judge"))
    both_orders = data.get("both_orders", True)
    if not isinstance(both_orders, bool):
        raise RefusedJudging("both_orders must be true or false")
    run_a, run_b = load(a_key), load(b_key)
    if run_b.home is None:
        raise RefusedJudging(UNSTORABLE)

    def work(job: PairwiseJob) -> str:
        comparison = compare_runs(
            run_a.report, run_b.report, spec.text or None, questions=spec.questions or None,
            judge=judge, both_orders=both_orders, label_a=a_key, label_b=b_key,
            store_in=run_b.home, on_pair=lambda _outcome, total: job.advance(total))
        assert comparison.stored_at is not None
        return comparison_key_of(comparison)

    try:
        return jobs.start((a_key, b_key), work)
    except JobRefused as exc:
        raise RefusedJudging(str(exc)) from None


def comparison_key_of(comparison: PairwiseComparison) -> str:
    assert comparison.stored_at is not None
    return comparison.stored_at.stem.removeprefix("pairwise-")


def _short(criterion: PairCriterion, width: int = 80) -> str:
    text = " / ".join(criterion.questions) or criterion.text or "; ".join(criterion.rubric)
    return text if len(text) <= width else text[:width - 1] + "…"


def judged_page(run_a: StoredRun, run_b: StoredRun, *, shown_key: str | None, jobs: PairwiseJobs,
                token: str, post_href: str, status_href: str) -> JudgedPage:
    """What the compare page shows of the judged comparisons of A and B."""
    job = jobs.latest((run_a.key, run_b.key))
    if run_b.home is None:
        return JudgedPage(token=token, post_href=post_href, status_href=status_href,
                          a_key=run_a.key, b_key=run_b.key,
                          form=JudgeForm.of(None, configured_judge()), shown=None,
                          job=job.status() if job else None, unstorable=UNSTORABLE)
    stored = [PairwiseComparison.from_stored(s)
              for s in stored_comparisons(run_b.home, run_a.report.run_id)]
    shown = next((c for c in stored if comparison_key_of(c) == shown_key),
                 stored[0] if stored else None)
    others = [(compare_href(run_a.key, run_b.key, comparison_key_of(c)),
               f"{_short(c.criterion)} — judge {c.judge_label}: {c.win_rate.describe()}")
              for c in stored if c is not shown]
    return JudgedPage(token=token, post_href=post_href, status_href=status_href,
                      a_key=run_a.key, b_key=run_b.key,
                      form=JudgeForm.of(shown, configured_judge()), shown=shown, others=others,
                      job=job.status() if job else None)
