"""The judge reliability check of the multivon-style EvalSuite API.

When a judged criterion's resolved judge has ``reliability_check`` (``configure()``, the
environment, or the evaluator's own ``judge=``), a finished run draws ``reliability_sample``
of its cases (at most all of them), asks each such criterion's judge again on the stored
output, and records how often the pass/fail repeated as ``EvalReport.judge_reliability``.

The re-asks go through the judge layer like any judged evaluation, but never through the reply
cache (``fresh_replies``): a replayed reply would always agree. The draw is seeded with the
run id, so a rerun or a resume draws the same cases. A pair with an error or a skip on either
side is left out and counted; deterministic criteria are never asked again (they always agree).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from referee.criteria.base import Criterion, criterion_label
from referee.judge.client import fresh_replies
from referee.record import (
    CaseResult,
    CriterionReliability,
    EvalReport,
    JudgeReliabilityCheck,
    criterion_status,
)
from referee.result import CriterionResult, unique_labels
from referee.run.engine import Engine
from referee.usage import TokenUsage


@dataclass(frozen=True)
class _Checked:
    index: int  # in the engine's criteria
    label: str


def _checked_criteria(criteria: Sequence[Criterion],
                      samples: Mapping[str, int]) -> list[_Checked]:
    labels = unique_labels([criterion_label(c) for c in criteria])
    return [_Checked(i, label) for i, label in enumerate(labels) if label in samples]


def _comparable(result: CriterionResult | None) -> bool:
    return (result is not None and not result.skipped
            and not criterion_status(result).is_error)


async def check_judge_reliability(report: EvalReport, engine: Engine,
                                  samples: Mapping[str, int]) -> None:
    """Re-ask a seeded sample of ``report``'s cases and set ``judge_reliability`` and
    ``judge_reliability_check`` on it; nothing when no criterion's judge asks for the check.

    ``samples``: by criterion label, the reliability_sample of each criterion whose judge has
    reliability_check, as the run resolved it (``RunDescription.reliability_samples``); the
    largest is drawn."""
    checked = _checked_criteria(engine.criteria, samples)
    sample_size = max(samples.values(), default=0)
    cases = report.cases
    if not checked or not len(cases):
        return
    seed = report.run_id
    drawn = sorted(random.Random(seed).sample(range(len(cases)), min(sample_size, len(cases))))
    tallies = {c.label: CriterionReliability() for c in checked}
    sampled = [cases[i] for i in drawn]
    slots = asyncio.Semaphore(engine.concurrency)  # as many cases at once as the run scored

    async def ask(case: CaseResult) -> list[CriterionResult | None]:
        async with slots:
            return await _ask_again(engine, case, _first_run(case), checked)

    with fresh_replies():  # the tasks below copy this context: none of them reads the cache
        again = await asyncio.gather(*(ask(case) for case in sampled))
    for case, results in zip(sampled, again):
        first = {r.criterion: r for r in _first_run(case).criterion_results}
        for item, second in zip(checked, results):
            tally = tallies[item.label]
            if second is not None:
                tally.token_usage = TokenUsage.total([tally.token_usage, second.token_usage])
            original = first.get(item.label)
            if _comparable(original) and _comparable(second):
                assert original is not None and second is not None
                tally.compared += 1
                tally.agreed += original.passed == second.passed
            else:
                tally.left_out += 1
    check = JudgeReliabilityCheck(
        seed=seed, sample_size=sample_size,
        sampled_cases=[case.eval_id for case in sampled], criteria=tallies)
    report.judge_reliability_check = check
    report.judge_reliability = check.agreement
    for label, usage in engine.preparation_usage.items():  # prepared only now (a remote backend)
        report.preparation_token_usage.setdefault(label, usage)


def _first_run(case: CaseResult) -> CaseResult:
    """The run whose output is judged again and whose verdicts the re-asks are compared with:
    the case itself, or its first run for a case run several times."""
    return case.run_results[0] if case.run_results else case


async def _ask_again(engine: Engine, case: CaseResult, first: CaseResult,
                     checked: list[_Checked]) -> list[CriterionResult | None]:
    """Each checked criterion's verdict asked again on ``first``'s stored output; None for
    each when the case has no output to judge (its model failed)."""
    execution = first.execution or case.execution
    if case.case is None or execution is None or execution.error:
        return [None] * len(checked)
    return list(await engine.score_again(case.case, execution, [c.index for c in checked]))
