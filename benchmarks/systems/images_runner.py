"""Image-case runner (benchmarks.images), executed with the interpreter of the system it runs:
referee's own, or the benchmark virtualenv's for multivon-eval.

Both systems get the same cases (a question about one image, referenced by an absolute
``metadata['image_path']``, which both read) and the same two evaluators, VQAFaithfulness and
DocumentGrounding, at their defaults; both judge caches are on, in ``--cache-dir``, so a
second invocation with the same directory measures what each reply cache saves.

    python -m benchmarks.systems.images_runner --system referee --cases-file cases.json \\
        --provider anthropic --base-url http://127.0.0.1:PORT/... --cache-dir DIR --out out.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import warnings
from typing import Any

from benchmarks.measure import RunnerResult, Stopwatch, peak_rss_kb

# The judge model of each wire: referee's default judge there, named the same for the peer.
MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-haiku-4-5"}


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--system", choices=("referee", "multivon-eval"), required=True)
    parser.add_argument("--cases-file", required=True)
    parser.add_argument("--provider", choices=sorted(MODELS), required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("--out", required=True)
    return parser.parse_args()


def same_suite(suite_class: Any, case_class: Any, evaluators: list[Any], cases: list[dict]
               ) -> tuple[Any, dict[str, str]]:
    """Either library's suite of ``cases`` with ``evaluators``, and each input's answer."""
    suite = suite_class("bench-images")
    suite.add_cases([case_class(input=c["input"], metadata={"image_path": c["image_path"]})
                     for c in cases])
    suite.add_evaluators(*evaluators)
    return suite, {c["input"]: c["output"] for c in cases}


def run_referee(args: argparse.Namespace, cases: list[dict], result: RunnerResult) -> list[list[tuple[str, bool, str]]]:
    os.environ["REFEREE_CACHE_DIR"] = args.cache_dir
    from referee import EvalCase, EvalSuite, JudgeConfig, configure
    from referee.evaluators import DocumentGrounding, VQAFaithfulness

    configure(JudgeConfig(provider=args.provider, model=MODELS[args.provider],
                          base_url=args.base_url, api_key="sk-loopback", cache=True))
    suite, outputs = same_suite(EvalSuite, EvalCase, [VQAFaithfulness(), DocumentGrounding()],
                                cases)
    result.settings = (f"EvalSuite.run defaults, judge cache on, {args.provider} judge "
                       f"{MODELS[args.provider]}")
    result.rss_baseline_kb = peak_rss_kb()
    with Stopwatch() as watch:
        report = suite.run(lambda prompt: outputs[prompt], verbose=False,
                           runs_dir=tempfile.mkdtemp(prefix="referee-bench-images-"))
    result.wall_s, result.cpu_s = watch.wall_s, watch.cpu_s
    return [[("error" if r.error_kind is not None else "skipped" if r.skipped else "scored",
              r.passed, str(r.error or "")) for r in case.criterion_results]
            for case in report.cases]


def run_multivon(args: argparse.Namespace, cases: list[dict], result: RunnerResult) -> list[list[tuple[str, bool, str]]]:
    # Read when its cache is first opened; call_vision's requests bypass it (measured anyway).
    os.environ["MULTIVON_CACHE_DIR"] = args.cache_dir
    from multivon_eval import EvalCase, EvalSuite, JudgeConfig, configure
    from multivon_eval.evaluators.multimodal import DocumentGrounding, VQAFaithfulness

    configure(JudgeConfig(provider=args.provider, model=MODELS[args.provider],
                          base_url=args.base_url if args.provider == "openai" else "",
                          cache=True))
    suite, outputs = same_suite(EvalSuite, EvalCase, [VQAFaithfulness(), DocumentGrounding()],
                                cases)
    result.settings = (f"suite.run defaults (workers=min(8, cases)), SQLite judge cache on, "
                       f"{args.provider} judge {MODELS[args.provider]}")
    result.rss_baseline_kb = peak_rss_kb()
    with warnings.catch_warnings():
        # metadata image paths are deprecated in favour of with_media; the bytes sent are alike.
        warnings.simplefilter("ignore", DeprecationWarning)
        with Stopwatch() as watch:
            report = suite.run(lambda prompt: outputs[prompt], verbose=False)
    result.wall_s, result.cpu_s = watch.wall_s, watch.cpu_s
    return [[((r.metadata or {}).get("error_kind") or
              ("skipped" if (r.metadata or {}).get("skipped") else "scored"), bool(r.passed),
              str((r.metadata or {}).get("error_detail") or ""))
             for r in case.results] for case in report.case_results]


def main() -> None:
    args = _args()
    with open(args.cases_file, encoding="utf-8") as handle:
        cases = json.load(handle)
    result = RunnerResult(system=args.system, workload="images", cases=len(cases))
    outcomes = (run_referee if args.system == "referee" else run_multivon)(args, cases, result)
    errors = {"error", "judge_error", "evaluator_error"}
    for case in outcomes:
        result.evaluations += len(case)
        result.passed_evaluations += sum(passed for _, passed, _ in case)
        failed = [error for status, _, error in case if status in errors]
        result.errored_evaluations += len(failed)
        result.errored_cases += bool(failed)
        for error in failed:
            if error[:160] not in result.notes and len(result.notes) < 3:
                result.notes.append(error[:160])
    result.rss_peak_kb = peak_rss_kb()
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(result.__dict__, handle)


if __name__ == "__main__":
    main()
