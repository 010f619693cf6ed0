"""RougeMatchCriterion: word overlap with the expected answer, no LLM."""

from __future__ import annotations

import re

from referee.case import EvalCase
from referee.criteria.base import SyncCriterion
from referee.execution import ExecutionResult
from referee.result import CriterionResult

_NON_WORD = re.compile(r"[^\w\s]")
_EXCERPT = 500


def unigram_set(text: str) -> set[str]:
    """Lowercased words with punctuation stripped (the 10xgraph-style API): "e-mail" is "email" and
    "don't" is "dont", not two words each. A set, so repeats count once."""
    return set(_NON_WORD.sub("", text.lower()).split())


def rouge1(actual: str, expected: str) -> tuple[float, float, float]:
    """ROUGE-1 (precision, recall, F1) over unigram sets."""
    actual_words, expected_words = unigram_set(actual), unigram_set(expected)
    if not expected_words or not actual_words:
        same = not expected_words and not actual_words
        return (1.0, 1.0, 1.0) if same else (0.0, 0.0, 0.0)
    overlap = len(actual_words & expected_words)
    precision = overlap / len(actual_words)
    recall = overlap / len(expected_words)
    f1 = 0.0 if overlap == 0 else 2 * precision * recall / (precision + recall)
    return precision, recall, f1


class RougeMatchCriterion(SyncCriterion):
    """ROUGE-1 F1 between the response and the last non-empty expected final response.

    ``details``: ``precision``, ``recall``, ``f1``, and the first 500 characters of each response
    (``actual_response``, ``expected_response``). With no expected response the score is 1.0 if
    the agent also produced nothing (whitespace counts as nothing), otherwise 0.5.
    """

    name = "rouge_match"
    reads = ("actual_response",)
    description = "Evaluates response text similarity using ROUGE-1"

    def evaluate_sync(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        actual_response = actual.actual_response
        expected_response = expected.last_expected_response() or ""
        excerpts = {"actual_response": actual_response[:_EXCERPT],
                    "expected_response": expected_response[:_EXCERPT]}
        if not expected_response:
            produced = bool(actual_response.strip())
            return self._result(0.5 if produced else 1.0, {
                **excerpts,
                "note": "No expected response defined",
                "reason": ("No expected response defined; the agent responded anyway."
                           if produced else "No expected response defined and none produced."),
            })
        precision, recall, f1 = rouge1(actual_response, expected_response)
        return self._result(f1, {
            "precision": precision, "recall": recall, "f1": f1, **excerpts,
            "reason": f"ROUGE-1 F1 {f1:.3f} (precision {precision:.3f}, recall {recall:.3f}).",
        })
