"""multivon's evaluator surface: QAG judge evaluators, GEval, CustomRubric, CheckEvaluator,
the vision evaluators (VQAFaithfulness, DocumentGrounding), and the deterministic evaluators
of ``referee.evaluators.deterministic``.

Every evaluator here is a criterion (``async evaluate(actual, expected) -> CriterionResult``)
with a friendlier constructor; called by hand the multivon way, ``evaluate(case, output)``, it
returns its result (``_multivon.py``). Faithfulness, Hallucination and Relevance take their default
threshold from the calibration table for the resolved judge model (see ``threshold_table()``).
"""

from referee.evaluators import deterministic as _deterministic
from referee.evaluators.agent import (
    AgentMemoryEval,
    PlanQuality,
    StepFaithfulness,
    TaskCompletion,
    ToolArgumentAccuracy,
    ToolCallAccuracy,
    ToolCallNecessity,
    TrajectoryEfficiency,
)
from referee.evaluators.calibration import threshold_table
from referee.evaluators.check import CheckEvaluator
from referee.evaluators.custom_rubric import CustomRubric
from referee.evaluators.deterministic import *  # noqa: F401,F403 - re-exported below
from referee.evaluators.evaluator import Evaluator
from referee.evaluators.geval import GEval
from referee.evaluators.grounding import Faithfulness, Hallucination, Summarization
from referee.evaluators.multimodal import DocumentGrounding, VQAFaithfulness
from referee.evaluators.qag import JudgeEvaluator, QAGEvaluator, Question
from referee.evaluators.response import AnswerAccuracy, Coherence, Relevance
from referee.evaluators.retrieval import ContextPrecision, ContextRecall
from referee.evaluators.safety import Bias, Toxicity
from referee.evaluators.text_metrics import ChrfScore

__all__ = [
    "AnswerAccuracy",
    "Bias",
    "CheckEvaluator",
    "ChrfScore",
    "Coherence",
    "ContextPrecision",
    "ContextRecall",
    "CustomRubric",
    "Evaluator",
    "Faithfulness",
    "GEval",
    "Hallucination",
    "JudgeEvaluator",
    "QAGEvaluator",
    "Question",
    "Relevance",
    "Summarization",
    "Toxicity",
    "threshold_table",
    # multivon's agent evaluators
    "ToolCallAccuracy",
    "ToolArgumentAccuracy",
    "PlanQuality",
    "TaskCompletion",
    "ToolCallNecessity",
    "TrajectoryEfficiency",
    "AgentMemoryEval",
    "StepFaithfulness",
    # multivon's vision evaluators (images and PDF pages, through the judge layer)
    "VQAFaithfulness",
    "DocumentGrounding",
]

# The deterministic evaluators (Contains, ExactMatch, ...) live in their own module; they are
# re-exported so ``from referee.evaluators import Contains`` works as well.
__all__ += list(_deterministic.__all__)
