"""UserSimulator: an LLM plays the user, the agent answers, SimulationGoalsCriterion scores it.

The simulated user speaks through the judge layer (``judge_config_for_model`` or an explicit
``JudgeConfig``), so it shares clients, retries, concurrency limits, the cache and token
accounting with every other model call. The agent is called exactly as AgentEvaluator calls
it: ``agent(user_message, history)`` or ``agent(user_message)``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, field_validator

from referee.case import EvalCase, ToolCall
from referee.config import CriterionConfig, UserSimulatorConfig
from referee.content._parts import DocumentPart, ImagePart, distinct_parts
from referee.criteria.judged import judged_criteria
from referee.errors import JudgeUnavailable
from referee.execution import ExecutionResult, TurnResult
from referee.judge.binding import JudgeBinding
from referee.judge.client import get_judge
from referee.judge.config import judge_config_for_model
from referee.record import CaseResult, EvalReport
from referee.result import CriterionResult
from referee.run.conversation import AgentError, AgentFn, takes_history
from referee.run.engine import Engine, ModelCaller
from referee.run.evaluation import RunRequest, run_evaluation
from referee.run.options import RunOptions
from referee.run.sync import run_sync
from referee.usage import TokenUsage

DONE_MARKER = "[CONVERSATION COMPLETE]"

SIMULATOR_SYSTEM = (
    "You are role-playing a human user who is talking to an AI assistant. Stay in character: "
    "write only what the user would type next, in the first person, with no labels, quotes or "
    "commentary. Never act as the assistant."
)

NEXT_MESSAGE_PROMPT = """SCENARIO:
{description}

PLAN FOR THE CONVERSATION:
{plan}

WHAT YOU (THE USER) WANT TO ACHIEVE:
{goals}

CONVERSATION SO FAR:
{transcript}

Write the user's next message. If every goal has been achieved, or the assistant has made it
clear that nothing more can be done, reply with exactly {done} instead."""


class ConversationScenario(BaseModel):
    """What the simulated user wants, how the talk should go, and when to stop."""

    scenario_id: str = ""
    description: str = ""
    starting_prompt: str = ""
    conversation_plan: str = ""
    goals: list[str] = Field(default_factory=list)
    max_turns: int = 10
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("max_turns")
    @classmethod
    def _positive_turns(cls, value: int) -> int:
        if value < 1:
            raise ValueError(f"max_turns must be at least 1, got {value}")
        return value

    def to_case(self) -> EvalCase:
        """The case the engine runs: goals, one per line, are the expected final response
        (where SimulationGoalsCriterion reads them)."""
        return EvalCase(
            input=self.starting_prompt or self.description,
            expected_output="\n".join(g.strip() for g in self.goals if g.strip()) or None,
            name=self.scenario_id or self.description[:60],
            metadata={"scenario": self.model_dump(mode="json")},
        )


class SimulationResult(BaseModel):
    scenario_id: str = ""
    turns: int = 0
    conversation: list[dict[str, str]] = Field(default_factory=list)
    goals_achieved: list[str] = Field(default_factory=list)
    completed: bool = False
    error: str | None = None
    criterion_scores: dict[str, float] = Field(default_factory=dict)
    criterion_details: dict[str, Any] = Field(default_factory=dict)
    simulator_token_usage: TokenUsage = Field(default_factory=TokenUsage)
    criterion_results: list[CriterionResult] = Field(default_factory=list)
    status: str = ""

    @classmethod
    def from_case(cls, scenario: ConversationScenario, result: CaseResult) -> SimulationResult:
        execution = result.execution
        meta = execution.metadata if execution is not None else {}
        conversation = list(meta.get("conversation") or [])
        achieved: list[str] = []
        for r in result.criterion_results:
            achieved.extend(str(g) for g in r.details.get("achieved_goals") or [])
        goals = [g for g in scenario.goals if g.strip()]
        return cls(
            scenario_id=scenario.scenario_id, turns=sum(1 for m in conversation if m["role"] == "user"),
            conversation=conversation, goals_achieved=achieved,
            completed=result.status.value == "PASSED" and len(set(achieved)) >= len(goals),
            error=result.error,
            criterion_scores={r.criterion: r.score for r in result.criterion_results},
            criterion_details={r.criterion: r.details for r in result.criterion_results},
            simulator_token_usage=TokenUsage.model_validate(meta.get("simulator_token_usage") or {}),
            criterion_results=list(result.criterion_results), status=result.status.value,
        )


def transcript_text(conversation: Sequence[dict[str, str]]) -> str:
    return "\n".join(f"{m['role'].upper()}: {m['content']}" for m in conversation)


# 10xgraph's UserSimulator default, in its litellm spelling (the judge layer reads it as Google's
# gemini-2.5-flash); UserSimulatorConfig's default is the bare name, as in 10xgraph.
DEFAULT_SIMULATOR_MODEL = "gemini/gemini-2.5-flash"

# The attributes the simulated user's judge follows from.
_SIMULATED_USER_SETTINGS = frozenset({"model", "temperature", "api_style", "judge_config"})


class UserSimulator:
    """Drives an agent through scenarios with an LLM in the user's seat.

    ``judge=`` (a JudgeConfig) overrides the model-name detection, e.g. to use a local
    OpenAI-compatible server or referee.testing's scripted server.
    """

    def __init__(self, model: str = DEFAULT_SIMULATOR_MODEL, temperature: float = 0.7,
                 max_turns: int = 10, config: UserSimulatorConfig | None = None,
                 criteria: Sequence[Any] | None = None, api_style: str = "responses",
                 judge: Any = None) -> None:
        if config is not None:
            model, temperature, max_turns = config.model, config.temperature, config.max_turns
            api_style = config.api_style
        if max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns}")
        self.model = model
        self.temperature = temperature
        self.max_turns = max_turns
        self.api_style = api_style
        self.judge_config = judge
        if criteria is None:
            from referee.criteria import SimulationGoalsCriterion

            # The judge given for the simulated user also judges the goals: without it the
            # criterion would look for a provider by the model's name alone.
            criteria = [SimulationGoalsCriterion(
                config=CriterionConfig.simulation_goals(judge_model=model), judge=judge)]
        self.criteria = list(criteria)

    # The simulated user -------------------------------------------------------------------
    # Its judge is looked up once per run, before the first conversation, like a judged
    # criterion's (design decision 16); used by hand, on first use, and kept.
    _judge_binding: JudgeBinding | None = None
    _judge_lookup_failure: Exception | None = None  # raised again for each conversation

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name in _SIMULATED_USER_SETTINGS:  # another model or judge: look it up again
            super().__setattr__("_judge_binding", None)
            super().__setattr__("_judge_lookup_failure", None)

    def look_up_judge(self) -> JudgeBinding:
        """The simulated user's judge as the settings name it now: ``judge=``, else the judge
        ``model`` names (none when no provider can serve it)."""
        cfg = self.judge_config or judge_config_for_model(self.model, api_style=self.api_style,
                                                          temperature=self.temperature)
        return JudgeBinding(judge=cfg) if cfg is not None else \
            JudgeBinding(unreachable_model=self.model)

    def bind_judge(self) -> None:
        """Look the simulated user's judge up now; every conversation until the next bind asks
        it (a run binds it before its first case). A failed look-up errors each conversation."""
        try:
            self._judge_binding, self._judge_lookup_failure = self.look_up_judge(), None
        except Exception as exc:
            self._judge_binding, self._judge_lookup_failure = None, exc

    def bind_judges(self) -> None:
        """``bind_judge``, and bind each judged criterion's judge as a run does."""
        self.bind_judge()
        for criterion in judged_criteria(self.criteria):
            criterion.bind_looked_up_judge()

    def _bound_judge(self) -> JudgeBinding:
        if self._judge_lookup_failure is not None:
            raise self._judge_lookup_failure.with_traceback(None)
        if self._judge_binding is None:
            self._judge_binding = self.look_up_judge()
        return self._judge_binding

    def __getstate__(self) -> dict[str, Any]:
        # Sent to another process (a Ray worker, inside the run's execute): the judge goes
        # with it as this process calls it, so the worker's environment never picks one.
        state = dict(self.__dict__)
        try:
            binding = self._bound_judge()
        except Exception as exc:  # it fails there as here: each conversation errors
            state["_judge_binding"], state["_judge_lookup_failure"] = None, exc
        else:
            state["_judge_binding"] = binding.for_elsewhere()
        return state

    def _judge(self) -> Any:
        cfg = self._bound_judge().judge
        if cfg is None:
            raise JudgeUnavailable(
                f"No LLM provider available for the user simulator model {self.model!r}",
                model=self.model)
        return get_judge(cfg)

    async def _next_user_message(self, judge: Any, scenario: ConversationScenario,
                                 conversation: list[dict[str, str]], turn: int
                                 ) -> tuple[str | None, TokenUsage]:
        prompt = NEXT_MESSAGE_PROMPT.format(
            description=scenario.description or "(none)",
            plan=scenario.conversation_plan or "(no fixed plan)",
            goals="\n".join(f"- {g}" for g in scenario.goals) or "(none stated)",
            transcript=transcript_text(conversation) or "(the conversation has not started)",
            done=DONE_MARKER,
        )
        reply = await judge.complete(prompt, system=SIMULATOR_SYSTEM, sample_index=turn,
                                     temperature=self.temperature)
        text = reply.text.strip()
        if not text or DONE_MARKER in text:
            return None, reply.usage
        return text, reply.usage

    async def simulate(self, agent: AgentFn, scenario: ConversationScenario,
                       caller: ModelCaller) -> ExecutionResult:
        """One simulated conversation; the transcript is the actual response to be judged."""
        judge = self._judge()
        with_history = takes_history(agent)
        conversation: list[dict[str, str]] = []
        turns: list[TurnResult] = []
        tool_calls: list[ToolCall] = []
        node_visits: list[str] = []
        outputs: list[ImagePart | DocumentPart] = []
        usage = TokenUsage()
        max_turns = min(scenario.max_turns, self.max_turns)
        message: str | None = scenario.starting_prompt.strip() or None
        if message is None:
            message, spent = await self._next_user_message(judge, scenario, conversation, 0)
            usage = usage + spent
        for turn in range(1, max_turns + 1):
            if message is None:
                break
            conversation.append({"role": "user", "content": message})
            args = (message, list(turns)) if with_history else (message,)
            result = ExecutionResult.coerce(await caller.call(agent, *args))
            if result.error:
                raise AgentError(f"turn {turn}: {result.error}")
            conversation.append({"role": "assistant", "content": result.actual_response})
            turns.append(TurnResult(user_content=message, response=result.actual_response,
                                    tool_calls=list(result.tool_calls),
                                    node_visits=list(result.node_visits)))
            tool_calls.extend(result.tool_calls)
            node_visits.extend(result.node_visits)
            outputs.extend(result.outputs)
            if turn < max_turns:
                message, spent = await self._next_user_message(judge, scenario, conversation, turn)
                usage = usage + spent
        return ExecutionResult(
            actual_response=transcript_text(conversation), tool_calls=tool_calls,
            node_visits=node_visits, turns=turns, token_usage=usage, outputs=distinct_parts(outputs),
            metadata={"conversation": conversation,
                      "simulator_token_usage": usage.model_dump(mode="json")},
        )

    # Front doors --------------------------------------------------------------------------
    async def run(self, agent: AgentFn, scenario: ConversationScenario) -> SimulationResult:
        """Simulate one scenario and score it (not stored)."""
        case = scenario.to_case()
        engine = Engine(self.criteria, concurrency=1)
        await engine.prepare()
        caller = ModelCaller()

        async def execute(c: EvalCase, call: ModelCaller) -> ExecutionResult:
            return await self.simulate(agent, scenario, call)

        try:
            result = await engine.run_case(case, execute, caller)
        finally:
            caller.close()
        return SimulationResult.from_case(scenario, result)

    def run_sync(self, agent: AgentFn, scenario: ConversationScenario) -> SimulationResult:
        return run_sync(self.run(agent, scenario))

    async def evaluate(self, agent: AgentFn, scenarios: Sequence[ConversationScenario], *,
                       name: str = "user simulation", concurrency: int = 4,
                       timeout: float | None = None, verbose: bool = False, save: bool = True,
                       runs_dir: str | Path | None = None, resume: str | Path | None = None,
                       formats: Sequence[str] | None = None, fail_threshold: float | None = None,
                       max_error_rate: float | None = None) -> EvalReport:
        """Every scenario as one case of a stored run, with the usual report and gates."""
        options = RunOptions(concurrency=concurrency, timeout=timeout, verbose=verbose,
                             save=save, runs_dir=runs_dir, resume=resume, formats=formats,
                             fail_threshold=fail_threshold, max_error_rate=max_error_rate)
        scenarios = [s if isinstance(s, ConversationScenario)
                     else ConversationScenario.model_validate(s) for s in scenarios]
        cases = [s.to_case() for s in scenarios]
        by_case = {id(c): s for c, s in zip(cases, scenarios)}

        async def execute(case: EvalCase, caller: ModelCaller) -> ExecutionResult:
            return await self.simulate(agent, by_case[id(case)], caller)

        self.bind_judge()
        return await run_evaluation(RunRequest(
            name=name, model_id="", default_model_id=getattr(agent, "__name__", ""),
            cases=cases, criteria=self.criteria, execute=execute,
            config_used={"user_simulator": {"model": self.model, "temperature": self.temperature,
                                            "max_turns": self.max_turns}}), options)


class BatchSimulator:
    """10xgraph's batch front door: many scenarios through one :class:`UserSimulator`, at most
    ``max_concurrency`` at a time, results in scenario order, and a summary of them.

    ``UserSimulator.evaluate`` does the same as a stored run with a report; this returns the
    plain :class:`SimulationResult` list. Keywords other than ``simulator`` and
    ``max_concurrency`` build the simulator (``BatchSimulator(model="gpt-4o")``).
    """

    def __init__(self, simulator: UserSimulator | None = None, max_concurrency: int = 5,
                 **simulator_options: Any) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
        if simulator is not None and simulator_options:
            raise TypeError("give either a simulator or the options to build one, not both")
        self.simulator = simulator or UserSimulator(**simulator_options)
        self.max_concurrency = max_concurrency

    async def run_batch(self, agent: AgentFn,
                        scenarios: Sequence[ConversationScenario]) -> list[SimulationResult]:
        gate = asyncio.Semaphore(self.max_concurrency)
        self.simulator.bind_judges()  # each scenario's run asks the judges bound here

        async def one(scenario: ConversationScenario) -> SimulationResult:
            async with gate:
                return await self.simulator.run(agent, scenario)

        return list(await asyncio.gather(*(one(s) for s in scenarios)))

    def run_batch_sync(self, agent: AgentFn,
                       scenarios: Sequence[ConversationScenario]) -> list[SimulationResult]:
        return run_sync(self.run_batch(agent, scenarios))

    @staticmethod
    def summary(results: Sequence[SimulationResult]) -> dict[str, Any]:
        """Counts over the batch, under 10xgraph's keys."""
        total = len(results)
        completed = sum(1 for r in results if r.completed)
        return {
            "total_scenarios": total,
            "completed": completed,
            "completion_rate": completed / total if total else 0.0,
            "total_goals_achieved": sum(len(r.goals_achieved) for r in results),
            "average_turns": sum(r.turns for r in results) / total if total else 0.0,
            "errors": sum(1 for r in results if r.error),
        }
