"""referee: evaluate LLM applications and agents.

``__all__`` holds referee's own surface, and only that. The names the two peer APIs' users
import from their package's top level (the multivon-style ``EvalSuite`` API's and the
10xgraph-style ``AgentEvaluator`` API's, docs/compat.md) import from here as well, so that only
the import line changes, but they are the peers' vocabulary, not referee's, and stay out of
``__all__`` (``dir(referee)`` lists them). Everything else is imported from its subpackage
(``referee.judge``, ``referee.run``, ``referee.report``, ``referee.evaluators``, ...). Names
resolve lazily, so ``import referee`` stays fast for the CLI and the pytest plugin.
"""

from __future__ import annotations

from referee._lazy import lazy_getattr

__version__ = "0.1.0"

# referee's own surface: what its README, docs and examples import from the top level.
_OWN: dict[str, str] = {
    "EvalCase": "referee.case",
    "ToolCall": "referee.case",
    "Invocation": "referee.case",
    "EvalSet": "referee.evalset",
    "ExecutionResult": "referee.execution",
    "TurnResult": "referee.execution",
    "TokenUsage": "referee.usage",
    "RefereeError": "referee.errors",
    "InputError": "referee.errors",
    "JudgeUnavailable": "referee.errors",
    "EvalGateFailure": "referee.errors",
    "EvalSuite": "referee.run",
    "AgentEvaluator": "referee.run",
    "JudgeRetry": "referee.run",
    "JudgeGate": "referee.run",
    "JudgeConfig": "referee.judge",
    "JudgePanel": "referee.judge",
    "configure": "referee.judge",
    "Evaluator": "referee.evaluators",
    "BaseCriterion": "referee.criteria",
    "PairwiseJudge": "referee.pairwise",
    "compare_models": "referee.pairwise",
    "rank_models": "referee.pairwise",
    "EvalReport": "referee.record",
    "CaseResult": "referee.record",
    "CaseStatus": "referee.record",
    "compare_reports": "referee.report",
}

# The multivon-style EvalSuite API's top-level names that are not referee's own above.
_MULTIVON: dict[str, str] = {
    # multivon's error hierarchy (MultivonError is RefereeError). referee never raises
    # EvaluatorPrereqMissing, CacheError, SecretsError or ComplianceError; they are here so that
    # ``except`` clauses written for multivon still import.
    "MultivonError": "referee.errors",
    "CalibrationMissing": "referee.errors",
    "EvaluatorPrereqMissing": "referee.errors",
    "CacheError": "referee.errors",
    "SecretsError": "referee.errors",
    "ComplianceError": "referee.errors",
    "EvalResult": "referee.result",
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
    "CheckEvaluator": "referee.evaluators",
    "threshold_table": "referee.evaluators",
    "calibrated_threshold": "referee.evaluators.calibration",
    "NotEmpty": "referee.evaluators",
    "ExactMatch": "referee.evaluators",
    "Contains": "referee.evaluators",
    "RegexMatch": "referee.evaluators",
    "StartsWith": "referee.evaluators",
    "JSONSchemaEval": "referee.evaluators",
    "WordCount": "referee.evaluators",
    "Latency": "referee.evaluators",
    "MaxLatency": "referee.evaluators",
    "Levenshtein": "referee.evaluators",
    "BLEU": "referee.evaluators",
    "ROUGE": "referee.evaluators",
    "ChrfScore": "referee.evaluators",
    "EvalStatus": "referee.record",
    "EVALUATION_STATUSES": "referee.record",
    "ERROR_STATUSES": "referee.record",
    "AgentStep": "referee.execution",
    "AcceptancePolicy": "referee.run",
    "AcceptanceResult": "referee.run",
    "CheckRequirement": "referee.run",
    "SliceRequirement": "referee.run",
    "should_retry": "referee.run",
    "sleep_for_attempt": "referee.run",
    "async_sleep_for_attempt": "referee.run",
    "ToolCallAccuracy": "referee.evaluators",
    "ToolArgumentAccuracy": "referee.evaluators",
    "PlanQuality": "referee.evaluators",
    "TaskCompletion": "referee.evaluators",
    "ToolCallNecessity": "referee.evaluators",
    "TrajectoryEfficiency": "referee.evaluators",
    "AgentMemoryEval": "referee.evaluators",
    "StepFaithfulness": "referee.evaluators",
    # multivon's vision evaluators and its content-bound media (the media shape is the edge's)
    "VQAFaithfulness": "referee.evaluators",
    "DocumentGrounding": "referee.evaluators",
    "MediaArtifact": "referee.compat.multivon_media",
    "with_media": "referee.compat.multivon_media",
    "case_media": "referee.compat.multivon_media",
    "media_sources": "referee.compat.multivon_media",
    "call_vision": "referee.compat.multivon_vision",
    "PassKResult": "referee.record",
    "pass_at_k": "referee.record",
    "pass_hat_k": "referee.record",
    "suite_pass_k": "referee.record",
    "min_detectable_effect": "referee.record",
}

# The 10xgraph-style AgentEvaluator API's top-level names that are not referee's own above.
_TENXGRAPH: dict[str, str] = {
    "MessageContent": "referee.case",
    "SessionInput": "referee.case",
    "TrajectoryStep": "referee.execution",
    "StepType": "referee.execution",
    "NodeDetail": "referee.execution",
    "CriterionResult": "referee.result",
    "CriterionConfig": "referee.config",
    "CriteriaConfig": "referee.config",
    "EvalConfig": "referee.config",
    "MatchType": "referee.config",
    "Rubric": "referee.config",
    "UserSimulatorConfig": "referee.config",
    "EvalPresets": "referee.config",
    "EvalSetBuilder": "referee.evalset",
    "create_simple_eval_set": "referee.evalset",
    "BatchSimulator": "referee.run",
    "SimulationResult": "referee.run",
    "UserSimulator": "referee.run",
    "ConversationScenario": "referee.run",
    "EvaluationRunner": "referee.run",
    "assert_eval_passed": "referee.run",
    "assert_criterion_passed": "referee.run",
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
    "EvalSummary": "referee.record",
    "EvalCaseResult": "referee.record",
    "ReporterConfig": "referee.config",
    "BaseReporter": "referee.report.reporters",
    "ConsoleReporter": "referee.report.reporters",
    "JSONReporter": "referee.report.reporters",
    "JUnitXMLReporter": "referee.report.reporters",
    "HTMLReporter": "referee.report.reporters",
    "ReporterManager": "referee.report.reporters",
    "ReporterOutput": "referee.report.reporters",
    "Colors": "referee.report.reporters",
    "print_report": "referee.report.reporters",
}

# Exported here before the top level was curated; they live in their subpackage now. Still
# importable from here, with a DeprecationWarning that names where.
_MOVED: dict[str, str] = {
    "DEFAULT_JUDGE_MODEL": "referee.config",
    "JSONSchema": "referee.evaluators",
}

_EXPORTS: dict[str, str] = {**_OWN, **_MULTIVON, **_TENXGRAPH}

__all__ = [*_OWN, "__version__"]


__getattr__ = lazy_getattr(__name__, globals(), _EXPORTS, moved=_MOVED)


def __dir__() -> list[str]:
    return [*__all__, *sorted(_EXPORTS.keys() - set(_OWN))]
