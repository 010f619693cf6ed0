"""Retrieval evaluators for RAG: ContextPrecision and ContextRecall."""

from __future__ import annotations

from typing import Any

from referee.case import EvalCase
from referee.evaluators.prompts import DataBlock
from referee.evaluators.qag import (
    QAGEvaluator,
    Question,
    context_block,
    input_block,
    reference_block,
)
from referee.execution import ExecutionResult

MAX_CHUNKS = 8


class ContextPrecision(QAGEvaluator):
    """Are the retrieved chunks relevant to the question? One question per chunk, at most 8.

    ``context`` may be a string (one chunk) or a list of strings. Requires ``context``.
    """

    name = "context_precision"
    required_fields = ("context",)

    def questions(self, actual: ExecutionResult, expected: EvalCase) -> list[Question]:
        user_input = input_block(expected)
        questions = []
        for number, chunk in enumerate(expected.context_chunks[:MAX_CHUNKS], start=1):
            # Each question names its chunk, so the batched prompt stays unambiguous.
            label = f"CONTEXT CHUNK {number}"
            questions.append(Question(
                f"Does context chunk {number} contain information that helps answer the "
                "user input?", True, (user_input, DataBlock(label, chunk))))
        return questions

    def extra_details(self, actual: ExecutionResult, expected: EvalCase) -> dict[str, Any]:
        total = len(expected.context_chunks)
        details: dict[str, Any] = {"chunks_total": total,
                                   "chunks_evaluated": min(total, MAX_CHUNKS)}
        if total > MAX_CHUNKS:
            details["note"] = (f"only the first {MAX_CHUNKS} of {total} context chunks were "
                               "evaluated")
        return details


class ContextRecall(QAGEvaluator):
    """Does the retrieved context hold everything needed for the expected answer?

    Requires ``context`` and ``expected_output``.
    """

    name = "context_recall"
    required_fields = ("context", "expected_output")

    def questions(self, actual: ExecutionResult, expected: EvalCase) -> list[Question]:
        blocks = (input_block(expected), reference_block(expected), context_block(expected))
        return [
            Question("Does the context contain the information needed to arrive at the "
                     "reference answer?", True, blocks),
            Question("Could the reference answer be derived from the context alone, without "
                     "outside knowledge?", True, blocks),
            Question("Is any key fact of the reference answer missing from the context?",
                     False, blocks),
        ]
