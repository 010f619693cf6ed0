"""A judge cascade against the strong judge alone: spend, and agreement with the strong judge.

    PYTHONPATH=$PWD python3 -m benchmarks.cascade                      # 400 cases, seed 32
    PYTHONPATH=$PWD python3 -m benchmarks.cascade --cases 1000 --seed 7 --json results.json

Every case has a known truth (pass with probability 0.6, seeded). Two scripted judges on the
scripted judge server (the real OpenAI SDK over loopback) score ResponseMatchCriterion
(threshold 0.5, one sample) with known error rates:

- ``strong-judge``: TPR 0.95, TNR 0.95; its scores are confident (within 0.25 of 0 or 1).
- ``cheap-judge``: TPR 0.85, TNR 0.80; a right answer is near the threshold (0.4-0.6) 15% of
  the time, a wrong one 60% of the time (a weak judge is unsure where it errs, as measured
  judges are; on the same side of the threshold as its verdict either way).

The same cases are scored, in one run each, by the strong judge alone, the cheap judge alone,
and cascades (margin 0.1; margin with a 10% audit; margin plus the cheap judge's calibration,
whose TNR 0.80 is below min_tnr 0.85, so its passes escalate). Per configuration: judge requests,
prompt tokens and billable tokens per case, the cost at the prices below, the escalation rate,
agreement of the verdicts with the strong judge alone, and accuracy against the truth.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from referee import CriterionConfig, EvalCase, EvalSuite
from referee.criteria.llm import ResponseMatchCriterion
from referee.evaluators.calibration import CalibrationEntry, CalibrationFile
from referee.judge import set_price
from referee.judge.cascade import JudgeCascade
from referee.report.cascade import cascade_summary
from referee.testing import ScriptedJudgeServer

THRESHOLD = 0.5
PRICES = {"cheap-judge": (0.15, 0.60), "strong-judge": (3.00, 15.00)}  # USD per 1M in, out
RATES = {"cheap-judge": (0.85, 0.80), "strong-judge": (0.95, 0.95)}  # TPR, TNR
NEAR_WHEN_RIGHT = {"cheap-judge": 0.15, "strong-judge": 0.0}
NEAR_WHEN_WRONG = {"cheap-judge": 0.60, "strong-judge": 0.0}


@dataclass(frozen=True)
class Script:
    """Each case's truth and each judge's score, drawn once from the seed."""

    truth: list[bool]
    scores: dict[str, list[float]]


def script(cases: int, seed: int) -> Script:
    rng = random.Random(seed)
    truth = [rng.random() < 0.6 for _ in range(cases)]
    scores: dict[str, list[float]] = {}
    for model, (tpr, tnr) in RATES.items():
        judged = []
        for passes in truth:
            right = rng.random() < (tpr if passes else tnr)
            says_pass = passes if right else not passes
            near = rng.random() < (NEAR_WHEN_RIGHT if right else NEAR_WHEN_WRONG)[model]
            if near:
                score = rng.uniform(0.5, 0.6) if says_pass else rng.uniform(0.4, 0.49)
            else:
                score = rng.uniform(0.75, 0.98) if says_pass else rng.uniform(0.02, 0.25)
            judged.append(round(score, 3))
        scores[model] = judged
    return Script(truth, scores)


def responder(plan: Script):
    def reply(request: Any) -> str:
        found = re.search(r"Question (\d+):", request.prompt)
        index = int(found.group(1)) if found else 0
        score = plan.scores[request.model][index]
        return json.dumps({"score": score, "reasoning": "scripted"})
    return reply


def calibration_file(directory: Path) -> str:
    tpr, tnr = RATES["cheap-judge"]
    entry = CalibrationEntry(evaluator="response_match_score", judge_provider="openai",
                             judge_model="cheap-judge", question_set="-", threshold=THRESHOLD,
                             metric="f1", n=200, date="2026-12-07", data_fingerprint="bench",
                             tpr=tpr, tnr=tnr, positives=100, negatives=100)
    path = directory / "calibration.json"
    path.write_text(CalibrationFile(entries=[entry]).model_dump_json(), encoding="utf-8")
    return str(path)


def measure(name: str, judge: Any, plan: Script) -> dict[str, Any]:
    count = len(plan.truth)
    cases = [EvalCase(input=f"Question {i}: is the answer right?", expected_output="right",
                      eval_id=f"case-{i}") for i in range(count)]
    criterion = ResponseMatchCriterion(CriterionConfig(threshold=THRESHOLD, num_samples=1),
                                       judge=judge)
    report = EvalSuite(name).add_cases(cases).add_evaluators(criterion).run(
        lambda question: "an answer", verbose=False, save=False)
    verdicts = {c.case_id: c.criterion_results[0].passed for c in report.cases}
    ordered = [verdicts[f"case-{i}"] for i in range(count)]
    usage = report.token_usage
    row: dict[str, Any] = {
        "config": name, "cases": count, "errors": report.errors,
        "requests": usage.requests, "prompt_tokens_per_case": usage.input_tokens / count,
        "billable_tokens_per_case": (usage.input_tokens + usage.output_tokens) / count,
        "cost_usd": usage.cost_usd,
        "accuracy": sum(v == t for v, t in zip(ordered, plan.truth)) / count,
        "verdicts": ordered,
    }
    summary = cascade_summary(report.cases).get("response_match_score")
    if summary is not None:
        row["escalation_rate"] = summary["escalation_rate"]
        row["reasons"] = summary["reasons"]
        row["audit"] = summary["audit"]
    return row


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=400)
    parser.add_argument("--seed", type=int, default=32)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    os.environ["REFEREE_CACHE"] = "0"
    for model, (given, taken) in PRICES.items():
        set_price(model, given, taken)
    plan = script(args.cases, args.seed)
    with ScriptedJudgeServer(responder(plan), prompt_cache=False) as server, \
            tempfile.TemporaryDirectory() as scratch:
        cheap = server.judge_config(model="cheap-judge")
        strong = server.judge_config(model="strong-judge")
        margin = JudgeCascade([cheap, strong], escalate_on=["error", "unknown", "margin"])
        configs: list[tuple[str, Any]] = [
            ("strong alone", strong),
            ("cheap alone", cheap),
            ("cascade: margin 0.1", margin),
            ("cascade: margin 0.1, audit 10%", margin.model_copy(
                update={"audit_rate": 0.1, "audit_seed": args.seed})),
            ("cascade: margin 0.1 + calibration", JudgeCascade(
                [cheap, strong], min_tpr=0.8, min_tnr=0.85,
                calibration_file=calibration_file(Path(scratch)))),
        ]
        rows = [measure(name, judge, plan) for name, judge in configs]
    baseline = rows[0]
    for row in rows:
        row["agreement_with_strong"] = sum(
            a == b for a, b in zip(row["verdicts"], baseline["verdicts"])) / len(plan.truth)
        row["cost_vs_strong"] = (row["cost_usd"] / baseline["cost_usd"]
                                 if row["cost_usd"] is not None and baseline["cost_usd"] else None)
    print(f"{len(plan.truth)} cases, seed {args.seed}, threshold {THRESHOLD}; prices per 1M "
          f"tokens in/out: " + ", ".join(f"{m} ${p[0]}/${p[1]}" for m, p in PRICES.items()))
    header = (f"{'configuration':<36}{'requests':>9}{'prompt tok/case':>16}"
              f"{'billable tok/case':>18}{'cost $':>9}{'x strong':>9}{'escalated':>10}"
              f"{'agree w/ strong':>16}{'accuracy':>9}")
    print(header)
    for row in rows:
        escalated = row.get("escalation_rate")
        print(f"{row['config']:<36}{row['requests']:>9}{row['prompt_tokens_per_case']:>16.1f}"
              f"{row['billable_tokens_per_case']:>18.1f}{row['cost_usd']:>9.4f}"
              f"{row['cost_vs_strong']:>9.2f}"
              f"{(f'{escalated:.1%}' if escalated is not None else '-'):>10}"
              f"{row['agreement_with_strong']:>16.1%}{row['accuracy']:>9.1%}")
        if row.get("audit", {}).get("audited"):
            audit = row["audit"]
            print(f"{'':<36}audit: strong agreed on {audit['agreed']} of {audit['audited']} "
                  f"sampled confident cases ({audit['agreement']:.1%})")
    result = {"cases": len(plan.truth), "seed": args.seed,
              "rows": [{k: v for k, v in row.items() if k != "verdicts"} for row in rows]}
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
