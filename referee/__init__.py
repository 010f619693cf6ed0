"""referee: evaluate LLM applications and agents.

Public names resolve lazily, so ``import referee`` stays fast for the CLI and the pytest plugin.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # data model
    "ToolCall": "referee.messages",
    "Invocation": "referee.case",
    "EvalCase": "referee.case",
    "MessageContent": "referee.messages",
    "SessionInput": "referee.case",
    "EvalSet": "referee.evalset",
    "ExecutionResult": "referee.execution",
    "TurnResult": "referee.execution",
    "TrajectoryStep": "referee.execution",
    "StepType": "referee.execution",
    "NodeDetail": "referee.execution",
    "CriterionResult": "referee.result",
    "EvalResult": "referee.result",
    "TokenUsage": "referee.usage",
    # errors
    "RefereeError": "referee.errors",
    "JudgeUnavailable": "referee.errors",
    "EvalGateFailure": "referee.errors",
    "InputError": "referee.errors",
    # multivon's names for the same hierarchy
    "MultivonError": "referee.errors",
    "CalibrationMissing": "referee.errors",
    "EvaluatorPrereqMissing": "referee.errors",
    "CacheError": "referee.errors",
    "SecretsError": "referee.errors",
    "ComplianceError": "referee.errors",
    # AgentEvaluator-style (10xgraph) configuration
    "CriterionConfig": "referee.config",
    "CriteriaConfig": "referee.config",
    "EvalConfig": "referee.config",
    "MatchType": "referee.config",
    "Rubric": "referee.config",
    "UserSimulatorConfig": "referee.config",
    "DEFAULT_JUDGE_MODEL": "referee.config",
    # 10xgraph's presets, EvalSet builders, simulation batches and report assertions
    "EvalPresets": "referee.config",
    "EvalSetBuilder": "referee.evalset",
    "BatchSimulator": "referee.run",
    "SimulationResult": "referee.run",
    "create_simple_eval_set": "referee.evalset",
    "assert_eval_passed": "referee.run",
    "assert_criterion_passed": "referee.run",
    # AgentEvaluator-style (10xgraph) criteria
    "BaseCriterion": "referee.criteria",
    "SyncCriterion": "referee.criteria",
    "CompositeCriterion": "referee.criteria",
    "WeightedCriterion": "referee.criteria",
    "ExactMatchCriterion": "referee.criteria",
    "ContainsKeywordsCriterion": "referee.criteria",
    "ResponseMatchCriterion": "referee.criteria",
    "RougeMatchCriterion": "referee.criteria",
    "LLMJudgeCriterion": "referee.criteria",
    "RubricBasedCriterion": "referee.criteria",
    "FactualAccuracyCriterion": "referee.criteria",
    "HallucinationCriterion": "referee.criteria",
    "SafetyCriterion": "referee.criteria",
    "SimulationGoalsCriterion": "referee.criteria",
    "TrajectoryMatchCriterion": "referee.criteria",
    "NodeOrderMatchCriterion": "referee.criteria",
    "ToolNameMatchCriterion": "referee.criteria",
    "LLMCallerMixin": "referee.criteria",
    # judge layer
    "JudgeConfig": "referee.judge",
    "JudgePanel": "referee.judge",
    "configure": "referee.judge",
    # EvalSuite-style (multivon) evaluators
    "Faithfulness": "referee.evaluators",
    "Hallucination": "referee.evaluators",
    "Relevance": "referee.evaluators",
    "Coherence": "referee.evaluators",
    "Toxicity": "referee.evaluators",
    "Bias": "referee.evaluators",
    "Summarization": "referee.evaluators",
    "AnswerAccuracy": "referee.evaluators",
    "ContextPrecision": "referee.evaluators",
    "ContextRecall": "referee.evaluators",
    "CustomRubric": "referee.evaluators",
    "GEval": "referee.evaluators",
    "PairwiseJudge": "referee.pairwise",
    "compare_models": "referee.pairwise",
    "rank_models": "referee.pairwise",
    "CheckEvaluator": "referee.evaluators",
    "threshold_table": "referee.evaluators",
    "calibrated_threshold": "referee.evaluators.calibration",
    # EvalSuite-style deterministic and text-metric evaluators, top level as in multivon
    "NotEmpty": "referee.evaluators",
    "ExactMatch": "referee.evaluators",
    "Contains": "referee.evaluators",
    "RegexMatch": "referee.evaluators",
    "StartsWith": "referee.evaluators",
    "JSONSchema": "referee.evaluators",
    "JSONSchemaEval": "referee.evaluators",
    "WordCount": "referee.evaluators",
    "Latency": "referee.evaluators",
    "MaxLatency": "referee.evaluators",
    "Levenshtein": "referee.evaluators",
    "BLEU": "referee.evaluators",
    "ROUGE": "referee.evaluators",
    "ChrfScore": "referee.evaluators",
    # running and reporting
    "EvalSuite": "referee.run",
    "AgentEvaluator": "referee.run",
    "UserSimulator": "referee.run",
    "ConversationScenario": "referee.run",
    "EvalReport": "referee.report",
    "EvalSummary": "referee.report",
    "CaseResult": "referee.report",
    "CaseStatus": "referee.report",
    "EvaluationRunner": "referee.run",
    "ReporterConfig": "referee.config",
    # 10xgraph's reporter classes, over referee's renderers
    "BaseReporter": "referee.report.reporters",
    "ConsoleReporter": "referee.report.reporters",
    "JSONReporter": "referee.report.reporters",
    "JUnitXMLReporter": "referee.report.reporters",
    "HTMLReporter": "referee.report.reporters",
    "ReporterManager": "referee.report.reporters",
    "ReporterOutput": "referee.report.reporters",
    "Colors": "referee.report.reporters",
    "print_report": "referee.report.reporters",
    "EvalCaseResult": "referee.record",
    "EvalStatus": "referee.record",
    "EVALUATION_STATUSES": "referee.record",
    "ERROR_STATUSES": "referee.record",
    # multivon-eval's base class, retry policy, agent step and release gate
    "AgentStep": "referee.execution",
    "Evaluator": "referee.evaluators",
    "compare_reports": "referee.report",
    "AcceptancePolicy": "referee.run.acceptance",
    "AcceptanceResult": "referee.run.acceptance",
    "CheckRequirement": "referee.run.acceptance",
    "SliceRequirement": "referee.run.acceptance",
    "JudgeRetry": "referee.run.retry",
    "JudgeGate": "referee.run.judge_gate",
    "should_retry": "referee.run.retry",
    "sleep_for_attempt": "referee.run.retry",
    "async_sleep_for_attempt": "referee.run.retry",
    # multivon-eval's agent evaluators
    "ToolCallAccuracy": "referee.evaluators",
    "ToolArgumentAccuracy": "referee.evaluators",
    "PlanQuality": "referee.evaluators",
    "TaskCompletion": "referee.evaluators",
    "ToolCallNecessity": "referee.evaluators",
    "TrajectoryEfficiency": "referee.evaluators",
    "AgentMemoryEval": "referee.evaluators",
    "StepFaithfulness": "referee.evaluators",
    # multivon-eval's repeated-run estimators (EvalSuite.run(runs=N))
    "PassKResult": "referee.record",
    "pass_at_k": "referee.record",
    "pass_hat_k": "referee.record",
    "suite_pass_k": "referee.record",
    "min_detectable_effect": "referee.record",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'referee' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
