"""HallucinationCriterion: is the response grounded in what the agent was given?"""

from __future__ import annotations

import json
from typing import Any

from referee.case import EvalCase, ToolCall
from referee.criteria.llm.prompts import (
    DATA_NOTICE,
    REASONING_FIELD,
    data_block,
    json_reply_format,
    user_request,
)
from referee.criteria.llm.replies import reply_strings, unique
from referee.criteria.llm.templated import TemplatedLLMCriterion
from referee.execution import ExecutionResult

GROUNDING_TASK = """\
Decide whether the response is grounded in the context: every factual claim it makes (names, \
numbers, dates, outcomes, promises) must be supported by the context. A claim that the context \
contradicts, or that appears nowhere in it, is a hallucination. Restating the user's request, \
asking questions and generic courtesy are not claims. If the context is empty, any specific \
factual claim is unsupported.

Scale: 1.0 means fully grounded, 0.0 means mostly hallucinated."""


def _render(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _tool_calls(actual: ExecutionResult) -> list[ToolCall]:
    # Runners fill the flat list; per-turn lists stand in only when it was left empty.
    if actual.tool_calls:
        return list(actual.tool_calls)
    return [call for turn in actual.turns for call in turn.tool_calls]


def grounding_context(actual: ExecutionResult, case: EvalCase) -> str:
    """Every tool call result, then ``metadata["context"]``, then the case's own ``context``."""
    parts = [f"Tool {call.name} returned:\n{_render(call.result)}"
             for call in _tool_calls(actual) if call.result is not None]
    reference = case.metadata.get("context")
    if reference:
        parts.append(f"Reference context:\n{_render(reference)}")
    for chunk in case.context_chunks:
        if chunk != reference:
            parts.append(f"Reference context:\n{chunk}")
    return "\n\n".join(parts)


class HallucinationCriterion(TemplatedLLMCriterion):
    """``hallucinations_v1``: 1.0 is fully grounded.

    ``details``: ``is_grounded`` (``final_score >= threshold``), ``samples``, ``reasonings``,
    ``hallucinations`` (unsupported claims, de-duplicated across samples), ``judge_model``,
    ``reason`` (mean score and the most typical reasoning).
    """

    name = "hallucinations_v1"
    description = "LLM-based hallucination/groundedness detection"

    def _build_prompt(self, actual: ExecutionResult, expected: EvalCase) -> str:
        return "\n\n".join([
            GROUNDING_TASK,
            DATA_NOTICE,
            data_block("context", grounding_context(actual, expected)),
            data_block("user_request", user_request(expected)),
            data_block("response", actual.actual_response),
            json_reply_format([
                ("score", "a number from 0.0 (mostly hallucinated) to 1.0 (fully grounded)"),
                ("is_grounded", "true if every claim is supported, else false"),
                ("hallucinations", "a list of strings, one per unsupported claim (empty if none)"),
                REASONING_FIELD,
            ]),
        ])

    def _collect_extras(self, result_dict: dict[str, Any]) -> dict[str, Any]:
        return {"hallucinations": reply_strings(result_dict, "hallucinations")}

    def _aggregate_extras(self, per_sample: list[dict[str, Any]]) -> dict[str, Any]:
        return {"hallucinations": unique(h for sample in per_sample
                                         for h in sample.get("hallucinations", []))}

    def _build_details(self, scores: list[float], reasonings: list[str],
                       aggregated_extras: dict[str, Any], final_score: float) -> dict[str, Any]:
        return {
            "is_grounded": final_score >= self.threshold,
            "samples": len(scores),
            "reasonings": reasonings,
            "hallucinations": aggregated_extras.get("hallucinations", []),
        }
