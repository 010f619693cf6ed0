"""Pairwise comparison of two runs (or two model functions) over the same cases.

Cases are paired by ``eval_id`` (a repeated id pairs in order of occurrence). Each pair is
judged through ``judge_pair``: B won, A won, a tie, or JUDGE_ERROR when the judge gave no
verdict; a case that has no output on either side (a model error, a timeout) is not compared.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from referee.case import EvalCase
from referee.content._parts import ContentError
from referee.errors import JudgeUnavailable
from referee.evaluators.qag import case_cache_group
from referee.execution import ExecutionResult
from referee.judge import JudgeConfig
from referee.judge.binding import bind_in_layers
from referee.judge.panel import (
    PANEL,
    JudgePanel,
    check_judge,
    member_labels,
    panel_model_name,
)
from referee.messages import content_text
from referee.pairwise._judging import (
    PairCriterion,
    PairVerdict,
    identical,
    judge_pair,
    judge_pair_by_panel,
)
from referee.pairwise._media import PairMedia
from referee.pairwise._stats import WinRate
from referee.pairwise._store import (
    ComparisonFile,
    comparison_key,
    judge_from_header,
    judge_header,
    pair_verdict_from,
)
from referee.record import CaseResult, EvalReport, fleiss_kappa
from referee.redact import redact_secrets
from referee.usage import TokenUsage

PairStatus = Literal["b", "a", "tie", "judge_error", "not_compared"]

# Pairs judged at once; the judge layer's per-endpoint limit bounds the requests themselves.
PAIRS_IN_FLIGHT = 32


@dataclass(frozen=True)
class PairOutcome:
    """One case's pair: the two outputs and what the judge made of them."""

    eval_id: str
    name: str
    user_input: str | None
    output_a: str | None
    output_b: str | None
    status: PairStatus
    reason: str
    verdict: PairVerdict | None = None
    # Unique within the comparison: the case id, and which occurrence of a repeated id.
    pair_key: str = ""
    # The images and PDFs the judge was shown (by hash, never their bytes): "case", "a", "b".
    media: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # What the requests of a pair that got no verdict spent (replies that named no winner,
    # and the siblings of a request that failed): they were made and paid for. A judged
    # pair's spend is its verdict's.
    error_usage: TokenUsage | None = None

    @property
    def position_inconsistent(self) -> bool:
        return self.verdict is not None and self.verdict.position_consistent is False

    @property
    def token_usage(self) -> TokenUsage | None:
        """What the judge requests made for this pair spent, with a verdict or without."""
        return self.verdict.token_usage if self.verdict is not None else self.error_usage

    def to_dict(self) -> dict[str, Any]:
        return {"eval_id": self.eval_id, "name": self.name, "input": self.user_input,
                "output_a": self.output_a, "output_b": self.output_b, "status": self.status,
                "reason": self.reason, "pair_key": self.pair_key or self.eval_id,
                **({"media": self.media} if self.media else {}),
                **({"token_usage": self.error_usage.model_dump()}
                   if self.error_usage is not None else {}),
                "verdict": self.verdict.to_dict() if self.verdict is not None else None}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PairOutcome:
        verdict = data.get("verdict")
        return cls(eval_id=data["eval_id"], name=data.get("name") or data["eval_id"],
                   user_input=data.get("input"), output_a=data.get("output_a"),
                   output_b=data.get("output_b"), status=data["status"],
                   reason=data.get("reason") or "",
                   verdict=pair_verdict_from(verdict) if isinstance(verdict, dict) else None,
                   pair_key=data.get("pair_key") or data["eval_id"],
                   media=data.get("media") or {},
                   error_usage=(TokenUsage.model_validate(data["token_usage"])
                                if data.get("token_usage") else None))


@dataclass(frozen=True)
class MemberRecord:
    """One panel member over the whole comparison: its verdicts, how often the panel's verdict
    was its own, and what it spent."""

    judge: str
    wins: int
    losses: int
    ties: int
    position_inconsistent: int
    no_answer: int
    agrees_with_panel: int
    token_usage: TokenUsage

    @property
    def answered(self) -> int:
        return self.wins + self.losses + self.ties

    def describe(self) -> str:
        usage = self.token_usage
        text = (f"{self.judge}: B won {self.wins}, tied {self.ties}, lost {self.losses}; "
                f"agrees with the panel on {self.agrees_with_panel} of {self.answered}")
        if self.position_inconsistent:
            text += f"; {self.position_inconsistent} position-inconsistent"
        if self.no_answer:
            text += f"; no verdict on {self.no_answer}"
        return (text + f"; {usage.requests} request(s), {usage.input_tokens} input and "
                f"{usage.output_tokens} output token(s)"
                + (f", ${usage.cost_usd:.4f}" if usage.cost_usd else ""))

    def to_dict(self) -> dict[str, Any]:
        return {"judge": self.judge, "wins": self.wins, "losses": self.losses,
                "ties": self.ties, "position_inconsistent": self.position_inconsistent,
                "no_answer": self.no_answer, "agrees_with_panel": self.agrees_with_panel,
                "token_usage": self.token_usage.model_dump()}


@dataclass
class PairwiseComparison:
    label_a: str
    label_b: str
    criterion: PairCriterion
    judge: JudgeConfig | JudgePanel
    both_orders: bool
    pairs: list[PairOutcome] = field(default_factory=list)
    # The runs behind the comparison, when it ran the models itself (compare_models).
    report_a: EvalReport | None = None
    report_b: EvalReport | None = None
    # Pairs taken from the stored comparison instead of asking the judge again (their spend is
    # not counted again), where it is stored, and how many pairs it has in all.
    resumed: frozenset[str] = frozenset()
    stored_at: Path | None = None
    expected_pairs: int | None = None

    @property
    def win_rate(self) -> WinRate:
        count = {s: sum(1 for p in self.pairs if p.status == s)
                 for s in ("b", "a", "tie", "judge_error", "not_compared")}
        return WinRate(wins=count["b"], losses=count["a"], ties=count["tie"],
                       position_inconsistent=sum(p.position_inconsistent for p in self.pairs),
                       judge_errors=count["judge_error"], not_compared=count["not_compared"],
                       identical=sum(1 for p in self.pairs if p.status == "tie"
                                     and p.verdict is not None and not p.verdict.orders))

    @property
    def judge_answered(self) -> int:
        """Pairs the judge gave a verdict on (identical outputs are ties without asking)."""
        return sum(1 for p in self.pairs if p.verdict is not None and p.verdict.orders)

    @property
    def token_usage(self) -> TokenUsage:
        return TokenUsage.total([p.token_usage for p in self.pairs
                                 if p.pair_key not in self.resumed]) or TokenUsage()

    @property
    def complete(self) -> bool:
        """False for a stored comparison that was interrupted before every pair was judged."""
        return self.expected_pairs is None or len(self.pairs) >= self.expected_pairs

    @classmethod
    def from_stored(cls, stored: ComparisonFile) -> PairwiseComparison:
        """A comparison as it was stored (``stored_comparisons``), without asking the judge."""
        header = stored.header
        criterion = PairCriterion(text=header.get("criterion") or "",
                                  rubric=tuple(header.get("rubric") or ()),
                                  questions=tuple(header.get("questions") or ()))
        judge = judge_from_header(header, str(stored.path))
        return cls(label_a=header.get("a") or "A", label_b=header.get("b") or "B",
                   criterion=criterion, judge=judge, both_orders=bool(header.get("both_orders")),
                   pairs=[PairOutcome.from_dict(p.data) for p in stored.in_case_order()],
                   stored_at=stored.path, expected_pairs=header.get("total_pairs"))

    @property
    def judge_label(self) -> str:
        """``provider/model``, or for a panel its size, rules and members."""
        if isinstance(self.judge, JudgePanel):
            return (f"panel of {len(self.judge.members)} ({self.judge.aggregate}, quorum "
                    f"{self.judge.effective_quorum}): {', '.join(self.member_names)}")
        return f"{self.judge.provider}/{self.judge.model}"

    @property
    def member_names(self) -> list[str]:
        if not isinstance(self.judge, JudgePanel):
            return []
        return member_labels(self.judge.members)

    def member_records(self) -> list[MemberRecord]:
        """Each panel member over every pair it was asked about (none without a panel)."""
        records = []
        for index, name in enumerate(self.member_names):
            said = [(p.verdict.preferred, p.verdict.members[index], p.pair_key in self.resumed)
                    for p in self.pairs
                    if p.verdict is not None and len(p.verdict.members) > index]
            answered = [(panel, m) for panel, m, _ in said if m.preferred is not None]
            records.append(MemberRecord(
                judge=name, wins=sum(1 for _, m in answered if m.preferred == "b"),
                losses=sum(1 for _, m in answered if m.preferred == "a"),
                ties=sum(1 for _, m in answered if m.preferred == "tie"),
                position_inconsistent=sum(1 for _, m in answered
                                          if m.position_consistent is False),
                no_answer=len(said) - len(answered),
                agrees_with_panel=sum(1 for panel, m in answered if m.preferred == panel),
                # like the comparison's spend: what this member was asked now, not earlier
                token_usage=TokenUsage.total([m.token_usage for _, m, resumed in said
                                              if not resumed]) or TokenUsage()))
        return records

    @property
    def judge_agreement(self) -> float | None:
        """Fleiss' kappa of the members' verdicts (B, A, tie) over the pairs every member
        answered; None without a panel or where it is undefined."""
        rows = []
        for pair in self.pairs:
            members = pair.verdict.members if pair.verdict is not None else ()
            if members and all(m.preferred is not None for m in members):
                rows.append([sum(1 for m in members if m.preferred == side)
                             for side in ("b", "a", "tie")])
        return fleiss_kappa(rows) if rows else None

    def render_text(self) -> str:
        mark = {"b": "B", "a": "A", "tie": "=", "judge_error": "!", "not_compared": "-"}
        usage = self.token_usage
        orders = "both orders" if self.both_orders else "one order"
        criterion = self.criterion.render().replace("\n", "\n  ")
        lines = [(f"Pairwise: A = {self.label_a}, B = {self.label_b}; judge "
                  f"{self.judge_label}, {orders}"),
                 f"  {criterion}",
                 f"  {self.win_rate.describe()}",
                 (f"  judge spend: {usage.requests} request(s), {usage.input_tokens} input and "
                  f"{usage.output_tokens} output token(s)"
                  + (f"; {usage.cached_requests} repl(ies) from the reply cache"
                     if usage.cached_requests else ""))]
        records = self.member_records()
        if records:
            kappa = self.judge_agreement
            lines.append("  judges (the pair's verdict is their majority; a tie when none has "
                         "the most votes): agreement between them (Fleiss' kappa) "
                         + ("n/a" if kappa is None else f"{kappa:.2f}"))
            lines.extend(f"    {record.describe()}" for record in records)
        if self.stored_at is not None:
            lines.append(f"  stored in {self.stored_at} (run it again to resume)")
        if self.resumed:
            lines.append(f"  {len(self.resumed)} pair(s) taken from the stored comparison "
                         "(not asked again)")
        for pair in self.pairs:
            reason = " ".join(pair.reason.split())
            named = pair.name if pair.name == pair.eval_id else f"{pair.name} ({pair.eval_id})"
            lines.append(f"  [{mark[pair.status]}] {named}: {reason}")
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict[str, Any]:
        """The comparison as JSON-ready data, secrets removed (outputs may quote a key)."""
        judge: dict[str, Any]
        if isinstance(self.judge, JudgePanel):
            judge = {"judge_provider": PANEL, "judge_model": panel_model_name(self.judge.members),
                     "judges": [r.to_dict() for r in self.member_records()],
                     "judge_agreement": self.judge_agreement}
        else:
            judge = {"judge_provider": self.judge.provider, "judge_model": self.judge.model}
        return redact_secrets({"a": self.label_a, "b": self.label_b, **self.criterion.to_dict(),
                **judge, "both_orders": self.both_orders, "summary": self.win_rate.to_dict(),
                "token_usage": self.token_usage.model_dump(),
                "pairs": [p.to_dict() for p in self.pairs]})

    def write_json(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n",
                        encoding="utf-8")
        return path


@dataclass(frozen=True)
class CasePair:
    eval_id: str
    name: str
    case: EvalCase | None
    output_a: str | None
    output_b: str | None
    missing: str | None  # why the pair cannot be judged
    key: str
    media: PairMedia = PairMedia()  # as the runs hold them: stored parts by hash alone
    media_error: str | None = None  # a part of the pair that cannot be read
    run_dirs: tuple[Path | None, Path | None] = (None, None)

    @property
    def asks_judge(self) -> bool:
        """Whether the judge is asked: the pair has both outputs, and they differ (in their
        text or their images)."""
        return self.missing is None and not identical(self.output_a or "", self.output_b or "",
                                                      self.media)

    def hashed(self, side: Literal["a", "b"]) -> tuple[str | None, tuple[str, ...]]:
        """What a stored verdict on this pair was judged over: the output's text and the
        content hashes of its images."""
        return (self.output_a if side == "a" else self.output_b), self.media.keys(side)


def _execution(case: CaseResult) -> ExecutionResult | None:
    execution = case.execution
    if execution is None and case.run_results:
        execution = case.run_results[0].execution
    return execution


def _output(case: CaseResult) -> str | None:
    execution = _execution(case)
    return execution.actual_response if execution is not None else None


def _media_of(ca: CaseResult | None, cb: CaseResult | None,
              case: EvalCase | None) -> tuple[PairMedia, str | None]:
    try:
        return PairMedia.of(case, _execution(ca) if ca is not None else None,
                            _execution(cb) if cb is not None else None), None
    except ContentError as exc:  # one pair's unreadable part: that pair's judge error
        return PairMedia(), str(exc)


def paired(a: EvalReport, b: EvalReport) -> list[CasePair]:
    """The cases of two runs, paired by ``eval_id``, with their outputs and images."""
    def keyed(report: EvalReport) -> dict[tuple[str, int], CaseResult]:
        seen: dict[str, int] = {}
        out: dict[tuple[str, int], CaseResult] = {}
        for case in report.cases:
            seen[case.eval_id] = seen.get(case.eval_id, 0) + 1
            out[(case.eval_id, seen[case.eval_id])] = case
        return out

    cases_a, cases_b = keyed(a), keyed(b)
    pairs = []
    for key in [*cases_a, *(k for k in cases_b if k not in cases_a)]:
        ca, cb = cases_a.get(key), cases_b.get(key)
        out_a = _output(ca) if ca is not None else None
        out_b = _output(cb) if cb is not None else None
        missing = None
        if ca is None or cb is None:
            missing = f"only in {'A' if cb is None else 'B'}"
        elif out_a is None or out_b is None:
            side, case = ("A", ca) if out_a is None else ("B", cb)
            missing = f"no output in {side} ({case.status.value})"
        present = ca if ca is not None else cb
        assert present is not None
        key_text = present.eval_id if key[1] == 1 else f"{present.eval_id}#{key[1]}"
        media, media_error = _media_of(ca, cb, present.case)
        pairs.append(CasePair(present.eval_id, present.label, present.case, out_a, out_b,
                              missing, key_text, media, media_error, (a.run_dir, b.run_dir)))
    return pairs


def _shown(pair: CasePair) -> dict[str, Any]:
    """What a PairOutcome says of its pair, whatever the judge made of it."""
    return {"eval_id": pair.eval_id, "name": pair.name, "pair_key": pair.key,
            "user_input": content_text(pair.case.input) if pair.case is not None else None,
            "output_a": pair.output_a, "output_b": pair.output_b, "media": pair.media.refs()}


async def _judged(pair: CasePair, judge: JudgeConfig | JudgePanel,
                  criterion: PairCriterion, both_orders: bool,
                  gate: asyncio.Semaphore) -> PairOutcome:
    case = pair.case
    common = _shown(pair)
    if pair.missing is not None:
        return PairOutcome(**common, status="not_compared", reason=pair.missing)
    if pair.media_error is not None:
        return PairOutcome(**common, status="judge_error",
                           reason=f"JUDGE_ERROR: {pair.media_error}")
    async with gate:
        try:
            # The bytes are read only now, a pair at a time, and only for a pair the judge is
            # asked about: a stored run's images stay on disk until then.
            media = pair.media if not pair.asks_judge else await asyncio.to_thread(
                pair.media.with_bytes, run_dirs=pair.run_dirs)
        except ContentError as exc:
            return PairOutcome(**common, status="judge_error", reason=f"JUDGE_ERROR: {exc}")
        asked: dict[str, Any] = {
            "output_a": pair.output_a or "", "output_b": pair.output_b or "",
            "user_input": common["user_input"], "both_orders": both_orders,
            "cache_group": case_cache_group(case) if case is not None else None,
            "media": media}
        try:
            if isinstance(judge, JudgePanel):  # its members resolved already
                verdict = await judge_pair_by_panel(judge, criterion, members=judge.members,
                                                    owner="compare", **asked)
            else:
                verdict = await judge_pair(judge, criterion, **asked)
        except (JudgeUnavailable, ContentError) as exc:  # a judge without vision, too
            spent = getattr(exc, "token_usage", None)
            return PairOutcome(**common, status="judge_error", reason=f"JUDGE_ERROR: {exc}",
                               error_usage=spent if isinstance(spent, TokenUsage) else None)
    return PairOutcome(**common, status=verdict.preferred, reason=verdict.reason,
                       verdict=verdict)


def refuse_blind_judges(judge: JudgeConfig | JudgePanel, pairs: Sequence[CasePair]) -> None:
    """Before the first request: refuse, in one line, a judge (or panel member) that takes text
    only when a pair to be judged holds images or PDFs (every such pair would fail)."""
    from referee.content._vision import _VISION_HINT, takes_images
    from referee.judge.providers import rules_for

    held = next((p for p in pairs if p.asks_judge and p.media), None)
    if held is None:
        return
    members = judge.members if isinstance(judge, JudgePanel) else [judge]
    for member in members:
        rules = rules_for(member.provider).content_rules
        if rules is None or not takes_images(rules, member.model):
            media = [*held.media.case, *held.media.a, *held.media.b]
            kinds = " and ".join(sorted({f"{part.type}s" for part in media}))
            raise ContentError(f"compare: judge {member.provider}/{member.model} takes text "
                               f"only, and pair {held.name!r} holds {kinds}",
                               expected=_VISION_HINT)


async def compare_runs_async(a: EvalReport, b: EvalReport, criterion: str | None = None, *,
                             rubric: Sequence[str] | None = None,
                             questions: Sequence[str] | None = None,
                             judge: JudgeConfig | JudgePanel | list[JudgeConfig] | None = None,
                             both_orders: bool = True, label_a: str | None = None,
                             label_b: str | None = None, store_in: str | Path | None = None,
                             on_pair: Callable[[PairOutcome, int], None] | None = None,
                             ) -> PairwiseComparison:
    """Judge run ``b``'s output against run ``a``'s, case by case; ``judge`` may be a panel
    (a JudgePanel or a list of JudgeConfigs; also configure()'s or JUDGE_PANEL's), whose
    members each judge every pair.

    With ``store_in`` (run B's directory) each pair is stored as it is judged, under
    ``store_in/comparisons/``, and pairs the judge decided before over the same outputs are
    taken from there instead of asked again. ``on_pair(outcome, total)`` is called as each pair
    is done.
    """
    spec = PairCriterion.of(criterion, rubric, questions, owner="compare")
    chosen = bind_in_layers(check_judge("compare", judge)).asked
    label_a, label_b = label_a or a.name or "A", label_b or b.name or "B"
    pairs = paired(a, b)
    refuse_blind_judges(chosen, pairs)
    stored = None
    if store_in is not None:
        stored = ComparisonFile.open(store_in, {
            "key": comparison_key(a.run_id, b.run_id, spec, chosen, both_orders),
            "run_a": a.run_id, "run_b": b.run_id, "a": label_a, "b": label_b, **spec.to_dict(),
            **judge_header(chosen), "both_orders": both_orders, "total_pairs": len(pairs),
            "created_at": time.time()})
    gate = asyncio.Semaphore(PAIRS_IN_FLIGHT)
    resumed: set[str] = set()

    async def one(position: int, pair: CasePair) -> PairOutcome:
        earlier = stored.reusable(pair.key, pair.hashed("a"), pair.hashed("b")) if stored else None
        if earlier is not None:
            resumed.add(pair.key)
            outcome = PairOutcome(**_shown(pair), status=earlier.data["status"],
                                  reason=earlier.data.get("reason") or "",
                                  verdict=pair_verdict_from(earlier.data["verdict"]))
        else:
            outcome = await _judged(pair, chosen, spec, both_orders, gate)
            if stored is not None:
                stored.record(outcome.to_dict(), position=position, output_a=pair.hashed("a"),
                              output_b=pair.hashed("b"))
        if on_pair is not None:
            on_pair(outcome, len(pairs))
        return outcome

    outcomes = await asyncio.gather(*(one(i, p) for i, p in enumerate(pairs)))
    return PairwiseComparison(label_a=label_a, label_b=label_b, criterion=spec, judge=chosen,
                              both_orders=both_orders, pairs=list(outcomes),
                              resumed=frozenset(resumed),
                              stored_at=stored.path if stored is not None else None,
                              expected_pairs=len(pairs))


def compare_runs(a: EvalReport, b: EvalReport, criterion: str | None = None,
                 **options: Any) -> PairwiseComparison:
    """``compare_runs_async`` from synchronous code."""
    from referee.run.sync import run_sync

    return run_sync(compare_runs_async(a, b, criterion, **options))


def compare_models(cases: Any, model_a: Callable[[str], Any], model_b: Callable[[str], Any],
                   criterion: str | None = None, *, rubric: Sequence[str] | None = None,
                   questions: Sequence[str] | None = None,
                   judge: JudgeConfig | JudgePanel | list[JudgeConfig] | None = None,
                   both_orders: bool = True, save: bool = False, runs_dir: str | Path | None = None,
                   verbose: bool = False,
                   resume: Sequence[str | Path] | None = None) -> PairwiseComparison:
    """Run two model functions over the same cases (an ``EvalSuite``, whose evaluators score
    each run too, or an iterable of ``EvalCase``) and judge their outputs pairwise.

    Each model's run is an ordinary run (stored when ``save=True``), kept on the result as
    ``report_a`` and ``report_b``; the comparison is then stored beside run B, pair by pair.
    ``resume=(RUN_A_DIR, RUN_B_DIR)`` finishes an interrupted call: each run resumes (only its
    unfinished cases run) and only the pairs not judged yet are asked.
    """
    from referee.run.sync import run_sync

    suite = suite_of(cases, "compare_models")
    spec = PairCriterion.of(criterion, rubric, questions,
                            owner="compare_models")  # fail before running

    if resume is not None and (isinstance(resume, (str, bytes, Path)) or len(resume) != 2):
        raise ValueError("compare_models: resume must be (RUN_A_DIR, RUN_B_DIR), the two run "
                         f"directories of the interrupted call; got {resume!r}")

    async def both() -> PairwiseComparison:
        reports = []
        for index, model in enumerate((model_a, model_b)):
            reports.append(await suite.run_async(
                model, verbose=verbose, save=save or resume is not None, runs_dir=runs_dir,
                resume=resume[index] if resume is not None else None))
        stored_b = reports[1].run_dir
        result = await compare_runs_async(
            reports[0], reports[1], spec.text or None, rubric=spec.rubric, questions=spec.questions,
            judge=judge,
            both_orders=both_orders, label_a=getattr(model_a, "__name__", "A"),
            label_b=getattr(model_b, "__name__", "B"), store_in=stored_b)
        result.report_a, result.report_b = reports
        return result

    return run_sync(both())


def suite_of(cases: Any, owner: str) -> Any:
    """``cases`` as an EvalSuite: itself, or a suite without evaluators holding the cases."""
    from referee.run.suite import EvalSuite

    if isinstance(cases, EvalSuite):
        return cases
    if isinstance(cases, (str, bytes)) or not isinstance(cases, Iterable):
        raise TypeError(f"{owner}: cases must be an EvalSuite or an iterable of EvalCase, "
                        f"got {type(cases).__name__}")
    return EvalSuite(owner).add_cases(cases)
