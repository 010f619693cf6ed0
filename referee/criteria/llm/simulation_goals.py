"""SimulationGoalsCriterion: which of the case's goals did a simulated conversation achieve?"""

from __future__ import annotations

import re
from typing import Any

from referee.case import EvalCase
from referee.criteria.llm.caller import NO_PROVIDER_REASONING, is_no_provider_reply, logger
from referee.criteria.llm.prompts import DATA_NOTICE, data_block, json_reply_format
from referee.criteria.llm.templated import ALL_SAMPLES_FAILED, TemplatedLLMCriterion
from referee.errors import JudgeUnavailable
from referee.execution import ExecutionResult
from referee.result import CriterionResult

GOALS_TASK = """\
Below is the transcript of a whole conversation between a user and an AI assistant, and a \
numbered list of goals. For each goal, decide whether it was achieved at any point in the \
conversation, not only in the last message. A goal counts as achieved only if the transcript \
shows it was actually accomplished; an assistant merely promising it is not enough.

Goals:
{goals}"""

_BULLET = re.compile(r"^(?:[-*+•]|\d+[.)]|\[[ xX]?\])\s+")


def parse_goals(text: str) -> list[str]:
    """One goal per non-empty line, list markers removed; a heading line ending in ':' is
    not a goal."""
    lines = [_BULLET.sub("", line.strip()).strip() for line in text.splitlines()]
    goals = [line for line in lines if line]
    if len(goals) > 1 and goals[0].endswith(":"):
        goals = goals[1:]
    return goals


def _goal_numbers(reply: dict[str, Any]) -> list[int]:
    raw = reply.get("achieved")
    if raw is None:
        raise JudgeUnavailable("judge reply has no 'achieved' list of goal numbers")
    items = raw if isinstance(raw, list) else [raw]
    numbers = []
    for item in items:
        if isinstance(item, bool):
            continue
        try:
            numbers.append(int(str(item).strip()))
        except ValueError:
            logger.warning("simulation_goals: ignoring non-numeric goal id %r", item)
    return numbers


class SimulationGoalsCriterion(TemplatedLLMCriterion):
    """``simulation_goals``: achieved goals / all goals, from exactly one judge call.

    ``actual.actual_response`` is the full transcript (as ``UserSimulator`` writes it); goals
    are the lines of the case's last non-empty expected final response. ``details``:
    ``achieved_goals``, ``unachieved_goals``, ``reasoning``, ``reason`` (the same text, as
    documented), ``judge_model``.
    """

    accepts_panel = False  # one call that lists achieved goals: nothing to vote on yet

    name = "simulation_goals"
    description = "LLM-based goal achievement evaluation for UserSimulator conversations"

    def _sample_count(self) -> int:
        return 1  # documented: num_samples is ignored

    def _get_skip_result(self, actual: ExecutionResult,
                         expected: EvalCase) -> CriterionResult | None:
        if not parse_goals(expected.last_expected_response() or ""):
            note = "No goals defined — skipping evaluation"  # 10xgraph's own words
            return self._nothing_to_judge(note, achieved_goals=[], unachieved_goals=[],
                                          reasoning=note, judge_model=self.judge_model_name)
        return None

    def _build_prompt(self, actual: ExecutionResult, expected: EvalCase) -> str:
        goals = parse_goals(expected.last_expected_response() or "")
        numbered = "\n".join(f"{i}. {goal}" for i, goal in enumerate(goals, start=1))
        return "\n\n".join([
            GOALS_TASK.format(goals=numbered),
            DATA_NOTICE,
            data_block("transcript", actual.actual_response),
            json_reply_format([
                ("achieved", "a list of the numbers of the goals that were achieved "
                             "(empty if none)"),
                ("reasoning", "a short explanation covering each goal"),
            ]),
        ])

    def _score_from_reply(self, reply: dict[str, Any]) -> float:
        # The score is counted from the goals in evaluate(); only the fallback carries one.
        return float(reply["score"]) if is_no_provider_reply(reply) else 0.0

    def _collect_extras(self, result_dict: dict[str, Any]) -> dict[str, Any]:
        if is_no_provider_reply(result_dict):
            return {"no_provider": True}
        return {"achieved": _goal_numbers(result_dict)}

    def _details(self, achieved: list[str], unachieved: list[str], reasoning: str
                 ) -> dict[str, Any]:
        return {"achieved_goals": achieved, "unachieved_goals": unachieved,
                "reasoning": reasoning, "reason": reasoning,
                "judge_model": self.judge_model_name}

    async def evaluate(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        skip = self._get_skip_result(actual, expected)
        if skip is not None:
            return skip
        goals = parse_goals(expected.last_expected_response() or "")
        if not (actual.actual_response or "").strip():
            return self._result(0.0, self._details(
                [], goals, "The conversation transcript is empty, so no goal was achieved."))
        try:
            batch = await self._run_samples(self._build_prompt(actual, expected))
        except Exception as exc:
            logger.exception("%s evaluation failed", self.name)
            return self._error(f"{type(exc).__name__}: {exc}",
                               "judge" if isinstance(exc, JudgeUnavailable) else "evaluator")
        scores, reasonings, extras, token_usage = batch
        if not scores:
            failures: list[Exception] = getattr(batch, "failures", [])
            failed = self._all_samples_failed(failures, token_usage,
                                              getattr(batch, "sample_replies", []))
            failed.details.update(achieved_goals=[], unachieved_goals=[])
            if failures:  # the one call's exception, as 10xgraph reports it
                failed.error = f"{ALL_SAMPLES_FAILED}: {type(failures[0]).__name__}: {failures[0]}"
            return failed
        if extras[0].get("no_provider"):
            details = self._details([], [], NO_PROVIDER_REASONING)
            details["judge_unavailable"] = True
            return self._result(scores[0], details, token_usage)
        numbers = {n for n in extras[0]["achieved"] if 1 <= n <= len(goals)}
        achieved = [g for i, g in enumerate(goals, start=1) if i in numbers]
        unachieved = [g for i, g in enumerate(goals, start=1) if i not in numbers]
        details = self._details(achieved, unachieved, reasonings[0])
        details["sample_replies"] = getattr(batch, "sample_replies", [])
        return self._result(len(achieved) / len(goals), details, token_usage)
