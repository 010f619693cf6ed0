"""Running evaluations: one async engine; ``run_evaluation(RunRequest, RunOptions)`` is the
front door every surface (EvalSuite, AgentEvaluator, UserSimulator, the CLI) comes in by."""

from __future__ import annotations

from referee._lazy import lazy_getattr

_EXPORTS = {
    "Engine": "referee.run.engine",
    "ModelCaller": "referee.run.engine",
    "case_status": "referee.run.engine",
    "run_evaluation": "referee.run.evaluation",
    "RunRequest": "referee.run.evaluation",
    "RunOptions": "referee.run.options",
    "EvalSuite": "referee.run.suite",
    "AgentEvaluator": "referee.run.agent",
    "EvaluationRunner": "referee.run.agent",
    "UserSimulator": "referee.run.simulator",
    "ConversationScenario": "referee.run.simulator",
    "SimulationResult": "referee.run.simulator",
    "BatchSimulator": "referee.run.simulator",
    "apply_gates": "referee.run.gates",
    "JudgeGate": "referee.run.judge_gate",
    "JudgeRetry": "referee.run.case_retry",
    "should_retry": "referee.run.case_retry",
    "sleep_for_attempt": "referee.run.case_retry",
    "async_sleep_for_attempt": "referee.run.case_retry",
    "AcceptancePolicy": "referee.run.acceptance",
    "AcceptanceResult": "referee.run.acceptance",
    "CheckRequirement": "referee.run.acceptance",
    "SliceRequirement": "referee.run.acceptance",
    "run_sync": "referee.run.sync",
    "assert_passes": "referee.run.assertions",
    "assert_passes_async": "referee.run.assertions",
    "assert_eval_passed": "referee.run.assertions",
    "assert_criterion_passed": "referee.run.assertions",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_getattr(__name__, globals(), _EXPORTS)
