"""One system's Faithfulness run against the real judge, for benchmarks.real_judge.

Executed with the interpreter the system is installed in (referee's, or the benchmark
virtualenv's for the peers). Every system judges the same cases (workloads.real_judge_cases:
half of the answers right, half wrong) through the same OpenAI-compatible endpoint, and reports,
per evaluation, whether it was scored, passed or ended in a judge error, and for referee how
many of its questions got a readable verdict. Standard library only besides the system.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from benchmarks.workloads import real_judge_cases


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--system", required=True,
                        choices=("referee", "multivon-eval", "deepeval"))
    parser.add_argument("--batch", default="false", choices=("false", "true", "case"),
                        help="referee only: the QAG mode")
    parser.add_argument("--cases", type=int, required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--slots", type=int, default=4, help="the server's parallel slots")
    parser.add_argument("--out", required=True)
    return parser.parse_args()


def run_referee(args: argparse.Namespace, data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from referee import EvalCase, EvalSuite, JudgeConfig
    from referee.evaluators import Faithfulness
    from referee.testing.llama_server import JUDGE_MAX_TOKENS, JUDGE_TIMEOUT_S

    # The settings referee's llama_judge fixture passes a local server (see docs/benchmarks.md).
    cfg = JudgeConfig(provider="openai", model="smollm2-135m-instruct", base_url=args.base_url,
                      api_key="sk-loopback", api_style="chat", cache=False,
                      timeout=JUDGE_TIMEOUT_S, max_tokens=JUDGE_MAX_TOKENS,
                      max_concurrency=args.slots, max_retries=1)
    batch = {"false": False, "true": True, "case": "case"}[args.batch]
    suite = EvalSuite("real judge")
    suite.add_evaluators(Faithfulness(judge=cfg, batch=batch))
    pairs = [(EvalCase(input=c["input"], context=c["context"], eval_id=f"case-{i}"), c["output"])
             for i, c in enumerate(data)]
    report = suite.run_on_cases(pairs, verbose=False, save=False)
    rows = []
    for case, truth in zip(report.cases, data):
        [result] = case.criterion_results
        questions = result.details.get("questions") or []
        rows.append({"correct": truth["correct"], "scored": result.error is None,
                     "passed": bool(result.passed) if result.error is None else None,
                     "judge_error": result.error_kind == "judge", "asked": len(questions) or 4,
                     "unknown": result.details.get("unknown", 4 if result.error else 0),
                     "error": str(result.error or "")[:160]})
    return rows


def run_multivon(args: argparse.Namespace, data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from multivon_eval import EvalCase, EvalSuite, Faithfulness, JudgeConfig, configure

    configure(JudgeConfig(provider="openai", model="gpt-4o-mini", base_url=args.base_url))
    suite = EvalSuite("real judge")
    suite.add_cases([EvalCase(input=c["input"], context=c["context"]) for c in data])
    suite.add_evaluators(Faithfulness())
    outputs = {c["input"]: c["output"] for c in data}
    report = suite.run(lambda prompt: outputs[prompt], verbose=False)
    rows = []
    for case, truth in zip(report.case_results, data):
        [result] = case.results
        kind = (result.metadata or {}).get("error_kind")
        errored = kind in ("judge_error", "evaluator_error")
        rows.append({"correct": truth["correct"], "scored": not errored,
                     "passed": bool(result.passed) if not errored else None,
                     "judge_error": kind == "judge_error",
                     "error": str(result.reason or "")[:160] if errored else ""})
    return rows


def run_deepeval(args: argparse.Namespace, data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for name, value in (("DEEPEVAL_TELEMETRY_OPT_OUT", "1"), ("DEEPEVAL_DISABLE_DOTENV", "1"),
                        ("DEEPEVAL_NO_INSPECT_PROMPT", "1"), ("ERROR_REPORTING", "0"),
                        ("DEEPEVAL_DISABLE_TIMEOUTS", "1")):
        os.environ.setdefault(name, value)
    from deepeval import evaluate
    from deepeval.evaluate.configs import CacheConfig, DisplayConfig, ErrorConfig
    from deepeval.metrics import FaithfulnessMetric
    from deepeval.models import GPTModel
    from deepeval.test_case import LLMTestCase

    judge = GPTModel(model="gpt-4o-mini", base_url=args.base_url, api_key="sk-loopback")
    cases = [LLMTestCase(input=c["input"], actual_output=c["output"],
                         retrieval_context=c["context"]) for c in data]
    evaluation = evaluate(cases, [FaithfulnessMetric(model=judge)],
                          display_config=DisplayConfig(show_indicator=False, print_results=False,
                                                       inspect_after_run=False),
                          cache_config=CacheConfig(use_cache=False),
                          error_config=ErrorConfig(ignore_errors=True))
    by_input = {test.input: test for test in evaluation.test_results}
    rows = []
    for truth in data:
        test = by_input.get(truth["input"])
        [metric] = (test.metrics_data or [None]) if test is not None else [None]
        errored = metric is None or bool(metric.error)
        rows.append({"correct": truth["correct"], "scored": not errored,
                     "passed": bool(metric.success) if not errored else None,
                     "judge_error": errored,
                     "error": str(metric.error if metric is not None else "no result")[:160]
                     if errored else ""})
    return rows


def main() -> None:
    args = _args()
    data = real_judge_cases(args.cases)
    runner = {"referee": run_referee, "multivon-eval": run_multivon,
              "deepeval": run_deepeval}[args.system]
    started = time.perf_counter()
    rows = runner(args, data)
    wall_s = time.perf_counter() - started
    Path(args.out).write_text(json.dumps({"wall_s": wall_s, "evaluations": rows}))


if __name__ == "__main__":
    main()
