"""EvalSuite: multivon's front door. A thin layer over the engine and the run store."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from referee.case import EvalCase
from referee.errors import InputError
from referee.execution import ExecutionResult
from referee.record import EvalReport
from referee.run.engine import ModelCaller
from referee.run.evaluation import RunRequest, run_evaluation
from referee.run.model_factory import with_model_factory
from referee.run.options import RunOptions
from referee.run.sync import run_sync


def _as_case(value: Any, where: str) -> EvalCase:
    if isinstance(value, EvalCase):
        return value
    if isinstance(value, dict):
        return EvalCase.model_validate(value)
    raise InputError(f"got {type(value).__name__}", field=where, expected="an EvalCase")


def _check_evaluator(evaluator: Any) -> Any:
    if not callable(getattr(evaluator, "evaluate", None)):
        raise TypeError(
            f"{type(evaluator).__name__} has no evaluate() method; expected a criterion or "
            f"evaluator with async evaluate(actual, expected)"
        )
    return evaluator


class EvalSuite:
    """Cases plus evaluators; ``run(model_fn)`` scores the model on every case.

    ``model_fn`` takes the case input (a str) and returns a str, a dict or an ExecutionResult;
    it may be sync (run on a worker thread) or async.
    """

    def __init__(self, name: str, model_id: str = "") -> None:
        self.name = name
        self.model_id = model_id
        self._cases: list[EvalCase] = []
        self._source: Sequence[EvalCase] | None = None
        self._evaluators: list[Any] = []

    # Building -----------------------------------------------------------------------------
    @property
    def cases(self) -> Sequence[EvalCase]:
        """A copy of the added cases, or the source given to ``stream_cases`` (not copied)."""
        return self._source if self._source is not None else list(self._cases)

    @property
    def evaluators(self) -> list[Any]:
        return list(self._evaluators)

    def add_case(self, case: EvalCase) -> EvalSuite:
        if self._source is not None:
            raise ValueError("this suite streams its cases from a source (stream_cases); "
                             "add the case to that source instead")
        self._cases.append(_as_case(case, f"cases[{len(self._cases)}]"))
        return self

    def add_cases(self, cases: Iterable[EvalCase]) -> EvalSuite:
        for case in cases:
            self.add_case(case)
        return self

    def stream_cases(self, source: Sequence[EvalCase]) -> EvalSuite:
        """Run the cases of ``source`` without holding them: for suites larger than memory.

        ``source`` is a sequence that may build each case when it is indexed (from a file, a
        database, a generator function); a run reads every case once to compute the case keys
        and again when the case runs. It replaces any cases added with ``add_case``; a stored
        run then keeps only counts in memory, and ``report.cases`` reads them back from disk.
        """
        if not isinstance(source, Sequence):
            raise TypeError(f"stream_cases needs a sequence (len() and [i]), got {type(source).__name__}")
        self._cases = []
        self._source = source
        return self

    def add_evaluator(self, evaluator: Any) -> EvalSuite:
        self._evaluators.append(_check_evaluator(evaluator))
        return self

    def add_evaluators(self, *evaluators: Any) -> EvalSuite:
        # Accept add_evaluators(a, b) and add_evaluators([a, b]) alike.
        if len(evaluators) == 1 and isinstance(evaluators[0], (list, tuple)):
            evaluators = tuple(evaluators[0])
        for evaluator in evaluators:
            self.add_evaluator(evaluator)
        return self

    def add_check(self, criterion: str, threshold: float = 0.7, num_questions: int = 3,
                  questions: list[str] | None = None, name: str | None = None,
                  judge: Any = None) -> EvalSuite:
        """A plain-English check, scored by QAG; its questions are made once, before the cases."""
        from referee.evaluators import CheckEvaluator

        return self.add_evaluator(CheckEvaluator(
            criterion, threshold=threshold, num_questions=num_questions, questions=questions,
            name=name, judge=judge,
        ))

    # multivon's ready-made suites: the same evaluators, built from referee's ------------------
    @classmethod
    def for_rag(cls, name: str = "RAG Eval", *, threshold: float = 0.85) -> EvalSuite:
        """Not empty, faithfulness, hallucination, context precision and recall, relevance."""
        from referee import evaluators as ev

        judged = (ev.Faithfulness, ev.Hallucination, ev.ContextPrecision, ev.ContextRecall,
                  ev.Relevance)
        return cls(name).add_evaluators(ev.NotEmpty(), *(e(threshold=threshold) for e in judged))

    @classmethod
    def for_agents(cls, name: str = "Agent Eval", *, require_order: bool = False) -> EvalSuite:
        """Tool call accuracy and necessity, trajectory efficiency, plan quality, task
        completion, over the run's agent trace."""
        from referee import evaluators as ev

        return cls(name).add_evaluators(
            ev.ToolCallAccuracy(require_order=require_order), ev.ToolCallNecessity(),
            ev.TrajectoryEfficiency(), ev.PlanQuality(), ev.TaskCompletion())

    @classmethod
    def for_support_bot(cls, name: str = "Support Bot Eval") -> EvalSuite:
        from referee import evaluators as ev

        return cls._preset(name, ev.NotEmpty, ev.Faithfulness, ev.Relevance, ev.Coherence,
                           ev.Toxicity)

    @classmethod
    def for_summarization(cls, name: str = "Summarization Eval") -> EvalSuite:
        from referee import evaluators as ev

        return cls._preset(name, ev.NotEmpty, ev.Faithfulness, ev.Coherence, ev.Relevance,
                           ev.Summarization)

    @classmethod
    def for_classification(cls, name: str = "Classification Eval") -> EvalSuite:
        from referee import evaluators as ev

        return cls._preset(name, ev.NotEmpty, ev.ExactMatch, ev.AnswerAccuracy)

    @classmethod
    def for_coding(cls, name: str = "Coding Agent Eval", *,
                   language: str = "python") -> EvalSuite:
        """``language`` is accepted and, as in multivon, changes nothing yet."""
        from referee import evaluators as ev

        return cls._preset(name, ev.NotEmpty, ev.ExactMatch, ev.AnswerAccuracy, ev.ROUGE)

    @classmethod
    def for_legal(cls, name: str = "Legal AI Eval") -> EvalSuite:
        from referee import evaluators as ev

        return cls._preset(name, ev.NotEmpty, ev.Faithfulness, ev.Hallucination,
                           ev.AnswerAccuracy, ev.Bias)

    @classmethod
    def _preset(cls, name: str, *evaluator_types: Callable[[], Any]) -> EvalSuite:
        return cls(name).add_evaluators(*(make() for make in evaluator_types))

    # Running ------------------------------------------------------------------------------
    def run(self, model_fn: Callable[[str], Any] | None = None, verbose: bool = True,
            fail_threshold: float | None = None, max_error_rate: float | None = None, *,
            options: RunOptions | None = None,
            model_factory: str | Callable[[], Any] | None = None,
            **settings: Any) -> EvalReport:
        """Run ``model_fn`` on every case and score it; raise EvalGateFailure if a gate rejects it.

        The settings are keyword arguments (below) or one ``options=RunOptions(...)``; either
        way they are checked before anything runs.

        ``concurrency`` (alias ``workers``) bounds how many cases run at once (default 8; use 1
        for a model that is not thread-safe). ``timeout`` is per case (per run, with ``runs``),
        in seconds. The run is stored under ``runs_dir`` (default ``.referee/runs``) unless
        ``save=False``; ``resume=RUN_DIR`` finishes an interrupted run without re-running its
        finished cases; add ``retry_errors=True`` to run its errored cases (MODEL/JUDGE/
        EVALUATOR_ERROR, TIMEOUT) again too. Resuming with other evaluators than the stored
        run's is refused unless ``rescore=True``, which scores the stored outputs with these
        evaluators without calling the model again. ``RunStoreWriteError`` means the run
        directory could not be written (a full disk): its finished cases are kept and ``resume``
        completes the run. ``metadata`` is stored with the run (meta.json and every report).

        ``backend="ray"`` (or a ``referee.scale.RayBackend``) runs the cases on a Ray cluster;
        ``model_factory`` (``'module:function'`` or a picklable function returning the model)
        builds a model that cannot be pickled on each worker instead of passing ``model_fn``.
        ``judge_retry=JudgeRetry(...)`` runs a case that ended in a judge error again, end to end.

        ``runs=N`` runs each case N times, one run after another, each judged afresh (the
        reply cache never replays an earlier run): the case passes only if every evaluated run
        did, ``CaseResult.run_results`` holds the runs, and the report measures stability
        (``flaky_count``, ``pass_at_k``, ``pass_hat_k``, ...). ``evaluator_concurrency`` bounds
        how many evaluators score at once across the run (default: no bound beyond the judge's
        per-endpoint limit). ``early_stop=True`` stops running a case once its runs settle it
        (a sequential test of a pass rate of 0.8 or 0.2 against 0.5); such a case has fewer runs,
        and pass@k for a k above them is reported as unknown.

        ``judge_gate=JudgeGate(require_calibrated=True, min_kappa=0.6, gate_on="corrected")``
        refuses judged evaluators without a calibration entry (or with a calibrated kappa below
        ``min_kappa``) and gates ``fail_threshold`` on pass rates corrected for judge error
        (docs/calibration.md).
        """
        options = self.run_options(verbose, fail_threshold, max_error_rate, options=options,
                                   **settings)
        return run_sync(self.run_async(model_fn, options=options, model_factory=model_factory))

    async def run_async(self, model_fn: Callable[[str], Any] | None = None, verbose: bool = True,
                        fail_threshold: float | None = None, max_error_rate: float | None = None,
                        *, options: RunOptions | None = None,
                        model_factory: str | Callable[[], Any] | None = None,
                        **settings: Any) -> EvalReport:
        """``run`` for async code."""
        options = self.run_options(verbose, fail_threshold, max_error_rate, options=options,
                                   **settings)
        return await run_evaluation(self.run_request(model_fn, model_factory=model_factory),
                                    options)

    def run_request(self, model_fn: Callable[[str], Any] | None = None, *,
                    model_factory: str | Callable[[], Any] | None = None) -> RunRequest:
        """What ``run`` evaluates: this suite's cases and evaluators, each case's input sent to
        ``model_fn``; ``run_evaluation(request, options)`` runs it."""
        model_fn = with_model_factory(model_fn, model_factory)
        if not callable(model_fn):
            raise TypeError(f"model_fn must be callable, got {type(model_fn).__name__}")
        model = model_fn

        async def execute(case: EvalCase, caller: ModelCaller) -> Any:
            # The input as the case holds it: a str, or its parts (text, images, PDFs) when it
            # holds an image or a PDF.
            return await caller.call(model, case.input or "")

        return RunRequest(name=self.name, model_id=self.model_id,
                          default_model_id=getattr(model_fn, "__name__", ""),
                          cases=self._source if self._source is not None else self._cases,
                          criteria=self._evaluators, execute=execute)

    def run_on_cases(self, pairs: Iterable[tuple[EvalCase, Any]], verbose: bool = True,
                     fail_threshold: float | None = None, max_error_rate: float | None = None,
                     **settings: Any) -> EvalReport:
        """Score outputs produced elsewhere (traces, logs): ``[(case, output), ...]``."""
        return run_sync(self.run_on_cases_async(pairs, verbose, fail_threshold, max_error_rate,
                                                **settings))

    async def run_on_cases_async(self, pairs: Iterable[tuple[EvalCase, Any]], verbose: bool = True,
                                 fail_threshold: float | None = None,
                                 max_error_rate: float | None = None, *,
                                 options: RunOptions | None = None,
                                 **settings: Any) -> EvalReport:
        if "backend" in settings or (options is not None and options.backend is not None):
            # The outputs are matched to their cases in this process.
            raise TypeError("run_on_cases scores outputs given here; it takes no backend")
        options = self.run_options(verbose, fail_threshold, max_error_rate, options=options,
                                   **settings)
        cases: list[EvalCase] = []
        outputs: list[ExecutionResult] = []
        for i, pair in enumerate(pairs):
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise InputError(f"got {type(pair).__name__}", field=f"pairs[{i}]",
                                 expected="a (case, output) pair")
            # A copy per pair, so the same case object given twice still maps to its own output.
            cases.append(_as_case(pair[0], f"pairs[{i}][0]").model_copy())
            try:
                outputs.append(ExecutionResult.coerce(pair[1]))
            except (TypeError, ValueError) as exc:
                raise InputError(str(exc), field=f"pairs[{i}][1]",
                                 expected="a str, dict or ExecutionResult") from None
        by_case = {id(case): out for case, out in zip(cases, outputs)}

        async def execute(case: EvalCase, caller: ModelCaller) -> Any:
            return by_case[id(case)]

        return await run_evaluation(RunRequest(
            name=self.name, model_id=self.model_id, cases=cases, criteria=self._evaluators,
            execute=execute), options)

    @staticmethod
    def run_options(verbose: bool = True, fail_threshold: float | None = None,
                    max_error_rate: float | None = None, *, options: RunOptions | None = None,
                    workers: int | None = None, evaluator_concurrency: int | None = None,
                    **settings: Any) -> RunOptions:
        """The ``RunOptions`` that ``run``'s arguments spell (multivon's names: ``workers`` for
        ``concurrency``, ``evaluator_concurrency``), or ``options`` when it is given alone."""
        if options is not None:
            if settings or workers is not None or evaluator_concurrency is not None \
                    or fail_threshold is not None or max_error_rate is not None or not verbose:
                raise TypeError("give the run's settings either as options=RunOptions(...) or "
                                "as keyword arguments, not both")
            return options
        concurrency = settings.pop("concurrency", None)
        if workers is not None and concurrency is not None and workers != concurrency:
            raise ValueError("pass either workers= or concurrency=, not both")
        return RunOptions(verbose=verbose, fail_threshold=fail_threshold,
                          max_error_rate=max_error_rate, concurrency=concurrency or workers,
                          criterion_concurrency=evaluator_concurrency, **settings)

    def __repr__(self) -> str:
        return (f"EvalSuite(name={self.name!r}, cases={len(self.cases)}, "
                f"evaluators={len(self._evaluators)})")
