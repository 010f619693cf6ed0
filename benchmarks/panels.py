"""Judge requests and tokens per case of judge panels against one judge, side by side, in one run.

    PYTHONPATH=$PWD python3 -m benchmarks.panels                  # 50 cases, ~120-word outputs
    PYTHONPATH=$PWD python3 -m benchmarks.panels --cases 200 --words 300 --json results.json

``--cases`` cases with outputs of about ``--words`` words are scored through the scripted judge
server (the real OpenAI SDK over loopback) by Coherence (QAG, 4 questions) and GEval (runs=2):

- one judge;
- a panel of three judges (three model names on the server, majority);
- the three-judge panel again with the reply cache on (a rerun);
- Coherence with ``batch=True``, one judge and the three-judge panel;
- Coherence and Relevance in a suite run with ``batch=True`` (a request per evaluator and
  judge) and ``batch="case"`` (one request per case and judge), one judge and the panel;
- ``referee compare``'s pairwise judging of two runs' outputs (both orders), one judge and the
  three-judge panel.

Tokens are what referee's judge layer accounted (the scripted server counts about 4 characters
a token, as referee estimates). Standard library plus referee.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.pairwise import per_case, per_case_table, reports, words
from benchmarks.pairwise import reply as pairwise_reply
from referee import Coherence, EvalCase, EvalSuite, ExecutionResult, GEval, JudgePanel, Relevance
from referee.pairwise import compare_runs_async
from referee.testing import ScriptedJudgeServer
from referee.usage import TokenUsage

CRITERION = "The answer is correct, complete and clearly written."
MODELS = ("judge-a", "judge-b", "judge-c")


def cases(count: int, length: int) -> list[tuple[EvalCase, ExecutionResult]]:
    rng = random.Random(24)
    return [(EvalCase(input=f"Question {i}: {words(rng, 25)}?", eval_id=f"case-{i}"),
             ExecutionResult(actual_response=words(rng, length))) for i in range(count)]


def reply(request: Any) -> str:
    if "RESPONSE 1" in request.prompt:
        return pairwise_reply(request)
    if '"score"' in request.prompt:
        return json.dumps({"score": 0.7, "reason": "Clear and mostly complete."})
    if "Questions:" in request.prompt:
        count = len(re.findall(r"^\d+\. ", request.prompt, re.MULTILINE))
        return json.dumps({"answers": {str(i): "yes" for i in range(1, count + 1)}})
    # Judges that disagree now and then, each the same way on a rerun.
    return random.Random(request.prompt + request.model).choice(["Yes", "Yes", "No"])


async def suite_spend(judge: Any, data: list[tuple[EvalCase, ExecutionResult]],
                      batch: bool | str) -> TokenUsage:
    """Coherence and Relevance in a suite run; with batch="case" the engine shares each
    judge's request across the case's evaluators."""
    outputs = {case.input: out.actual_response for case, out in data}
    suite = EvalSuite("panels-case-batch").add_cases([case for case, _ in data])
    suite.add_evaluators(Coherence(judge=judge, batch=batch),
                         Relevance(judge=judge, batch=batch))
    report = await suite.run_async(lambda prompt: outputs[prompt], verbose=False, save=False)
    return report.token_usage


async def pairwise_spend(judge: Any, count: int, length: int) -> TokenUsage:
    a, b = reports(count, length)
    comparison = await compare_runs_async(a, b, CRITERION, judge=judge)
    return comparison.token_usage


async def spend(evaluator: Any, data: list[tuple[EvalCase, ExecutionResult]]) -> TokenUsage:
    results = await asyncio.gather(*(evaluator.evaluate(out, case) for case, out in data))
    return TokenUsage.total([r.token_usage for r in results])


async def measure(count: int, length: int) -> dict[str, dict[str, float]]:
    data = cases(count, length)
    rows: dict[str, dict[str, float]] = {}
    with ScriptedJudgeServer(reply=reply) as server, tempfile.TemporaryDirectory() as tmp:
        one = server.judge_config(model=MODELS[0])
        panel = JudgePanel(members=[server.judge_config(model=m) for m in MODELS])
        for label, judge in (("one judge", one), ("panel of 3", panel)):
            qag = await spend(Coherence(judge=judge), data)
            geval = await spend(GEval(criteria=CRITERION, judge=judge), data)
            rows[f"{label}: Coherence (4 questions) + GEval (runs=2)"] = per_case(qag + geval,
                                                                                   count)
        cached = JudgePanel(members=[
            m.model_copy(update={"cache": True, "cache_path": str(Path(tmp) / "c.db")})
            for m in panel.members])
        await spend(Coherence(judge=cached), data)
        before = server.request_count
        rerun = await spend(Coherence(judge=cached), data)
        assert server.request_count == before, "a cached rerun sent requests"
        rows["panel of 3: Coherence, rerun from the reply cache"] = per_case(rerun, count)
        for label, judge in (("one judge", one), ("panel of 3", panel)):
            rows[f"{label}: Coherence, batch=True"] = per_case(
                await spend(Coherence(judge=judge, batch=True), data), count)
        for batch in (True, "case"):
            for label, judge in (("one judge", one), ("panel of 3", panel)):
                rows[f"{label}: Coherence + Relevance, batch={batch!r}"] = per_case(
                    await suite_spend(judge, data, batch), count)
        for label, judge in (("one judge", one), ("panel of 3", panel)):
            rows[f"{label}: pairwise A vs B, both orders"] = per_case(
                await pairwise_spend(judge, count, length), count)
    return rows


def main() -> None:
    per_case_table(__doc__ or "", measure)


if __name__ == "__main__":
    main()
