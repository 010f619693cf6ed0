"""multivon-eval runner, executed with the benchmark virtualenv's interpreter.

Settings are multivon-eval's defaults: ``suite.run`` with ``workers=None`` (min(8, cases)
threads, evaluators of a case run one after another, one judge call per question, a new SDK
client per call) and no judge cache unless ``--cache-dir`` turns on its SQLite cache.
"""

from __future__ import annotations

import os

from benchmarks.measure import RunnerResult, Stopwatch, peak_rss_kb, runner_args, write_result
from benchmarks.workloads import AGENT_KEYWORDS, agent_cases, cases_for


def main() -> None:
    args = runner_args(__doc__ or "")
    if args.cache_dir:
        # Read when the cache is first opened, so it must be set before the run starts.
        os.environ["MULTIVON_CACHE_DIR"] = args.cache_dir
    from multivon_eval import (
        AnswerAccuracy,
        EvalCase,
        EvalSuite,
        Faithfulness,
        Hallucination,
        JudgeConfig,
        Relevance,
        configure,
    )
    from multivon_eval.case import AgentStep, ToolCall
    from multivon_eval.evaluators.agent import ToolCallAccuracy
    from multivon_eval.evaluators.deterministic import ROUGE, Contains

    result = RunnerResult(system="multivon-eval", workload=args.workload, cases=args.cases)
    suite = EvalSuite(f"bench-{args.workload}")
    if args.workload != "agent":
        configure(JudgeConfig(provider="openai", model="gpt-4o-mini", base_url=args.base_url,
                              cache=bool(args.cache_dir)))
        data = cases_for(args.workload, args.cases)
        suite.add_cases([EvalCase(input=c["input"], context=c["context"],
                                  expected_output=c["expected_output"]) for c in data])
        suite.add_evaluators(Faithfulness(), Hallucination(), Relevance(), AnswerAccuracy())
    else:
        data = agent_cases(args.cases)
        suite.add_cases([
            EvalCase(
                input=c["input"], expected_output=c["expected_output"],
                expected_tool_calls=[call["name"] for call in c["expected_tool_calls"]],
                agent_trace=[AgentStep(tool_calls=[ToolCall(name=call["name"], arguments=call["args"])
                                                   for call in c["actual_tool_calls"]],
                                       output=c["output"])],
            )
            for c in data
        ])
        # multivon-eval has no deterministic argument check (ToolArgumentAccuracy is judged), so its
        # W2 row checks ordered tool names only: strictly less work than referee's row.
        suite.add_evaluators(ToolCallAccuracy(require_order=True), ROUGE(threshold=0.3),
                             Contains(AGENT_KEYWORDS))
        result.notes.append("trajectory without argument check (no deterministic equivalent)")
    outputs = {c["input"]: c["output"] for c in data}
    result.settings = ("suite.run defaults: workers=min(8, cases) threads, evaluators serial per case, "
                       + ("SQLite judge cache on" if args.cache_dir else "no judge cache"))
    result.rss_baseline_kb = peak_rss_kb()

    with Stopwatch() as watch:
        report = suite.run(lambda prompt: outputs[prompt], verbose=False)
    result.wall_s, result.cpu_s = watch.wall_s, watch.cpu_s
    if args.workload == "agent":
        with Stopwatch() as direct:
            for evaluator in suite._evaluators:
                for case in suite._cases:
                    evaluator.evaluate(case, outputs[case.input])
        result.criteria_only_evaluations = len(suite._cases) * len(suite._evaluators)
        result.criteria_only_cpu_s = direct.cpu_s

    report.save_json(args.report)
    for case in report.case_results:
        errors_before = result.errored_evaluations
        for r in case.results:
            result.evaluations += 1
            result.passed_evaluations += bool(r.passed)
            kind = (r.metadata or {}).get("error_kind")
            result.errored_evaluations += kind in ("judge_error", "evaluator_error")
        result.errored_cases += result.errored_evaluations > errors_before
    write_result(result, args.report, args.out)


if __name__ == "__main__":
    main()
