"""FactualAccuracyCriterion: are the response's factual claims correct?"""

from __future__ import annotations

import json
from typing import Any

from referee.case import EvalCase
from referee.criteria.llm.prompts import (
    DATA_NOTICE,
    REASONING_FIELD,
    SCORE_FIELD,
    data_block,
    json_reply_format,
    user_request,
)
from referee.criteria.llm.replies import reply_strings, unique
from referee.criteria.llm.templated import TemplatedLLMCriterion
from referee.execution import ExecutionResult

WITH_REFERENCE = """\
Check every factual claim in the response against the reference material. A claim that the \
reference contradicts is an error. A claim the reference does not cover is an error only if it \
is false by well-established knowledge. Do not penalise style, brevity or omissions that do \
not make the response wrong."""

WITHOUT_REFERENCE = """\
No reference material is available. Check every factual claim in the response against \
well-established knowledge. Do not penalise style, brevity or claims that cannot be checked; \
penalise claims that are false."""

SCALE = "Scale: 1.0 means every claim is correct, 0.0 means the response is mostly wrong."


def reference_material(case: EvalCase) -> str:
    """The last expected final response, else ``metadata["reference_facts"]`` (str or list)."""
    expected = case.last_expected_response()
    if expected:
        return expected
    facts: Any = case.metadata.get("reference_facts")
    if facts is None:
        return ""
    if isinstance(facts, str):
        return facts
    if isinstance(facts, (list, tuple)):
        return "\n".join(f"- {f if isinstance(f, str) else json.dumps(f, default=str)}"
                         for f in facts)
    return json.dumps(facts, ensure_ascii=False, default=str)


class FactualAccuracyCriterion(TemplatedLLMCriterion):
    """``factual_accuracy_v1``.

    ``details``: ``is_accurate`` (``final_score >= threshold``), ``samples``, ``reasonings``,
    ``errors`` (the claims judged wrong, de-duplicated across samples), ``judge_model``,
    ``reason`` (mean score and the most typical reasoning).
    """

    name = "factual_accuracy_v1"
    description = "LLM-based factual accuracy evaluation"

    def _build_prompt(self, actual: ExecutionResult, expected: EvalCase) -> str:
        reference = reference_material(expected)
        parts = [WITH_REFERENCE if reference else WITHOUT_REFERENCE, SCALE, DATA_NOTICE,
                 data_block("user_request", user_request(expected))]
        if reference:
            parts.append(data_block("reference", reference))
        parts += [
            data_block("response", actual.actual_response),
            json_reply_format([
                SCORE_FIELD,
                ("errors", "a list of strings, one per incorrect claim (empty if none)"),
                REASONING_FIELD,
            ]),
        ]
        return "\n\n".join(parts)

    def _collect_extras(self, result_dict: dict[str, Any]) -> dict[str, Any]:
        return {"errors": reply_strings(result_dict, "errors")}

    def _aggregate_extras(self, per_sample: list[dict[str, Any]]) -> dict[str, Any]:
        return {"errors": unique(e for sample in per_sample for e in sample.get("errors", []))}

    def _build_details(self, scores: list[float], reasonings: list[str],
                       aggregated_extras: dict[str, Any], final_score: float) -> dict[str, Any]:
        return {
            "is_accurate": final_score >= self.threshold,
            "samples": len(scores),
            "reasonings": reasonings,
            "errors": aggregated_extras.get("errors", []),
        }
