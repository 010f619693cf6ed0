"""AgentEvaluator: 10xgraph's front door for agents, over the same engine as EvalSuite.

The agent under test is any callable, sync or async::

    def agent(user_message: str, history: list[TurnResult]) -> ExecutionResult | str | dict
    def agent(user_message: str) -> ...          # a one-argument agent keeps its own state

It is called once per turn of a case's conversation; ``history`` holds the earlier turns of
that case (user message, response, tool calls, node visits). Tool calls and node visits of all
turns are concatenated for the trajectory criteria; the last turn's response is the final one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from referee.case import EvalCase
from referee.compat.adk import scenario_of
from referee.config import EvalConfig, UserSimulatorConfig
from referee.criteria.base import Criterion
from referee.criteria.registry import build_criteria
from referee.errors import InputError
from referee.execution import ExecutionResult
from referee.record import CaseResult, EvalReport
from referee.run.conversation import AgentError as AgentError
from referee.run.conversation import AgentFn as AgentFn
from referee.run.conversation import run_conversation
from referee.run.conversation import takes_history as takes_history
from referee.run.engine import Engine, Execute, ModelCaller
from referee.run.evaluation import RunRequest, run_evaluation
from referee.run.model_factory import with_model_factory
from referee.run.options import RunOptions
from referee.run.simulator import ConversationScenario, UserSimulator
from referee.run.sync import run_sync


def _simulated(case: EvalCase) -> bool:
    """Whether the simulated user holds the case's conversation (an ADK conversation_scenario)."""
    return scenario_of(case) is not None and not case.conversation


def load_cases(source: Any) -> tuple[str, list[EvalCase]]:
    """(name, cases) from an EvalSet, a path to a case file, or a list of cases."""
    if isinstance(source, (str, Path)):
        from referee.evalset import EvalSet

        source = EvalSet.load(source)
    if isinstance(source, EvalCase):
        return source.display_name, [source]
    cases = getattr(source, "eval_cases", None)
    if cases is not None:
        name = getattr(source, "name", "") or getattr(source, "eval_set_id", "") or "eval set"
        return str(name), list(cases)
    if isinstance(source, Iterable):
        out = []
        for i, case in enumerate(source):
            if isinstance(case, dict):
                case = EvalCase.model_validate(case)
            if not isinstance(case, EvalCase):
                raise InputError(f"got {type(case).__name__}", field=f"cases[{i}]",
                                 expected="an EvalCase")
            out.append(case)
        return "eval set", out
    raise InputError(f"cannot evaluate a {type(source).__name__}",
                     expected="an EvalSet, a path to a case file, or a list of EvalCase")


class AgentEvaluator:
    """Runs an agent over an eval set and scores it with the criteria of ``config``.

    ``config`` defaults to ``EvalConfig.default()``; ``criteria=`` adds criterion instances of
    your own (a registry-only criterion, a CompositeCriterion...) after the configured ones.
    ``case_context(case)`` returns a context manager (sync or async) entered around every
    turn of that case: your own instrumentation can tag the case's spans with it, e.g.
    ``case_context=lambda case: using_session(case.eval_id)`` (OpenInference), so a recorded
    run pairs with its case.
    """

    def __init__(self, agent: AgentFn | None = None, config: EvalConfig | None = None, *,
                 criteria: Sequence[Criterion] | None = None, model_id: str = "",
                 runs_dir: str | Path | None = None, save: bool = True, backend: Any = None,
                 model_factory: str | Callable[[], Any] | None = None,
                 case_context: Callable[[EvalCase], Any] | None = None) -> None:
        # backend="ray" runs the cases on a Ray cluster; model_factory builds an agent that
        # cannot be pickled on each worker ('module:function' or a picklable function).
        agent = with_model_factory(agent, model_factory)
        if not callable(agent):
            raise TypeError(f"agent must be callable, got {type(agent).__name__}")
        self.agent = agent
        self.config = config if config is not None else EvalConfig.default()
        self.criteria: list[Criterion] = [*build_criteria(self.config), *(criteria or [])]
        self._default_model_id = getattr(agent, "__name__", type(agent).__name__)
        self._label = model_id
        self.runs_dir = runs_dir
        self.save = save
        self.backend = backend
        self.case_context = case_context

    @property
    def model_id(self) -> str:
        """The run's label: the one given, else the agent's name."""
        return self._label or self._default_model_id

    @model_id.setter
    def model_id(self, label: str) -> None:
        # Kept apart from the default, so that a resume without a label keeps the stored one.
        self._label = label

    def _executor(self, cases: Sequence[EvalCase]) -> Execute:
        """How a run executes its cases. A run with ADK conversation_scenario cases looks the
        simulated user's judge up once, here, and each of them asks it (on any backend)."""
        if not any(_simulated(case) for case in cases):
            return self._execute
        simulator = self._simulator()
        simulator.bind_judge()
        return functools.partial(self._execute, simulator=simulator)

    def _simulator(self) -> UserSimulator:
        return UserSimulator(config=self.config.user_simulator_config or UserSimulatorConfig(),
                             criteria=[])

    async def _execute(self, case: EvalCase, caller: ModelCaller,
                       simulator: UserSimulator | None = None) -> ExecutionResult:
        if self.case_context is None:
            return await self._converse(case, caller, simulator)
        scope = self.case_context(case)
        if hasattr(scope, "__aenter__"):
            async with scope:
                return await self._converse(case, caller, simulator)
        with scope:  # the model's threads copy this context, so sync agents see it too
            return await self._converse(case, caller, simulator)

    async def _converse(self, case: EvalCase, caller: ModelCaller,
                        simulator: UserSimulator | None) -> ExecutionResult:
        if not _simulated(case):
            return await run_conversation(self.agent, case, caller)
        # An ADK conversation_scenario: the simulated user holds the conversation.
        scenario = scenario_of(case) or {}
        simulator = simulator or self._simulator()  # a case run by hand: its own look-up
        return await simulator.simulate(self.agent, ConversationScenario(
            scenario_id=case.eval_id, starting_prompt=str(scenario.get("starting_prompt") or ""),
            conversation_plan=str(scenario.get("conversation_plan") or ""),
            description=str(scenario.get("user_persona") or "")), caller)

    async def evaluate(self, eval_set: Any, parallel: bool | None = None,
                       max_concurrency: int | None = None, verbose: bool | None = None,
                       output_dir: str | Path | None = None, *,
                       options: RunOptions | None = None, **settings: Any) -> EvalReport:
        """Run every case of ``eval_set`` (an EvalSet, a case file path or a list of cases).

        Unset arguments come from the config (``parallel``, ``max_concurrency``, ``verbose``,
        and ``timeout`` per case). ``output_dir`` is where the run directory goes;
        ``resume=RUN_DIR`` finishes an interrupted run, and ``retry_errors=True`` also runs its
        errored cases again; ``rescore=True`` scores the stored outputs with this evaluator's
        criteria (resuming with other criteria is refused otherwise) without calling the agent
        again. ``metadata`` is stored with the run (meta.json and every report).
        ``fail_threshold`` and ``max_error_rate`` gate the run, and
        ``judge_gate=JudgeGate(...)`` gates on measured judges only (docs/calibration.md).
        ``formats`` names the reports to write. The settings may come as one
        ``options=self.run_options(...)`` instead; they are checked before anything runs.
        """
        if options is None:
            options = self.run_options(parallel, max_concurrency, verbose, output_dir,
                                       **settings)
        elif settings or parallel is not None or max_concurrency is not None \
                or verbose is not None or output_dir is not None:
            raise TypeError("give the run's settings either as options=... or as keyword "
                            "arguments, not both")
        return await run_evaluation(self.run_request(eval_set), options)

    def run_request(self, eval_set: Any, *, timeout: float | None = None) -> RunRequest:
        """What ``evaluate`` runs: the cases of ``eval_set`` (an EvalSet, a case file path or a
        list of cases) through the agent, scored by this evaluator's criteria. ``timeout``
        (the command line's --timeout) is recorded in the stored config in place of the
        config's own; the evaluator itself is left as it is. With ADK conversation_scenario
        cases, the simulated user's judge is looked up now, once for the run."""
        name, cases = load_cases(eval_set)
        for i, case in enumerate(cases):
            if not case.conversation and scenario_of(case) is None:
                raise InputError("the case has no user turn to send to the agent",
                                 field=f"cases[{i}] ({case.display_name})",
                                 expected="input or a non-empty conversation")
        config = self.config
        if timeout is not None and timeout != config.timeout:
            config = config.model_copy(update={"timeout": timeout})
        return RunRequest(name=name, model_id=self._label,
                          default_model_id=self._default_model_id, cases=cases,
                          criteria=self.criteria, execute=self._executor(cases),
                          config_used=config.model_dump(mode="json"),
                          after_run=self._write_reporters if config.reporter is not None else None)

    def _write_reporters(self, report: EvalReport) -> None:
        # Written before the gates judge the run, so a failed gate still leaves its reports.
        from referee.report.reporters import ReporterManager  # rich/jinja only when asked

        assert self.config.reporter is not None
        ReporterManager(self.config.reporter).run_all(report)

    def run_options(self, parallel: bool | None = None, max_concurrency: int | None = None,
                    verbose: bool | None = None, output_dir: str | Path | None = None, *,
                    timeout: float | None = None, **settings: Any) -> RunOptions:
        """The ``RunOptions`` of ``evaluate``'s arguments, unset ones from the config (and the
        evaluator's ``runs_dir``, ``save`` and ``backend``: ``option_defaults``)."""
        defaults = self.option_defaults()
        if parallel is not None or max_concurrency is not None:
            parallel = self.config.parallel if parallel is None else parallel
            limit = max_concurrency if max_concurrency is not None \
                else self.config.max_concurrency
            defaults["concurrency"] = max(1, limit) if parallel else 1
        if timeout is not None:
            defaults["timeout"] = timeout
        if output_dir:
            defaults["runs_dir"] = output_dir
        return RunOptions(**{**defaults, **settings,
                             "verbose": self.config.verbose if verbose is None else verbose})

    def option_defaults(self) -> dict[str, Any]:
        """The run settings this evaluator brings when a run does not set them: concurrency
        and the per-case timeout from its ``EvalConfig``, and its ``runs_dir``, ``save`` and
        ``backend``. The CLI lays its flags over them."""
        defaults: dict[str, Any] = {
            "concurrency": max(1, self.config.max_concurrency) if self.config.parallel else 1,
            "timeout": self.config.timeout or None, "save": self.save}
        if self.runs_dir:
            defaults["runs_dir"] = self.runs_dir
        if self.backend is not None:
            defaults["backend"] = self.backend
        return defaults

    def evaluate_sync(self, eval_set: Any, **kwargs: Any) -> EvalReport:
        """``evaluate`` for synchronous code (also works inside a running event loop)."""
        return run_sync(self.evaluate(eval_set, **kwargs))

    async def evaluate_case(self, case: EvalCase) -> CaseResult:
        """One case, not stored: handy for per-case assertions in tests."""
        engine = Engine(self.criteria, concurrency=1, timeout=self.config.timeout or None)
        await engine.prepare()
        caller = ModelCaller()
        try:
            return await engine.run_case(case, self._execute, caller)
        finally:
            caller.close()

    def evaluate_case_sync(self, case: EvalCase) -> CaseResult:
        return run_sync(self.evaluate_case(case))


class EvaluationRunner:
    """10xgraph's batch runner: several ``(agent, eval_set)`` pairs through ``AgentEvaluator``,
    one after another, each report kept in ``results`` under its eval set's id.

    The agent is a function, as for ``AgentEvaluator``; 10xgraph's
    ``(graph, collector, eval_set)`` triples need its graph runtime and are refused.
    """

    def __init__(self, default_config: EvalConfig | None = None, *,
                 runs_dir: str | Path | None = None, save: bool = True) -> None:
        self.default_config = default_config if default_config is not None else EvalConfig.default()
        self.runs_dir = runs_dir
        self.save = save
        self.results: dict[str, EvalReport] = {}

    async def run(self, evaluations: Sequence[tuple[Any, ...]], config: EvalConfig | None = None,
                  verbose: bool = False) -> dict[str, EvalReport]:
        """Evaluate each pair; ``config`` overrides ``default_config`` for all of them."""
        pairs = []
        for i, item in enumerate(evaluations):
            if not isinstance(item, (tuple, list)) or len(item) != 2:
                raise InputError(
                    f"got {type(item).__name__}" + (f" of {len(item)} items"
                                                    if isinstance(item, (tuple, list)) else ""),
                    field=f"evaluations[{i}]",
                    expected="an (agent, eval_set) pair; 10xgraph's (graph, collector, eval_set) "
                             "needs its graph runtime: pass a function that returns an "
                             "ExecutionResult instead")
            pairs.append(item)
        cfg = config if config is not None else self.default_config
        for agent, eval_set in pairs:
            evaluator = AgentEvaluator(agent, cfg, runs_dir=self.runs_dir, save=self.save)
            report = await evaluator.evaluate(eval_set, verbose=verbose)
            self.results[report.eval_set_id or report.name] = report
        return self.results

    def run_sync(self, evaluations: Sequence[tuple[Any, ...]], config: EvalConfig | None = None,
                 verbose: bool = False) -> dict[str, EvalReport]:
        return run_sync(self.run(evaluations, config, verbose))

    @property
    def summary(self) -> dict[str, Any]:
        """Totals over every report kept; the pass rate counts evaluated cases (errors and
        skips left out), as every referee report does."""
        if not self.results:
            return {"total_evaluations": 0}
        summaries = [report.summary for report in self.results.values()]
        total = sum(s.total_cases for s in summaries)
        passed = sum(s.passed_cases for s in summaries)
        evaluated = passed + sum(s.failed_cases for s in summaries)
        return {"total_evaluations": len(summaries), "total_cases": total,
                "evaluated_cases": evaluated, "passed_cases": passed,
                "overall_pass_rate": passed / evaluated if evaluated else 0.0}
