"""The judge bill per case online against the provider's batch API, side by side, in one run.

    PYTHONPATH=$PWD python3 -m benchmarks.batch_api                   # W5, 50 cases
    PYTHONPATH=$PWD python3 -m benchmarks.batch_api --cases 20 --json results.json

W5 (the long-context RAG workload: three ~2,000-character chunks a case, four QAG evaluators)
is scored three ways (one request per question, ``batch=True``, ``batch="case"``), each
through the scripted judge server (online, the real OpenAI SDK, OpenAI's prompt cache
emulated) and through the scripted batch service (``JudgeConfig(batch_api=True)``, the real
SDK's Files and Batch APIs), every case in flight at once (``concurrency=cases``). Costs are at gpt-4o-mini's list price:

- online: what ``benchmarks.billing`` bills the recorded requests (prompt-cache reads at the
  cached rate), the same columns as docs/benchmarks.md's W5 table;
- batch API: what referee's judge layer accounted (``TokenUsage.cost_usd``, at the batch price),
  with no prompt-cache reads at all: a provider's batch may still hit its cache, so this is
  the most a batch run costs.

multivon-eval is not installed here; its W5 bill at gpt-4o-mini, from the run recorded in
docs/benchmarks.md ("The judge bill (W1 and W5)", commit 9e5cc10), is the ratio's base.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.billing import bill
from benchmarks.replies import reply_for
from benchmarks.workloads import long_rag_cases

# docs/benchmarks.md, "The judge bill (W1 and W5)": multivon-eval on W5, $ per 1,000 cases at
# gpt-4o-mini (16 requests and 11,924 prompt tokens a case, OpenAI's prompt cache applied).
MULTIVON_W5_USD_PER_1000 = 1.146
MODEL = "gpt-4o-mini"
MODES: dict[str, bool | str] = {"per question": False, "batch=True": True, "batch='case'": "case"}


def reply(request: Any) -> str:
    """The benchmarks' judge: every system's good answer, for each of referee's prompt shapes."""
    return reply_for(request.body, system=request.system, prompt=request.prompt)


def run_suite(judge: Any, batch: bool | str, cases: list[dict[str, Any]]) -> Any:
    from referee import EvalCase, EvalSuite, configure
    from referee.evaluators import AnswerAccuracy, Faithfulness, Hallucination, Relevance

    configure(judge)
    try:
        suite = EvalSuite("bench-batch-api")
        suite.add_cases([EvalCase(input=c["input"], context=c["context"],
                                  expected_output=c["expected_output"]) for c in cases])
        suite.add_evaluators(Faithfulness(batch=batch), Hallucination(batch=batch),
                             Relevance(batch=batch), AnswerAccuracy(batch=batch))
        outputs = {c["input"]: c["output"] for c in cases}
        # Every case in flight at once: a batch run's cases all wait on the judge together,
        # so they go out in one batch rather than in waves of the default 8.
        return suite.run(lambda prompt: outputs[prompt], verbose=False,
                         concurrency=len(cases),
                         runs_dir=tempfile.mkdtemp(prefix="referee-bench-batch-"))
    finally:
        configure(None)


def measure(count: int) -> list[dict[str, Any]]:
    from referee.testing import ScriptedJudgeServer
    from referee.testing.batch_service import ScriptedBatchService

    os.environ.update(REFEREE_CACHE="0", REFEREE_BATCH_QUIET_S="0.2",
                      REFEREE_BATCH_FIRST_POLL_S="0.05", REFEREE_BATCH_MAX_POLL_S="0.2")
    cases = long_rag_cases(count)
    rows = []
    for mode, batch in MODES.items():
        with ScriptedJudgeServer(reply) as online:
            report = run_suite(online.judge_config("openai", MODEL, structured_output=False),
                               batch, cases)
            online_bill = bill(online.requests)
            assert report.summary.total_token_usage.batch_requests == 0
        with ScriptedBatchService(reply, processing_s=0.2) as service:
            report = run_suite(service.judge_config("openai", MODEL, structured_output=False),
                               batch, cases)
            usage = report.summary.total_token_usage
            batches = service.batches_created
        batch_usd = (usage.cost_usd or 0.0) / count
        rows.append({
            "mode": mode, "cases": count,
            "requests_per_case": usage.requests / count,
            "batch_requests_per_case": usage.batch_requests / count,
            "batches": batches,
            "prompt_tokens_per_case": usage.input_tokens / count,
            "online_usd_per_1000": round(online_bill.cost_usd["openai"] / count * 1000, 3),
            "batch_api_usd_per_1000": round(batch_usd * 1000, 3),
            "batch_api_online_equivalent_usd_per_1000": round(
                (usage.online_cost_usd or 0.0) / count * 1000, 3),
            "batch_vs_online": round(batch_usd * 1000 / (
                online_bill.cost_usd["openai"] / count * 1000), 3),
            "online_vs_multivon": round(online_bill.cost_usd["openai"] / count * 1000
                                        / MULTIVON_W5_USD_PER_1000, 3),
            "batch_api_vs_multivon": round(batch_usd * 1000 / MULTIVON_W5_USD_PER_1000, 3),
        })
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| referee mode | req/case | prompt tokens/case | batches | $ per 1,000 cases online "
             "| $ per 1,000 batch API | batch / online | online / multivon-eval | "
             "batch API / multivon-eval |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['mode']} | {r['requests_per_case']:g} | "
                     f"{r['prompt_tokens_per_case']:,.0f} | {r['batches']} | "
                     f"{r['online_usd_per_1000']:.3f} | {r['batch_api_usd_per_1000']:.3f} | "
                     f"{r['batch_vs_online']:.2f}x | {r['online_vs_multivon']:.2f}x | "
                     f"{r['batch_api_vs_multivon']:.2f}x |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.batch_api", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=50, help="W5 cases (default 50)")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    rows = measure(args.cases)
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
