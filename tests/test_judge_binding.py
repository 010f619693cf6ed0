"""A judge is bound before the first case (design decision 16; issue 29, item 2).

A 10-case run with two EvalSuite-style QAG evaluators and two AgentEvaluator-style LLM
criteria, against the scripted judge server: each criterion's judge is looked up exactly once,
by ``describe_run`` before the first case, and never while scoring. A criterion called by hand
looks its judge up lazily, once. The user simulator's judge (the model in the user's seat) is
bound the same way, by the run that owns the simulator. (The same runs on Ray:
tests/scale/test_judge_binding_on_ray.py.)
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from scale.judge_lookups import install

from referee import (
    AgentEvaluator,
    BatchSimulator,
    ConversationScenario,
    CriterionConfig,
    EvalCase,
    EvalSuite,
    ExecutionResult,
    Rubric,
    UserSimulator,
)
from referee.config import CriteriaConfig, EvalConfig, UserSimulatorConfig
from referee.criteria.llm import ResponseMatchCriterion, RubricBasedCriterion
from referee.evaluators import AnswerAccuracy, Relevance
from referee.judge import JudgeConfig
from referee.run.sync import run_sync
from referee.testing import Reply, ScriptedJudgeServer

CASES = 10
SCORE = json.dumps({"score": 0.9, "reasoning": "the same meaning"})


def _reply(request) -> Reply:
    if "numbered list of goals" in request.prompt:  # simulation_goals
        return Reply('{"achieved": [1], "reasoning": "the number was answered"}')
    if "CONVERSATION SO FAR" in request.prompt:  # the simulated user: done once answered
        return Reply("[CONVERSATION COMPLETE]" if "ASSISTANT: answer" in request.prompt
                     else "question 0 again")
    return Reply(SCORE if '"score"' in request.prompt else "Yes")


def judged_suite() -> EvalSuite:
    """Two QAG evaluators (the environment's judge) and two LLM criteria (named by model)."""
    cases = [EvalCase(input=f"question {i}", expected_output=f"answer {i}")
             for i in range(CASES)]
    config = CriterionConfig(judge_model="openai/judge-by-model", num_samples=2, threshold=0.5)
    rubric = CriterionConfig(judge_model="openai/judge-by-model", num_samples=2, threshold=0.5,
                             rubrics=[Rubric.create("number", "The answer names the number asked.")])
    return EvalSuite("bound").add_cases(cases).add_evaluators(
        Relevance(), AnswerAccuracy(), ResponseMatchCriterion(config),
        RubricBasedCriterion(rubric))


@pytest.fixture
def judge_server(isolated_judge: None, monkeypatch: pytest.MonkeyPatch
                 ) -> Iterator[ScriptedJudgeServer]:
    with ScriptedJudgeServer(_reply) as server:
        monkeypatch.setenv("JUDGE_PROVIDER", "openai")
        monkeypatch.setenv("JUDGE_MODEL", "judge-by-layers")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url("openai"))
        monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-binding")
        yield server


class Lookups:
    """Each lookup's name, and whether the run's model had been called yet when it was made."""

    def __init__(self) -> None:
        self.before_first_case: Counter[str] = Counter()
        self.while_scoring: Counter[str] = Counter()
        self.cases_started = 0

    def record(self, name: str) -> None:
        (self.while_scoring if self.cases_started else self.before_first_case)[name] += 1

    def answer(self, question: str) -> str:
        self.cases_started += 1
        return f"answer {question.split()[1]}"

    def next_run(self) -> None:
        self.cases_started = 0


@pytest.fixture
def lookups() -> Iterator[Lookups]:
    counted = Lookups()
    restore = install(counted.record)
    try:
        yield counted
    finally:
        restore()


def test_each_judge_is_looked_up_once_per_run_and_never_while_scoring(
        judge_server: ScriptedJudgeServer, lookups: Lookups, tmp_path: Path) -> None:
    report = judged_suite().run(lookups.answer, verbose=False, runs_dir=tmp_path)

    assert report.passed == CASES, [c.failed_criteria for c in report.cases]
    # Each QAG evaluator: its panel (none) and its layered judge; each LLM criterion: its model.
    assert lookups.before_first_case == {"effective_panel": 2, "resolve_judge_config": 2,
                                         "judge_config_for_model": 2}
    assert lookups.while_scoring == {}
    asked = {r.model for r in judge_server.requests}
    assert asked == {"judge-by-layers", "judge-by-model"}


def test_a_second_run_binds_its_judges_again(judge_server: ScriptedJudgeServer,
                                            lookups: Lookups, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    suite = judged_suite()
    suite.run(lookups.answer, verbose=False, save=False)
    monkeypatch.setenv("JUDGE_MODEL", "judge-of-the-second-run")
    lookups.next_run()
    report = suite.run(lookups.answer, verbose=False, save=False)

    assert lookups.while_scoring == {}
    assert lookups.before_first_case == {"effective_panel": 4, "resolve_judge_config": 4,
                                         "judge_config_for_model": 4}
    judged_by = {r.details["judge_model"] for c in report.cases for r in c.criterion_results
                 if r.criterion == "relevance"}
    assert judged_by == {"judge-of-the-second-run"}


async def test_a_criterion_called_by_hand_looks_its_judge_up_once(
        judge_server: ScriptedJudgeServer, lookups: Lookups) -> None:
    relevance = Relevance()
    match = ResponseMatchCriterion(CriterionConfig(judge_model="openai/judge-by-model",
                                                   num_samples=1))
    case = EvalCase(input="question 1", expected_output="answer 1")
    for _ in range(3):
        assert (await relevance.evaluate(ExecutionResult(actual_response="answer 1"),
                                         case)).passed
        assert (await match.evaluate(ExecutionResult(actual_response="answer 1"), case)).passed

    assert lookups.before_first_case == {"effective_panel": 1, "resolve_judge_config": 1,
                                         "judge_config_for_model": 1}


def test_the_binding_pickles_with_its_key_hidden(judge_server: ScriptedJudgeServer) -> None:
    import pickle

    relevance = Relevance(judge=JudgeConfig(provider="openai", model="own",
                                            api_key="sk-own-key-4242",
                                            base_url=judge_server.base_url("openai")))
    binding = relevance.judge_binding()
    copy = pickle.loads(pickle.dumps(binding))
    assert copy == binding
    assert copy.judge is not None and copy.judge.api_key_value() == "sk-own-key-4242"
    assert "sk-own-key-4242" not in repr(binding)


async def test_the_unreachable_placeholder_is_a_setting_of_the_surface(isolated_judge: None,
                                                                      monkeypatch) -> None:
    """The 10xgraph-style 0.5 "No LLM provider available" is the surface's setting
    (``judge_defaults.unreachable_score``), not a branch of the core: a criterion class given
    no placeholder raises JudgeUnavailable instead, recorded as a judge error."""
    from dataclasses import replace

    from referee.judge import DEFAULT_JUDGES

    for name in ("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI"):
        monkeypatch.delenv(name, raising=False)

    class NoPlaceholder(ResponseMatchCriterion):
        judge_defaults = replace(DEFAULT_JUDGES["AgentEvaluator"], unreachable_score=None)

    config = CriterionConfig(judge_model="gemini-2.5-flash", num_samples=1)
    case = EvalCase(input="q", expected_output="a")
    placeholder = await ResponseMatchCriterion(config).evaluate(
        ExecutionResult(actual_response="a"), case)
    assert placeholder.score == 0.5 and placeholder.details["judge_unavailable"]
    refused = await NoPlaceholder(config).evaluate(ExecutionResult(actual_response="a"), case)
    assert refused.error_kind == "judge"
    assert "no provider can serve" in str(refused.details["sample_errors"])


# The user simulator ---------------------------------------------------------------------------

def scenarios() -> list[ConversationScenario]:
    return [ConversationScenario(scenario_id=f"s{i}", starting_prompt=f"question {i}",
                                 goals=[f"hear answer {i}"], max_turns=3) for i in range(CASES)]


def scenario_cases() -> list[EvalCase]:
    """ADK conversation_scenario cases: AgentEvaluator hands each to the user simulator."""
    return [EvalCase(name=f"s{i}", metadata={"adk": {"conversation_scenario": {
        "starting_prompt": f"question {i}", "conversation_plan": "Ask, then stop."}}})
        for i in range(CASES)]


def test_a_simulated_run_looks_the_simulated_user_up_once(
        judge_server: ScriptedJudgeServer, lookups: Lookups, tmp_path: Path) -> None:
    # One scenario at a time: a look-up made for any conversation after the first would come
    # after the agent's first answer.
    simulator = UserSimulator(model="openai/simulated-user", api_style="chat")
    report = run_sync(simulator.evaluate(lookups.answer, scenarios(), concurrency=1,
                                      runs_dir=tmp_path))

    assert report.passed == CASES, [(c.error, c.failed_criteria) for c in report.cases]
    # The simulated user, and its default simulation_goals criterion (named by the same model).
    assert lookups.before_first_case == {"judge_config_for_model": 2}
    assert lookups.while_scoring == {}
    assert {r.model for r in judge_server.requests} == {"simulated-user"}


def test_agent_evaluator_binds_the_simulated_user_of_its_scenario_cases_once(
        judge_server: ScriptedJudgeServer, lookups: Lookups) -> None:
    config = EvalConfig(criteria=CriteriaConfig(), user_simulator_config=UserSimulatorConfig(
        model="openai/simulated-user", api_style="chat", max_turns=3))
    evaluator = AgentEvaluator(lookups.answer, config=config, save=False)
    report = evaluator.evaluate_sync(scenario_cases(), max_concurrency=1, verbose=False)

    assert [c.error for c in report.cases] == [None] * CASES
    assert all(len(c.execution.turns) == 1 for c in report.cases)  # asked, answered, done
    assert lookups.before_first_case == {"judge_config_for_model": 1}
    assert lookups.while_scoring == {}
    lookups.next_run()
    evaluator.evaluate_sync(scenario_cases(), max_concurrency=1, verbose=False)
    assert lookups.before_first_case == {"judge_config_for_model": 2}  # each run binds anew
    assert lookups.while_scoring == {}


def test_a_batch_binds_the_simulated_user_and_its_criteria_once(
        judge_server: ScriptedJudgeServer, lookups: Lookups) -> None:
    simulator = UserSimulator(model="openai/simulated-user", api_style="chat")
    results = BatchSimulator(simulator=simulator, max_concurrency=1).run_batch_sync(
        lookups.answer, scenarios())

    assert [r.status for r in results] == ["PASSED"] * CASES, [r.error for r in results]
    assert lookups.before_first_case == {"judge_config_for_model": 2}
    assert lookups.while_scoring == {}


def test_a_simulator_given_another_model_looks_it_up_again(
        judge_server: ScriptedJudgeServer, lookups: Lookups) -> None:
    simulator = UserSimulator(model="openai/simulated-user", api_style="chat", criteria=[])
    simulator.bind_judge()
    simulator.model = "openai/second-user"
    result = simulator.run_sync(lookups.answer, scenarios()[0])

    assert result.error is None and result.turns == 1
    assert {r.model for r in judge_server.requests} == {"second-user"}
    assert lookups.before_first_case == {"judge_config_for_model": 2}


def test_a_failed_look_up_errors_each_conversation_and_is_not_repeated(
        judge_server: ScriptedJudgeServer, lookups: Lookups, tmp_path: Path) -> None:
    simulator = UserSimulator(model="openai/simulated-user", api_style="fax", criteria=[])
    report = run_sync(simulator.evaluate(lookups.answer, scenarios()[:3], concurrency=1,
                                      save=False))

    assert [c.status.value for c in report.cases] == ["MODEL_ERROR"] * 3
    assert all("api_style must be 'responses' or 'chat'" in (c.error or "")
               for c in report.cases)
    assert lookups.before_first_case == {"judge_config_for_model": 1}
    assert judge_server.request_count == 0


def test_a_simulator_sent_elsewhere_carries_the_judge_this_process_looked_up(
        judge_server: ScriptedJudgeServer, lookups: Lookups,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What a Ray worker receives: the endpoint and key come with the simulator, so the
    worker's own environment (here: emptied) neither picks nor blocks its judge."""
    import pickle

    simulator = UserSimulator(model="openai/simulated-user", api_style="chat", criteria=[])
    simulator.bind_judge()
    shipped = pickle.dumps(simulator)
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.delenv("OPENAI_API_KEY")
    received = pickle.loads(shipped)
    result = received.run_sync(lookups.answer, scenarios()[0])

    assert result.error is None and result.turns == 1
    assert judge_server.request_count == 1
    assert lookups.before_first_case == {"judge_config_for_model": 1}
    assert b"sk-dummy-binding" not in pickle.dumps(repr(received))


def test_a_simulator_whose_judge_cannot_be_looked_up_is_still_sent(
        judge_server: ScriptedJudgeServer, lookups: Lookups) -> None:
    import pickle

    simulator = UserSimulator(model="openai/simulated-user", api_style="fax", criteria=[])
    received = pickle.loads(pickle.dumps(simulator))
    result = received.run_sync(lookups.answer, scenarios()[0])

    assert result.status == "MODEL_ERROR"
    assert "api_style must be 'responses' or 'chat'" in (result.error or "")
    assert lookups.before_first_case == {"judge_config_for_model": 1}
