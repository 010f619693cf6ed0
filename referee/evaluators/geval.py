"""GEval: a holistic 0.0-1.0 score straight from the judge, averaged over runs.

The one judged EvalSuite-style evaluator that is not QAG. A run whose reply carries no usable
score (no JSON object, no number, or a number outside 0.0-1.0) is not a score of zero: it is
left out of the average and disclosed, and when no run yields a score the judge is treated as
unavailable.
"""

from __future__ import annotations

from typing import Any

from referee.case import EvalCase
from referee.evaluators.prompts import JUDGE_SYSTEM, geval_task, material_prefix
from referee.evaluators.qag import JudgeEvaluator, case_blocks, case_cache_group, gather_all
from referee.execution import ExecutionResult
from referee.judge import (
    JudgeConfig,
    get_judge,
    parse_json_object,
    read_score,
    reply_evidence,
    reply_reason,
    unreadable_replies,
)
from referee.judge.cascade import JudgeCascade
from referee.judge.panel import PANEL, JudgePanel, ask_panel, combine_member_scores
from referee.result import CriterionResult
from referee.usage import TokenUsage


def _yields_score(text: str) -> bool:
    return _run_score(text)[0] is not None


def _run_score(text: str) -> tuple[float | None, str]:
    try:
        data = parse_json_object(text, ("score",))
    except ValueError:
        return None, ""
    reason = reply_reason(data)
    return read_score(data.get("score")), reason


class GEval(JudgeEvaluator):
    """Judge-scored criterion on a 0.0-1.0 scale, averaged over ``runs`` judge calls.

    ``threshold`` left out: a calibration file's entry when one applies, else 0.7.
    """

    def __init__(self, criteria: str, name: str = "g_eval", runs: int = 2,
                 judge: JudgeConfig | JudgePanel | JudgeCascade | list[JudgeConfig] | None = None,
                 threshold: float | str | None = None) -> None:
        if not isinstance(criteria, str) or not criteria.strip():
            raise ValueError(f"GEval: criteria must be a non-empty string, got {criteria!r}")
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"GEval: name must be a non-empty string, got {name!r}")
        if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
            raise ValueError(f"GEval: runs must be an integer of at least 1, got {runs!r}")
        super().__init__(threshold=threshold, judge=judge)
        self.criteria = criteria.strip()
        self.name = name
        self.runs = runs

    async def _judged_runs(self, cfg: JudgeConfig, prefix: str, group: str
                           ) -> tuple[float, list[dict[str, Any]], TokenUsage, str]:
        """One judge's ``runs`` calls: its mean score, the runs, what they cost, a reason."""
        judge = get_judge(cfg)
        replies = await gather_all([
            judge.complete(geval_task(self.criteria, index), system=JUDGE_SYSTEM,
                           prompt_prefix=prefix, cache_group=group, json_mode=True,
                           sample_index=index, accept=_yields_score)
            for index in range(self.runs)])
        runs: list[dict[str, Any]] = []
        for index, reply in enumerate(replies):
            score, reason = _run_score(reply.text)
            runs.append({"run": index, "score": score, "reason": reason,
                         "raw_reply": reply_evidence(reply.text), "cached": reply.cached})
        usage = TokenUsage.total([r.usage for r in replies]) or TokenUsage()
        scored = [r for r in runs if r["score"] is not None]
        if not scored:
            raise unreadable_replies(
                replies, f"none of {self.runs} judge run(s) returned a score between 0.0 and "
                "1.0", owner=self.name)
        score = sum(r["score"] for r in scored) / len(scored)
        reasons = [r["reason"] for r in scored if r["reason"]]
        reason = reasons[0] if reasons else f"mean judge score {score:.2f}"
        if len(scored) < self.runs:
            reason += (f" ({self.runs - len(scored)} of {self.runs} run(s) returned no usable "
                       "score — excluded from the average)")
        return score, runs, usage, reason

    async def evaluate(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        cfg = self.judge_config()
        prefix = material_prefix(case_blocks(actual, expected))
        group = case_cache_group(expected)
        panel = self.judge_panel()
        if panel is not None:
            return await self._panel_evaluate(panel, cfg, prefix, group)
        score, runs, usage, reason = await self._judged_runs(cfg, prefix, group)
        details = {
            "reason": reason,
            "criteria": self.criteria,
            "scores": [r["score"] for r in runs],
            "runs": runs,
            "judge_provider": cfg.provider,
            "judge_model": cfg.model,
        }
        return self._scored(cfg, score, details, usage)

    async def _panel_evaluate(self, panel: JudgePanel, cfg: JudgeConfig, prefix: str,
                              group: str) -> CriterionResult:
        async def ask(member: JudgeConfig) -> tuple[tuple[float, list[dict[str, Any]], str],
                                                     TokenUsage]:
            score, runs, usage, reason = await self._judged_runs(member, prefix, group)
            return (score, runs, reason), usage

        answers = await ask_panel(self.name, panel, ask)
        score, reason, summary = combine_member_scores(
            answers, lambda answer: answer[0],
            lambda answer: {"reason": answer[2], "runs": answer[1]})
        details = {
            "reason": reason,
            "criteria": self.criteria,
            "scores": [m["score"] for m in summary["members"] if m["answered"]],
            "judge_provider": PANEL,
            "judge_model": ", ".join(m.label for m in answers.members),
            "panel": summary,
        }
        return self._scored(cfg, score, details, answers.usage)
