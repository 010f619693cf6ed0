"""On Ray, the workers receive each criterion's judge binding and look nothing up (issue 29).

The driver binds every judge once before the first case; the binding travels to the workers
with the criteria, so a worker's own environment and ``configure()`` never choose a judge. The
same holds for the user simulator's judge, which travels inside the run's execute.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from judge_lookups import AnswersAndLogsLookups, install

from referee import AgentEvaluator, CriterionConfig, EvalCase, EvalSuite, Rubric
from referee.config import CriteriaConfig, EvalConfig, UserSimulatorConfig
from referee.criteria.llm import ResponseMatchCriterion, RubricBasedCriterion
from referee.evaluators import AnswerAccuracy, Relevance
from referee.scale import RayBackend
from referee.testing import Reply, ScriptedJudgeServer

CASES = 10
SCORE = '{"score": 0.9, "reasoning": "the same meaning"}'


def _reply(request) -> Reply:
    return Reply(SCORE if '"score"' in request.prompt else "Yes")


def test_workers_judge_with_the_bound_judges_and_look_none_up(
        ray_cluster: str, isolated_judge: None, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    config = CriterionConfig(judge_model="openai/judge-by-model", num_samples=2, threshold=0.5)
    rubric = CriterionConfig(judge_model="openai/judge-by-model", num_samples=2, threshold=0.5,
                             rubrics=[Rubric.create("number", "The answer names the number asked.")])
    cases = [EvalCase(input=f"question {i}", expected_output=f"answer {i}")
             for i in range(CASES)]
    suite = EvalSuite("bound-on-ray").add_cases(cases).add_evaluators(
        Relevance(), AnswerAccuracy(), ResponseMatchCriterion(config),
        RubricBasedCriterion(rubric))
    on_driver: Counter[str] = Counter()
    worker_log = tmp_path / "worker-lookups.log"
    with ScriptedJudgeServer(_reply) as server:
        monkeypatch.setenv("JUDGE_PROVIDER", "openai")
        monkeypatch.setenv("JUDGE_MODEL", "judge-by-layers")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url("openai"))
        monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-binding")
        restore = install(lambda name: on_driver.__setitem__(name, on_driver[name] + 1))
        try:
            report = suite.run(AnswersAndLogsLookups(worker_log), verbose=False,
                               runs_dir=tmp_path / "runs",
                               backend=RayBackend(shard_size=3, task_cpus=0.5))
        finally:
            restore()
        asked = {r.model for r in server.requests}

    assert report.passed == CASES, [c.failed_criteria for c in report.cases]
    assert asked == {"judge-by-layers", "judge-by-model"}
    assert on_driver == {"effective_panel": 2, "resolve_judge_config": 2,
                         "judge_config_for_model": 2}
    assert worker_log.exists() is False or worker_log.read_text() == "", \
        Counter(worker_log.read_text().split())


def _simulated_user(request) -> Reply:
    return Reply("[CONVERSATION COMPLETE]" if "ASSISTANT: answer" in request.prompt
                 else "question 0 again")


def test_workers_ask_the_simulated_user_the_driver_bound(
        ray_cluster: str, isolated_judge: None, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """ADK conversation_scenario cases on Ray: the simulator's judge, looked up once on the
    driver, travels with the run's execute; the workers (whose environment names no judge
    endpoint or key) look none up."""
    cases = [EvalCase(name=f"s{i}", metadata={"adk": {"conversation_scenario": {
        "starting_prompt": f"question {i}"}}}) for i in range(CASES)]
    config = EvalConfig(criteria=CriteriaConfig(), user_simulator_config=UserSimulatorConfig(
        model="openai/simulated-user", api_style="chat", max_turns=3))
    on_driver: Counter[str] = Counter()
    worker_log = tmp_path / "worker-lookups.log"
    with ScriptedJudgeServer(_simulated_user) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url("openai"))
        monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-simulator")
        restore = install(lambda name: on_driver.__setitem__(name, on_driver[name] + 1))
        try:
            report = AgentEvaluator(AnswersAndLogsLookups(worker_log), config=config,
                                    save=False, backend=RayBackend(shard_size=3, task_cpus=0.5)
                                    ).evaluate_sync(cases, verbose=False)
        finally:
            restore()
        asked = server.request_count

    assert [c.error for c in report.cases] == [None] * CASES
    assert asked == CASES  # one simulated-user turn per case, after the agent's answer
    assert on_driver == {"judge_config_for_model": 1}
    assert worker_log.exists() is False or worker_log.read_text() == "", \
        Counter(worker_log.read_text().split())
