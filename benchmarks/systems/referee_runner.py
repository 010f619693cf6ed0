"""referee runner, executed with the interpreter referee is installed in.

W1/W3/W4/W6 use ``EvalSuite.run`` at its defaults (8 cases at a time, the judge layer's adaptive
concurrency per endpoint, all questions of a case in flight together, the SQLite judge
cache on, the run stored to a run directory); ``--batched`` switches every evaluator to
``batch=True``. W2 uses ``AgentEvaluator`` with the four deterministic criteria and its default
``EvalConfig`` settings (sequential cases).
"""

from __future__ import annotations

import os
import tempfile

from benchmarks.measure import RunnerResult, Stopwatch, peak_rss_kb, runner_args, write_result
from benchmarks.workloads import AGENT_KEYWORDS, agent_cases, cases_for, rag_cases


def run_rag(args, result: RunnerResult):
    from referee import EvalCase, EvalSuite, JudgeConfig, configure
    from referee.evaluators import AnswerAccuracy, Faithfulness, Hallucination, Relevance
    from referee.judge import DEFAULT_MODELS

    # The scripted server stands in for the provider's own API, which gets no reply schema by
    # default (a loopback base URL would otherwise count as a local server that does one).
    configure(JudgeConfig(provider=args.provider, model=DEFAULT_MODELS[args.provider],
                          base_url=args.base_url, api_key="sk-loopback",
                          cache=bool(args.cache_dir), structured_output=args.structured_output))
    data = cases_for(args.workload, args.cases)
    batch = "case" if args.case_batched else args.batched
    suite = EvalSuite(f"bench-{args.workload}")
    suite.add_cases([EvalCase(input=c["input"], context=c["context"],
                              expected_output=c["expected_output"]) for c in data])
    suite.add_evaluators(Faithfulness(batch=batch), Hallucination(batch=batch),
                         Relevance(batch=batch), AnswerAccuracy(batch=batch))
    outputs = {c["input"]: c["output"] for c in data}
    if args.warmup_cases:
        warm = rag_cases(args.warmup_cases, start=len(data) + 1_000_000)
        warmup = EvalSuite("bench-warmup")
        warmup.add_cases([EvalCase(input=c["input"], context=c["context"],
                                   expected_output=c["expected_output"]) for c in warm])
        warmup.add_evaluators(*[type(e)(batch=batch) for e in suite.evaluators])
        warm_outputs = {c["input"]: c["output"] for c in warm}
        warmup.run(lambda prompt: warm_outputs[prompt], verbose=False,
                   runs_dir=tempfile.mkdtemp(prefix="referee-bench-runs-"))
        result.notes.append(f"{args.warmup_cases} warm-up cases run first, untimed")
    result.settings = ("EvalSuite.run defaults: 8 cases at once, adaptive judge concurrency "
                       "(starts at 8, ceiling 64 per endpoint), "
                       "questions of a case concurrent, "
                       + ("judge cache on" if args.cache_dir else "judge cache off")
                       + {"case": ", case-level batch", True: ", batched QAG",
                          False: ", one request per question"}[batch]
                       + f", {args.provider} judge {DEFAULT_MODELS[args.provider]}")
    result.rss_baseline_kb = peak_rss_kb()
    runs_dir = tempfile.mkdtemp(prefix="referee-bench-runs-")
    with Stopwatch(args.profile) as watch:
        report = suite.run(lambda prompt: outputs[prompt], verbose=False, runs_dir=runs_dir)
    return report, watch


def run_agent(args, result: RunnerResult):
    from referee import (
        AgentEvaluator,
        CriteriaConfig,
        CriterionConfig,
        EvalCase,
        EvalConfig,
        ExecutionResult,
        MatchType,
        ToolCall,
    )

    data = agent_cases(args.cases)
    cases = [EvalCase.single_turn(c["input"], c["expected_output"],
                                  expected_tool_trajectory=[ToolCall(**t) for t in c["expected_tool_calls"]])
             for c in data]
    actual = {c["input"]: ExecutionResult(actual_response=c["output"],
                                          tool_calls=[ToolCall(**t) for t in c["actual_tool_calls"]])
              for c in data}

    async def agent(user_message: str) -> ExecutionResult:
        return actual[user_message]

    config = EvalConfig(criteria=CriteriaConfig(
        trajectory=CriterionConfig.trajectory(threshold=1.0, match_type=MatchType.IN_ORDER,
                                              check_args=True),
        tool_name_match=CriterionConfig.tool_name_match(threshold=1.0),
        rouge_match=CriterionConfig.rouge_match(threshold=0.3),
        contains_keywords=CriterionConfig.contains_keywords(keywords=AGENT_KEYWORDS),
    ))
    evaluator = AgentEvaluator(agent, config, runs_dir=tempfile.mkdtemp(prefix="referee-bench-runs-"))
    result.settings = "AgentEvaluator defaults (sequential cases), async agent, run stored"
    result.rss_baseline_kb = peak_rss_kb()
    with Stopwatch() as watch:
        report = evaluator.evaluate_sync(cases)
    pairs = [(actual[case.input], case) for case in cases]
    with Stopwatch() as direct:
        for criterion in evaluator.criteria:
            for execution, case in pairs:
                criterion.evaluate_sync(execution, case)
    result.criteria_only_evaluations = len(pairs) * len(evaluator.criteria)
    result.criteria_only_cpu_s = direct.cpu_s
    return report, watch


def main() -> None:
    args = runner_args(__doc__ or "")
    if args.cache_dir:
        os.environ["REFEREE_CACHE_DIR"] = args.cache_dir
    name = ("referee (case-batched)" if args.case_batched
            else "referee (batched)" if args.batched else "referee")
    result = RunnerResult(system=name, workload=args.workload, cases=args.cases)
    report, watch = (run_agent if args.workload == "agent" else run_rag)(args, result)
    result.wall_s, result.cpu_s = watch.wall_s, watch.cpu_s
    result.thread_cpu_s = watch.thread_cpu_s
    report.to_file(args.report)
    usage = report.summary.total_token_usage
    result.live_judge_requests = usage.requests  # a cache hit counts as cached_requests only
    for case in report.cases:
        errors_before = result.errored_evaluations
        for r in case.criterion_results:
            result.evaluations += 1
            result.passed_evaluations += bool(r.passed)
            result.errored_evaluations += r.error_kind is not None
        result.errored_cases += result.errored_evaluations > errors_before
    write_result(result, args.report, args.out)


if __name__ == "__main__":
    main()
