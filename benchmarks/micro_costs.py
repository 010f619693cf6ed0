"""Per-call costs behind the figures quoted in docs/benchmarks.md ("fifth look") and in code
comments: the reply cache's key, re-checking a result a model or criterion handed back, and a
looking a judge up by model name (once per criterion and run since issue 29, which bound the
judge before the first case and dropped issue 23's memo).

    python -m benchmarks.micro_costs

Each figure is the mean of many calls (``timeit``), in microseconds, on this machine's CPU.
"""

from __future__ import annotations

import timeit


def _mean_us(call, number: int = 20_000) -> float:
    return timeit.timeit(call, number=number) / number * 1e6


def main() -> int:
    from referee._strict import checked_again, validated
    from referee.case import ToolCall
    from referee.execution import ExecutionResult
    from referee.judge.config import JudgeConfig, judge_config_for_model
    from referee.judge.reply_cache import _KEY_ENCODER, _key_json
    from referee.result import CriterionResult

    request = {"provider": "openai", "model": "gpt-4o-mini", "base_url": "http://127.0.0.1/v1",
               "api_style": "chat", "prompt": "x" * 900 + " Question?", "system": "s" * 278,
               "json_mode": False, "temperature": 0.0, "max_tokens": 16, "sample_index": 0}
    local = "http://127.0.0.1:8080/v1"  # an OpenAI-compatible server: no key needed
    result = CriterionResult(criterion="tool_name_match", score=1.0, passed=True, threshold=1.0,
                             details={"reason": "ok", "matched": ["a", "b"]})
    execution = ExecutionResult(actual_response="hello", latency_s=0.1,
                                tool_calls=[ToolCall(name="a", args={"x": 1}),
                                            ToolCall(name="b", args={})])
    rows = [
        ("cache key JSON, stdlib encoder", lambda: _KEY_ENCODER.encode(request)),
        ("cache key JSON, as written now (orjson)", lambda: _key_json(request)),
        ("CriterionResult validated again", lambda: validated(CriterionResult, dict(result), "r")),
        ("CriterionResult checked_again", lambda: checked_again(result, "r")),
        ("ExecutionResult validated again",
         lambda: validated(ExecutionResult, dict(execution), "e")),
        ("ExecutionResult checked_again", lambda: checked_again(execution, "e")),
        ("judge by model name, JudgeConfig built",
         lambda: JudgeConfig(provider="openai", model="gpt-4o-mini", base_url=local,
                             api_style="chat", temperature=0.3, max_tokens=1024, timeout=30.0)),
        ("judge by model name, judge_config_for_model",
         lambda: judge_config_for_model("openai/gpt-4o-mini", base_url=local)),
    ]
    for label, call in rows:
        print(f"{label:<42} {_mean_us(call):7.1f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
