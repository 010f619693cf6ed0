"""Evaluators that hold an output to a source: Faithfulness, Hallucination, Summarization."""

from __future__ import annotations

from referee.case import EvalCase
from referee.evaluators.qag import (
    QAGEvaluator,
    Question,
    context_block,
    input_block,
    output_block,
)
from referee.execution import ExecutionResult


class Faithfulness(QAGEvaluator):
    """Is what the output says grounded in the provided context? Requires ``context``.

    Threshold: calibrated for the resolved judge model unless ``threshold=`` is given.
    """

    name = "faithfulness"
    calibration_key = "faithfulness"
    required_fields = ("context",)

    def questions(self, actual: ExecutionResult, expected: EvalCase) -> list[Question]:
        blocks = (input_block(expected), context_block(expected), output_block(actual))
        return [
            Question("Is every factual statement in the model output supported by the context?",
                     True, blocks),
            Question("Does the model output state anything that contradicts the context?",
                     False, blocks),
            Question("Can every specific detail in the model output (numbers, names, dates, "
                     "amounts) be found in the context?", True, blocks),
            Question("Does the model output present outside knowledge or its own assumptions "
                     "as if the context said them?", False, blocks),
        ]


class Hallucination(QAGEvaluator):
    """Does the output introduce claims the context does not support? Requires ``context``.

    Score 1.0 = nothing invented. Threshold: calibrated for the resolved judge model unless
    ``threshold=`` is given.
    """

    name = "hallucination"
    calibration_key = "hallucination"
    required_fields = ("context",)

    def questions(self, actual: ExecutionResult, expected: EvalCase) -> list[Question]:
        # The same material as Faithfulness, so their questions share one cacheable prefix.
        blocks = (input_block(expected), context_block(expected), output_block(actual))
        return [
            Question("Does the model output introduce any claim that is neither stated in nor "
                     "directly implied by the context?", False, blocks),
            Question("Does the model output invent specific details (figures, names, dates, "
                     "sources or quotations) that are absent from the context?", False, blocks),
            Question("Does the model output misstate or distort anything the context says?",
                     False, blocks),
            Question("Would a reader who trusts only the context accept every claim in the "
                     "model output?", True, blocks),
        ]


class Summarization(QAGEvaluator):
    """Does the summary capture the source faithfully, adding and omitting nothing critical?

    Requires ``context`` (the source document).
    """

    name = "summarization"
    required_fields = ("context",)

    def questions(self, actual: ExecutionResult, expected: EvalCase) -> list[Question]:
        blocks = (context_block(expected, "SOURCE DOCUMENT"), output_block(actual, "SUMMARY"))
        return [
            Question("Does the summary contain only information found in the source document?",
                     True, blocks),
            Question("Does the summary cover the main points of the source document?",
                     True, blocks),
            Question("Does the summary leave out information a reader would need to understand "
                     "the source document's main message?", False, blocks),
            Question("Does the summary misrepresent or contradict anything in the source "
                     "document?", False, blocks),
            Question("Is the summary clearly more concise than the source document?",
                     True, blocks),
        ]
