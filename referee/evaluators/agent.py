"""multivon-style agent evaluators: they score what an agent did, not only what it said.

The agent's steps come from the run: ``ExecutionResult(agent_trace=[AgentStep, ...])`` (what a
multivon agent records), else the run's tool calls, one step each (what referee's adapters and
trace readers record), else the trace recorded with the case (``EvalCase(agent_trace=...)``).
With none of these, nor any node visit, there is no trace at all; the evaluators that need
one skip it and say so. ``agent_trace=[]`` records a run that was observed
and took no steps.

``ToolCallAccuracy`` is deterministic. The others ask the judge yes/no questions through the
QAG machinery of :mod:`referee.evaluators.qag`: the case's input, the rendered trace and the
output are the shared material of every question, and an evaluator that judges item by item
(each tool call, each step) asks one question per item, naming it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from abc import abstractmethod
from typing import Any

from referee.case import EXPECTS_NO_TOOLS, EvalCase, ToolCall
from referee.criteria.matching import match_in_order
from referee.errors import JudgeUnavailable
from referee.evaluators.deterministic import DeterministicEvaluator
from referee.evaluators.prompts import DataBlock
from referee.evaluators.qag import (
    QAGEvaluator,
    Question,
    ask_each,
    ask_panel_questions,
    case_cache_group,
    context_block,
    input_block,
    output_block,
    reference_block,
)
from referee.execution import AgentStep, ExecutionResult
from referee.judge import JudgeConfig, Verdict
from referee.messages import NOT_RECORDED
from referee.result import CriterionResult
from referee.usage import TokenUsage

__all__ = [
    "AgentMemoryEval",
    "PlanQuality",
    "StepFaithfulness",
    "TaskCompletion",
    "ToolArgumentAccuracy",
    "ToolCallAccuracy",
    "ToolCallNecessity",
    "TrajectoryEfficiency",
]


# multivon's default bound on item-by-item judging (requests per case per evaluator).
DEFAULT_MAX_ITEMS = 8
# TrajectoryEfficiency: what an unrecovered suspected tool failure costs.
RECOVERY_PENALTY = 0.2

NO_TRACE = ("neither this run nor its case carries an agent trace (give the run, or the case, "
            "agent_trace=[...] steps, or let the run record tool calls; agent_trace=[] records "
            "an observed run that took no steps)")


def recorded_steps(actual: ExecutionResult, case: EvalCase) -> list[AgentStep] | None:
    """The agent's steps: the run's own, else those recorded with the case (multivon's
    ``EvalCase(agent_trace=...)``); ``None`` when neither records anything about them."""
    if "agent_trace" in actual.metadata:
        return actual.agent_trace
    if actual.tool_calls:
        return [AgentStep(tool_calls=[call]) for call in actual.tool_calls]
    recorded = case.agent_trace
    if recorded is not None:
        return recorded
    if actual.node_visits:
        return []  # an agent was observed moving through its graph without calling a tool
    return None


def _tool_calls(steps: list[AgentStep]) -> list[ToolCall]:
    return [call for step in steps for call in step.tool_calls]


def _as_json(value: Any) -> str:
    # sort_keys: the same call renders byte-identically, so the judge cache and the provider's
    # prompt cache see one prompt; default=repr: whatever a tool returned can be shown.
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=repr)


def render_trace(steps: list[AgentStep]) -> str:
    """The trace as the judge reads it: steps and tool calls numbered, so questions can name
    them; every argument and the full result of each call."""
    calls = _tool_calls(steps)
    lines = [f"({len(steps)} step(s), {len(calls)} tool call(s))"]
    number = 0
    for index, step in enumerate(steps, start=1):
        lines.append(f"Step {index}")
        if step.thought:
            lines.append(f"  Thought: {step.thought}")
        for call in step.tool_calls:
            number += 1
            arguments = NOT_RECORDED if call.args is None else _as_json(call.args)
            lines.append(f"  Tool call {number}: {call.name}({arguments})")
            result = "(no result recorded)" if call.result is None else _as_json(call.result)
            lines.append(f"    Result: {result}")
        if step.output:
            lines.append(f"  Output: {step.output}")
    return "\n".join(lines)


def trace_block(steps: list[AgentStep]) -> DataBlock:
    return DataBlock("AGENT TRACE", render_trace(steps))


def _agent_blocks(actual: ExecutionResult, expected: EvalCase,
                  steps: list[AgentStep] | None) -> tuple[DataBlock, ...]:
    # Every trace evaluator shows the same material in the same order, so all the questions
    # that the agent evaluators ask about one case share one cacheable prefix.
    if not steps:
        return (input_block(expected), output_block(actual))
    return (input_block(expected), trace_block(steps), output_block(actual))


class ToolCallAccuracy(DeterministicEvaluator):
    """Did the agent call the tools the case expects (``expected_tool_calls``)?

    Unordered (default): the fraction of the expected tool names that were called. With
    ``require_order=True``: the expected names that were called in their order (the longest
    order-preserving match, so extra calls in between cost nothing and a reordering does), over
    the number expected. Unexpected tools are reported; with ``penalize_unexpected=True`` they
    also count in the denominator. ``expected_tool_calls=[]`` asserts that no tool is called.

    Skipped, not scored, when the case expects nothing or the run carries no trace.
    """

    name = "tool_call_accuracy"
    description = "The agent called the expected tools"

    def __init__(self, require_order: bool = False, threshold: float = 0.7, *,
                 penalize_unexpected: bool = False) -> None:
        super().__init__(threshold)
        self.require_order = require_order
        self.penalize_unexpected = penalize_unexpected

    def evaluate_sync(self, actual: ExecutionResult, case: EvalCase) -> CriterionResult:
        expected = [call.name for call in case.expected_tool_trajectory]
        if not expected and case.metadata.get(EXPECTS_NO_TOOLS) != []:
            return self._skipped("ToolCallAccuracy requires the case's expected_tool_calls (or "
                                 "expected_tool_calls=[] to assert that no tool is called); "
                                 "this case has none — skipped, not scored")
        steps = recorded_steps(actual, case)
        if steps is None:
            return self._skipped(f"ToolCallAccuracy: {NO_TRACE} — skipped, not scored")
        called = [call.name for call in _tool_calls(steps)]
        if not expected:
            if not called:
                return self._verdict(1.0, "Called no tools, as expected (expected_tool_calls=[])",
                                     called=[], expected=[], missing=[], unexpected=[])
            return self._verdict(0.0, f"Expected no tool calls, got: {called}", called=called,
                                 expected=[], missing=[], unexpected=called)
        unexpected = [name for name in called if name not in expected]
        if self.require_order:
            outcome = match_in_order(called, expected, lambda a, e: a == e)
            paired = {i for i, _ in outcome.pairs}
            matched = len(paired)
            unpaired = [name for i, name in enumerate(expected) if i not in paired]
            out_of_order = [name for name in unpaired if name in called]
            missing = [name for name in unpaired if name not in called]
            denominator = len(expected) + (len(unexpected) if self.penalize_unexpected else 0)
        else:
            wanted = list(dict.fromkeys(expected))
            matched = sum(1 for name in wanted if name in called)
            missing = [name for name in wanted if name not in called]
            unexpected = list(dict.fromkeys(unexpected))
            out_of_order = []
            denominator = len(wanted) + (len(unexpected) if self.penalize_unexpected else 0)
        lines = [f"Called: {called}", f"Expected: {expected}"]
        if missing:
            lines.append(f"Missing tools: {missing}")
        if out_of_order:
            lines.append(f"Called out of order: {out_of_order}")
        if unexpected:
            lines.append(f"Unexpected tools: {unexpected}")
        if self.penalize_unexpected:
            lines.append("(strict mode: unexpected tools penalized)")
        return self._verdict(matched / denominator, "\n".join(lines), called=called,
                             expected=expected, missing=missing, out_of_order=out_of_order,
                             unexpected=unexpected)


class AgentJudgeEvaluator(QAGEvaluator):
    """A judged agent evaluator: the trace is read from the run; threshold 0.7 by default."""

    # Whether a run whose trace is empty (observed, no steps) is skipped rather than judged.
    needs_steps = True

    def missing_input(self, actual: ExecutionResult, expected: EvalCase) -> str | None:
        missing = super().missing_input(actual, expected)
        if missing is not None or not self.needs_steps:
            return missing
        if not recorded_steps(actual, expected):
            return f"{type(self).__name__}: {NO_TRACE} — skipped, not scored"
        return None


class _ItemJudge(AgentJudgeEvaluator):
    """Judges a trace item by item (each tool call, or each step): one question per item,
    score = the fraction judged as expected. A trace with more than ``max_items`` items is
    skipped whole, never judged in part."""

    item_word = "items"
    # The question about one item, formatted with its 1-based ``number`` and its ``label``;
    # the material is added by ``questions``.
    question_template: str

    def __init__(self, threshold: float | str | None = None, judge: JudgeConfig | None = None,
                 *, max_items: int = DEFAULT_MAX_ITEMS, batch: bool | str = False) -> None:
        if isinstance(max_items, bool) or not isinstance(max_items, int) or max_items < 1:
            raise ValueError(f"{type(self).__name__}: max_items must be a positive integer, "
                             f"got {max_items!r}")
        super().__init__(threshold=threshold, judge=judge, batch=batch)
        self.max_items = max_items

    @abstractmethod
    def items(self, steps: list[AgentStep]) -> list[str]:
        """What is judged one by one, each by the name a question calls it."""

    def item_question(self, number: int, label: str) -> Question:
        return Question(self.question_template.format(number=number, label=label))

    def _over_limit(self, actual: ExecutionResult, expected: EvalCase) -> int | None:
        count = len(self.items(recorded_steps(actual, expected) or []))
        return count if count > self.max_items else None

    def _limit_reason(self, count: int) -> str:
        return (f"{type(self).__name__}: the trace has {count} {self.item_word}, more than "
                f"max_items={self.max_items}; none was judged (raise max_items to judge them "
                "all) — skipped, not scored")

    def missing_input(self, actual: ExecutionResult, expected: EvalCase) -> str | None:
        missing = super().missing_input(actual, expected)
        if missing is not None:
            return missing
        steps = recorded_steps(actual, expected) or []
        if not self.items(steps):
            return (f"{type(self).__name__}: the trace has no {self.item_word} to judge — "
                    "skipped, not scored")
        count = self._over_limit(actual, expected)
        return None if count is None else self._limit_reason(count)

    async def evaluate(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        count = self._over_limit(actual, expected)
        if count is None:
            return await super().evaluate(actual, expected)
        skipped = self._skipped(self._limit_reason(count))
        skipped.details.update(requested_items=count, measured_items=0,
                               max_items=self.max_items)
        return skipped

    def questions(self, actual: ExecutionResult, expected: EvalCase) -> list[Question]:
        steps = recorded_steps(actual, expected) or []
        blocks = _agent_blocks(actual, expected, steps)
        return [Question(q.text, q.expect_yes, blocks)
                for q in (self.item_question(number, label)
                          for number, label in enumerate(self.items(steps), start=1))]

    def question_set(self) -> str:
        # The questions depend on the trace; what identifies them is their wording.
        probe = self.item_question(1, "-")
        text = json.dumps([probe.text, probe.expect_yes], ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def extra_details(self, actual: ExecutionResult, expected: EvalCase) -> dict[str, Any]:
        count = len(self.items(recorded_steps(actual, expected) or []))
        return {"requested_items": count, "measured_items": count, "max_items": self.max_items}


class _ToolCallJudge(_ItemJudge):
    """One question per tool call, naming it by its number and tool."""

    item_word = "tool calls"

    def items(self, steps: list[AgentStep]) -> list[str]:
        return [call.name for call in _tool_calls(steps)]


class ToolArgumentAccuracy(_ToolCallJudge):
    """Were each tool call's arguments appropriate and well formed for the task? One judge
    question per call. Skipped when the run has no trace or no tool calls."""

    name = "tool_argument_accuracy"

    question_template = ("Are the arguments of tool call {number} ({label}) in the agent trace "
                         "appropriate and well formed for that tool, given the task in the user "
                         "input?")


class ToolCallNecessity(_ToolCallJudge):
    """Was each tool call needed, given the task and the calls before it (not redundant, not
    made just in case)? One judge question per call. Skipped when the run has no trace or no
    tool calls."""

    name = "tool_call_necessity"

    question_template = ("Was tool call {number} ({label}) in the agent trace necessary for the "
                         "task in the user input, given the tool calls made before it and their "
                         "results, rather than redundant or made just in case?")


class StepFaithfulness(_ItemJudge):
    """Does each step follow from the task and the steps before it, without contradicting them
    or inventing information? One judge question per step. Skipped without a trace."""

    name = "step_faithfulness"
    item_word = "steps"

    def items(self, steps: list[AgentStep]) -> list[str]:
        return [f"step {number}" for number in range(1, len(steps) + 1)]

    question_template = ("Does step {number} of the agent trace follow logically from the task "
                         "in the user input and the steps before it, without contradicting them "
                         "or introducing information they do not support?")


class PlanQuality(AgentJudgeEvaluator):
    """Is the agent's plan, the trace as a whole, complete, ordered and efficient? Skipped
    without a trace."""

    name = "plan_quality"

    def questions(self, actual: ExecutionResult, expected: EvalCase) -> list[Question]:
        blocks = _agent_blocks(actual, expected, recorded_steps(actual, expected))
        return [
            Question("Does the agent's plan, as shown in the agent trace, address every part of "
                     "the task in the user input?", True, blocks),
            Question("Are the steps of the agent trace in a logical order?", True, blocks),
            Question("Does the agent trace contain redundant or unnecessary steps?", False,
                     blocks),
            Question("Does each step of the agent trace follow logically from the one before "
                     "it?", True, blocks),
            Question("Would an expert consider the agent's plan an efficient way to do the "
                     "task?", True, blocks),
        ]


class TaskCompletion(AgentJudgeEvaluator):
    """Did the agent complete the task? Judged on the final output (with the trace, when the
    run has one); a run without a trace is judged on its output alone."""

    name = "task_completion"
    needs_steps = False

    def questions(self, actual: ExecutionResult, expected: EvalCase) -> list[Question]:
        blocks = _agent_blocks(actual, expected, recorded_steps(actual, expected))
        return [
            Question("Does the model output complete the task in the user input?", True, blocks),
            Question("Does the model output address every requirement of the task in the user "
                     "input?", True, blocks),
            Question("Is the model output a complete response, not partial or cut off?", True,
                     blocks),
            Question("Did the agent fail to complete the task or end with an error?", False,
                     blocks),
        ]


class TrajectoryEfficiency(AgentJudgeEvaluator):
    """Did the agent get there without detours, repeats or needless steps? When tool results
    contain the word "error" (suspected failures, a text heuristic), the judge is also asked
    whether the agent recovered; if not, 0.2 is taken off the score. Skipped without a trace."""

    name = "trajectory_efficiency"

    def questions(self, actual: ExecutionResult, expected: EvalCase) -> list[Question]:
        blocks = _agent_blocks(actual, expected, recorded_steps(actual, expected))
        return [
            Question("Did the agent complete the task without unnecessary detours or repeated "
                     "steps?", True, blocks),
            Question("Is the number of steps in the agent trace proportionate to how complex the "
                     "task is?", True, blocks),
            Question("Does the agent trace show the same tool called more than once with "
                     "identical arguments?", False, blocks),
        ]

    @staticmethod
    def suspected_failures(steps: list[AgentStep]) -> int:
        return sum(1 for call in _tool_calls(steps)
                   if call.result is not None and "error" in str(call.result).lower())

    async def evaluate(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        failures = self.suspected_failures(recorded_steps(actual, expected) or [])
        if failures == 0 or self.missing_input(actual, expected) is not None:
            return await super().evaluate(actual, expected)
        cfg = self.judge_config()
        recovery = Question(
            f"{failures} tool result(s) in the agent trace contain the word 'error' and may be "
            "failures. Did the agent notice them and recover appropriately (by retrying, using "
            "an alternative, or reporting the failure clearly)?", True,
            _agent_blocks(actual, expected, recorded_steps(actual, expected)))
        scored, asked = await asyncio.gather(
            super().evaluate(actual, expected),
            self._ask_recovery(cfg, recovery, case_cache_group(expected)),
            return_exceptions=True)
        if isinstance(asked, BaseException):
            raise asked
        record, recovery_usage = asked
        if isinstance(scored, JudgeUnavailable):
            scored.token_usage = TokenUsage.total([scored.token_usage, recovery_usage])
        if isinstance(scored, BaseException):
            raise scored
        return self._with_recovery(cfg, scored, record, failures, recovery_usage)

    async def _ask_recovery(self, cfg: JudgeConfig, recovery: Question, group: str
                            ) -> tuple[dict[str, Any], TokenUsage]:
        panel = self.judge_panel()
        if panel is not None:
            (record,), answers = await ask_panel_questions(self.name, panel, [recovery],
                                                           cache_group=group)
            return record, answers.usage
        (record,), replies = await ask_each(cfg, [recovery], cache_group=group)
        return record, replies[0].usage

    def _with_recovery(self, cfg: JudgeConfig, scored: CriterionResult, record: dict[str, Any],
                       failures: int, usage: TokenUsage) -> CriterionResult:
        details = dict(scored.details)
        details.update(recovery=record, suspected_failures=failures)
        score = scored.score
        if record["verdict"] == Verdict.UNKNOWN.name.lower():
            note = (f"recovery from {failures} suspected tool failure(s) UNKNOWN — score not "
                    "adjusted")
        elif record["matched"]:
            note = f"recovered from {failures} suspected tool failure(s)"
        else:
            score = max(0.0, score - RECOVERY_PENALTY)
            note = (f"did not recover from {failures} suspected tool failure(s): "
                    f"-{RECOVERY_PENALTY}")
        details["reason"] = f"{details.get('reason', '')}; {note}"
        _penalise_members(details, record)
        total = TokenUsage.total([scored.token_usage, usage])
        return self._scored(cfg, score, details, total)


class AgentMemoryEval(AgentJudgeEvaluator):
    """Does the agent use what earlier sessions established (the case's ``context``) correctly:
    recalled accurately, nothing invented, stale facts not reused? With ``expected_output``,
    also whether the output includes that information. Requires ``context``."""

    name = "agent_memory"
    required_fields = ("context",)
    needs_steps = False

    def questions(self, actual: ExecutionResult, expected: EvalCase) -> list[Question]:
        blocks: tuple[DataBlock, ...] = (context_block(expected), input_block(expected),
                                         output_block(actual))
        questions = [
            Question("The context holds what earlier sessions with this user established. Does "
                     "the model output use that information correctly?", True, blocks),
            Question("Does the model output claim anything about earlier sessions that the "
                     "context does not contain?", False, blocks),
            Question("Does the model output avoid relying on information in the context that "
                     "later information in the context superseded?", True, blocks),
        ]
        if (expected.expected_output or "").strip():
            with_reference = (*blocks, reference_block(expected))
            questions.append(Question("Does the model output include the information in the "
                                      "reference answer?", True, with_reference))
        return questions


def _penalise_members(details: dict[str, Any], record: dict[str, Any]) -> None:
    """Each panel member's own score takes the penalty when that member said the agent did not
    recover, as its score alone would."""
    panel = details.get("panel")
    said = record.get("judges") or {}
    if not isinstance(panel, dict):
        return
    for entry in panel.get("members", []):
        word = said.get(entry.get("judge"))
        if entry.get("score") is not None and word in ("yes", "no") \
                and word != record["expected"]:
            entry["score"] = max(0.0, entry["score"] - RECOVERY_PENALTY)
