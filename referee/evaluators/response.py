"""Evaluators of the answer itself: Relevance, Coherence, AnswerAccuracy."""

from __future__ import annotations

from referee.case import EvalCase
from referee.evaluators.qag import (
    QAGEvaluator,
    Question,
    input_block,
    output_block,
    reference_block,
)
from referee.execution import ExecutionResult


class Relevance(QAGEvaluator):
    """Does the output address what the input asked? Needs ``input``; no context required.

    Threshold: calibrated for the resolved judge model unless ``threshold=`` is given.
    """

    name = "relevance"
    calibration_key = "relevance"
    required_fields = ("input",)

    def questions(self, actual: ExecutionResult, expected: EvalCase) -> list[Question]:
        blocks = (input_block(expected), output_block(actual))
        return [
            Question("Does the model output respond to the question or request in the user "
                     "input?", True, blocks),
            Question("Does the model output stay on the subject of the user input throughout?",
                     True, blocks),
            Question("Is the model output mostly generic boilerplate, evasion or filler rather "
                     "than a response to this particular user input?", False, blocks),
            Question("Does the model output address every part of what the user input asks "
                     "for?", True, blocks),
        ]


class Coherence(QAGEvaluator):
    """Is the output clear, well structured and logically sound?"""

    name = "coherence"

    def questions(self, actual: ExecutionResult, expected: EvalCase) -> list[Question]:
        blocks = (input_block(expected), output_block(actual))
        return [
            Question("Does the model output move from one point to the next in a clear, "
                     "logical order?", True, blocks),
            Question("Does the model output contradict itself anywhere?", False, blocks),
            Question("Is every sentence of the model output understandable on a first "
                     "reading?", True, blocks),
            Question("Does the model output contain abrupt jumps, unfinished thoughts or "
                     "needlessly repeated passages?", False, blocks),
        ]


class AnswerAccuracy(QAGEvaluator):
    """Is the output factually correct against ``expected_output``? Paraphrase is fine.

    Requires ``expected_output``.
    """

    name = "answer_accuracy"
    required_fields = ("expected_output",)

    def questions(self, actual: ExecutionResult, expected: EvalCase) -> list[Question]:
        blocks = (input_block(expected), reference_block(expected), output_block(actual))
        return [
            Question("Does the model output give the same answer as the reference answer, "
                     "allowing for different wording?", True, blocks),
            Question("Does the model output contain any factual statement that contradicts the "
                     "reference answer?", False, blocks),
            Question("Does the model output include every key fact of the reference answer?",
                     True, blocks),
            Question("Would a subject-matter expert holding the reference answer accept the "
                     "model output as a correct answer to the user input?", True, blocks),
        ]
