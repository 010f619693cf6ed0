"""deepeval runner, executed with the benchmark virtualenv's interpreter.

deepeval's nearest equivalents of the four W1 evaluators: FaithfulnessMetric,
HallucinationMetric, AnswerRelevancyMetric, and GEval with a correctness criterion standing in
for AnswerAccuracy (deepeval has no QAG answer-accuracy metric). Settings are deepeval's
defaults: ``evaluate()`` with ``AsyncConfig(max_concurrent=20)``, metrics in async mode, the
judge through ``GPTModel(base_url=...)``; telemetry is switched off. W2 is not run: deepeval's
deterministic agent metrics need its tracing layer and do not cover ROUGE or keyword checks.
"""

from __future__ import annotations

import json
import os

from benchmarks.measure import RunnerResult, Stopwatch, peak_rss_kb, runner_args, write_result
from benchmarks.workloads import cases_for

# Must be set before deepeval is imported: no telemetry, no prompts, no .env discovery.
os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "1")
os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")
os.environ.setdefault("DEEPEVAL_NO_INSPECT_PROMPT", "1")
os.environ.setdefault("DEEPEVAL_GRPC_LOGGING", "0")
os.environ.setdefault("ERROR_REPORTING", "0")
# evaluate() gives the whole run one budget (180 s per task + a 27 s buffer by default) and
# aborts past it: a 1,000-case W4 run needs longer at the default concurrency. Lifting that cap
# changes no concurrency setting; it only lets the run finish so its time can be measured.
os.environ.setdefault("DEEPEVAL_DISABLE_TIMEOUTS", "1")


def main() -> None:
    args = runner_args(__doc__ or "")
    if args.workload == "agent":
        raise SystemExit("deepeval runs only the RAG workloads (see the module docstring)")
    if args.cache_dir:
        # deepeval keeps its cache under the working directory (.deepeval/).
        os.makedirs(args.cache_dir, exist_ok=True)
        os.chdir(args.cache_dir)
    from deepeval import evaluate
    from deepeval.evaluate.configs import CacheConfig, DisplayConfig
    from deepeval.metrics import (
        AnswerRelevancyMetric,
        FaithfulnessMetric,
        GEval,
        HallucinationMetric,
    )
    from deepeval.models import GPTModel
    from deepeval.test_case import LLMTestCase, LLMTestCaseParams

    result = RunnerResult(system="deepeval", workload=args.workload, cases=args.cases)
    judge = GPTModel(model="gpt-4o-mini", base_url=args.base_url, api_key="sk-loopback")
    metrics = [
        FaithfulnessMetric(model=judge),
        HallucinationMetric(model=judge),
        AnswerRelevancyMetric(model=judge),
        GEval(name="AnswerAccuracy", model=judge,
              criteria="The actual output states the same facts as the expected output.",
              evaluation_steps=["Compare the facts of the actual output with the expected output.",
                                "Penalise any contradiction."],
              evaluation_params=[LLMTestCaseParams.INPUT, LLMTestCaseParams.ACTUAL_OUTPUT,
                                 LLMTestCaseParams.EXPECTED_OUTPUT]),
    ]
    data = cases_for(args.workload, args.cases)
    test_cases = [LLMTestCase(input=c["input"], actual_output=c["output"],
                              expected_output=c["expected_output"], context=c["context"],
                              retrieval_context=c["context"]) for c in data]
    result.settings = ("evaluate() defaults: AsyncConfig(max_concurrent=20), async metrics, "
                       + ("CacheConfig(use_cache=True)" if args.cache_dir else "no cache reads")
                       + ", DEEPEVAL_DISABLE_TIMEOUTS=1 (its 207 s run budget aborts 1,000 cases)")
    result.notes.append("AnswerAccuracy row uses GEval (correctness criterion, fixed steps)")
    result.rss_baseline_kb = peak_rss_kb()

    with Stopwatch() as watch:
        evaluation = evaluate(
            test_cases, metrics,
            display_config=DisplayConfig(show_indicator=False, print_results=False,
                                         inspect_after_run=False),
            cache_config=CacheConfig(use_cache=bool(args.cache_dir)),
        )
    result.wall_s, result.cpu_s = watch.wall_s, watch.cpu_s

    with open(args.report, "w") as fh:
        json.dump(evaluation.model_dump(mode="json"), fh)
    for test in evaluation.test_results:
        errors_before = result.errored_evaluations
        for m in test.metrics_data or []:
            result.evaluations += 1
            result.passed_evaluations += bool(m.success)
            result.errored_evaluations += bool(m.error)
        result.errored_cases += result.errored_evaluations > errors_before
    write_result(result, args.report, args.out)


if __name__ == "__main__":
    main()
