"""What a run's judge cascades did (referee/judge/cascade.py), summed from its results.

Per cascaded criterion: how many judged results escalated and why, which stage answered, what
each stage spent, what the strong judge alone would have spent, and how often the strong judge
agreed with the cheap one on the audited sample. Read from each result's
``details["cascade"]``, so a stored run (and a resumed one) reports the same.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from referee.record import CaseResult, EvalReport
from referee.usage import TokenUsage


def run_cascades(report: EvalReport) -> dict[str, dict[str, Any]]:
    """``cascade_summary`` of the report's cases, read only when the run's judge description
    names a cascade (a streamed run's cases are read from disk, and most runs have none)."""
    if not _names_cascade(report.judge):
        return {}
    return cascade_summary(report.cases)


def _names_cascade(judge: Any) -> bool:
    if isinstance(judge, dict):
        return "cascade" in judge or any(_names_cascade(v) for v in judge.values())
    return False


def cascade_summary(cases: Iterable[CaseResult]) -> dict[str, dict[str, Any]]:
    """By criterion: the cascade's counts and spend; {} when no criterion was cascaded."""
    tallies: dict[str, _Tally] = {}
    for case in cases:
        for result in case.criterion_results:
            record = (result.details or {}).get("cascade")
            if isinstance(record, dict):
                tallies.setdefault(result.criterion, _Tally()).add(record)
    return {name: tally.summary() for name, tally in tallies.items()}


class _Tally:
    def __init__(self) -> None:
        self.judged = 0
        self.escalated = 0
        self.reasons: Counter[str] = Counter()
        self.answered_by: Counter[str] = Counter()
        self.stage_labels: dict[int, str] = {}
        self.stage_asked: Counter[int] = Counter()
        self.stage_usage: dict[int, list[TokenUsage]] = {}
        self.strong_alone: list[TokenUsage] = []
        self.audited = 0
        self.agreed = 0
        self.strong = ""

    def add(self, record: dict[str, Any]) -> None:
        self.judged += 1
        self.strong = str(record.get("strong") or self.strong)
        self.escalated += bool(record.get("escalated"))
        self.reasons.update(str(r) for r in record.get("reasons") or [])
        self.answered_by[str(record.get("answered_by"))] += 1
        for stage in record.get("stages") or []:
            index = int(stage.get("stage", 0))
            self.stage_labels[index] = str(stage.get("judge"))
            self.stage_asked[index] += 1
            self.stage_usage.setdefault(index, []).append(
                TokenUsage.model_validate(stage.get("token_usage") or {}))
        self.strong_alone.append(TokenUsage.model_validate(record.get("strong_alone") or {}))
        audit = record.get("audit")
        if isinstance(audit, dict):
            self.audited += 1
            self.agreed += bool(audit.get("agreed"))

    def summary(self) -> dict[str, Any]:
        stages = [{"stage": i, "judge": self.stage_labels[i], "asked": self.stage_asked[i],
                   "token_usage": _usage(self.stage_usage[i]).model_dump(mode="json")}
                  for i in sorted(self.stage_labels)]
        spent = _usage(u for usages in self.stage_usage.values() for u in usages)
        alone = _usage(self.strong_alone)
        saved: dict[str, Any] = {
            "input_tokens": alone.input_tokens - spent.input_tokens,
            "output_tokens": alone.output_tokens - spent.output_tokens,
            "requests": alone.requests - spent.requests,
            "cost_usd": (alone.cost_usd - spent.cost_usd
                         if alone.cost_usd is not None and spent.cost_usd is not None else None),
        }
        return {
            "strong": self.strong,
            "judged": self.judged,
            "escalated": self.escalated,
            "escalation_rate": self.escalated / self.judged if self.judged else None,
            "reasons": dict(self.reasons),
            "answered_by": dict(self.answered_by),
            "stages": stages,
            "token_usage": spent.model_dump(mode="json"),
            "strong_alone": alone.model_dump(mode="json"),
            "saved": saved,
            "audit": {"audited": self.audited, "agreed": self.agreed,
                      "agreement": self.agreed / self.audited if self.audited else None},
        }


def _usage(usages: Iterable[TokenUsage]) -> TokenUsage:
    return TokenUsage.total(usages) or TokenUsage()


def cascade_lines(report: EvalReport) -> list[str]:
    """The console's lines on the run's judge cascades; none when nothing was cascaded."""
    lines = []
    for name, s in run_cascades(report).items():
        reasons = ", ".join(f"{reason} {n}" for reason, n in sorted(s["reasons"].items()))
        rate = s["escalation_rate"]
        head = (f"Judge cascade, {name}: {s['escalated']} of {s['judged']} escalated"
                + (f" ({rate:.0%}{': ' + reasons if reasons else ''})" if rate is not None
                   else ""))
        spend = "; ".join(f"{st['judge']} asked {st['asked']}x, "
                          f"{_tokens(st['token_usage'])}" for st in s["stages"])
        saved = s["saved"]["cost_usd"]
        strong = s["strong"] or "the strong judge"
        lines.append(f"{head}; {spend}; in all {_tokens(s['token_usage'])} against "
                     f"{_tokens(s['strong_alone'])} for {strong} alone (estimated)"
                     + (f": saved ${saved:.4f}" if saved is not None else ""))
        audit = s["audit"]
        if audit["audited"]:
            lines.append(f"  audit: the strong judge agreed on {audit['agreed']} of "
                         f"{audit['audited']} sampled confident cases "
                         f"({audit['agreement']:.0%})")
    return lines


def _tokens(usage: dict[str, Any]) -> str:
    text = f"{int(usage.get('input_tokens', 0)) + int(usage.get('output_tokens', 0))} tokens"
    cost = usage.get("cost_usd")
    return text + (f" (${cost:.4f})" if cost is not None else "")
