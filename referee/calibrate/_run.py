"""calibrate(): score human-labelled outputs with an evaluator, as a stored, resumable run, and
measure how far the evaluator agrees with the people."""

from __future__ import annotations

import copy
import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from referee.calibrate._labels import LABEL_KEY, LabelledCase, data_fingerprint
from referee.calibrate._report import CalibrationReport, build_report
from referee.calibrate._stats import DEFAULT_RESAMPLES, FIT_METRICS
from referee.case import EvalCase
from referee.content._parts import ContentError
from referee.evaluators.calibration import NO_QUESTION_SET
from referee.execution import ExecutionResult
from referee.judge import JudgeConfig
from referee.judge.panel import PANEL, JudgePanel, check_judge, panel_model_name
from referee.record import EvalReport
from referee.run.engine import DEFAULT_CONCURRENCY, ModelCaller
from referee.run.evaluation import RunRequest, run_evaluation
from referee.run.options import RunOptions
from referee.run.sync import run_sync

NO_JUDGE = "none"
# What judge= takes: "provider/model", a JudgeConfig, or a panel (a JudgePanel, or a list of
# JudgeConfigs or "provider/model" texts).
JudgeSpec = str | JudgeConfig | JudgePanel | Sequence[Any] | None


def parse_judge(spec: JudgeSpec) -> JudgeConfig | JudgePanel | None:
    """``provider/model`` (e.g. ``openai/gpt-4o-mini``) as a JudgeConfig; a JudgePanel, or a
    list of JudgeConfigs or ``provider/model`` texts, as a panel."""
    if spec is None or isinstance(spec, (JudgeConfig, JudgePanel)):
        return spec
    if isinstance(spec, (list, tuple)):
        members = [parse_judge(member) if isinstance(member, str) else member
                   for member in spec]
        return check_judge("calibrate", members)
    provider, sep, model = str(spec).partition("/")
    if not sep or not provider.strip() or not model.strip():
        raise ValueError(f"judge {spec!r}: expected provider/model, e.g. openai/gpt-4o-mini")
    return JudgeConfig(provider=provider.strip(), model=model.strip())


def _with_judge(evaluator: Any, judge: JudgeConfig | JudgePanel | None,
                settings: dict[str, Any]) -> Any:
    """A copy of ``evaluator`` judged by ``judge`` (each member, for a panel), with the judge
    settings given; the caller's evaluator keeps its own judge."""
    if not hasattr(evaluator, "judge"):
        raise TypeError(f"{type(evaluator).__name__} takes no judge; leave judge= "
                        "(and the judge's timeout and max_tokens) out")
    evaluator = copy.copy(evaluator)
    if judge is None:  # the settings go to each member of a panel the evaluator already has
        current = getattr(evaluator, "judge_panel", None)
        judge = current() if callable(current) else None
    if isinstance(judge, JudgePanel):
        if not callable(getattr(evaluator, "judge_panel", None)) or \
                getattr(evaluator, "accepts_panel", True) is False:
            raise TypeError(f"{type(evaluator).__name__} does not take a judge panel")
        panel = judge.model_copy(update={"members": [m.model_copy(update=settings)
                                                     for m in judge.members]})
        if hasattr(evaluator, "panel"):  # an AgentEvaluator-style criterion keeps it apart
            evaluator.panel, evaluator.judge = panel, None
        else:
            evaluator.judge = panel
        return evaluator
    # Set as explicit fields: a judge given only these still inherits its provider and model
    # from configure() and the environment.
    evaluator.judge = (judge or evaluator.judge or JudgeConfig()).model_copy(update=settings)
    return evaluator


def _built_in_evaluators() -> dict[str, type]:
    """Judge evaluators that can be built without arguments, by class and evaluator name."""
    import referee.evaluators as evaluators
    from referee.evaluators.qag import JudgeEvaluator

    found: dict[str, type] = {}
    for attr in evaluators.__all__:
        cls = getattr(evaluators, attr)
        if (inspect.isclass(cls) and issubclass(cls, JudgeEvaluator)
                and not inspect.isabstract(cls) and "name" in vars(cls)):
            found[attr.lower()] = cls
            found[str(cls.name).lower()] = cls
    return found


def evaluator_by_name(name: str) -> Any:
    """A built-in evaluator by class or evaluator name (``Faithfulness``, ``answer_accuracy``),
    with its defaults."""
    choices = _built_in_evaluators()
    cls = choices.get(name.strip().lower().replace("-", "_"))
    if cls is None:
        import difflib

        names = sorted({str(getattr(c, "name", c.__name__)) for c in choices.values()})
        near = difflib.get_close_matches(name.strip().lower().replace("-", "_"), names, n=1)
        hint = f"did you mean {near[0]!r}? " if near else ""
        raise ValueError(f"unknown evaluator {name!r}; {hint}built-in judge evaluators: "
                         f"{', '.join(names)} (or give FILE.py:OBJECT)")
    return cls()


def criterion_name(evaluator: Any) -> str:
    """The criterion name ``evaluator``'s results carry in a run."""
    return str(getattr(evaluator, "name", type(evaluator).__name__))


def _judge_identity(evaluator: Any) -> tuple[str, str]:
    panel = getattr(evaluator, "judge_panel", None)
    panel = panel() if callable(panel) else None
    if panel is not None:
        members = (panel.members if hasattr(evaluator, "panel")
                   else panel.resolved_members())
        return PANEL, panel_model_name(members)
    resolve = getattr(evaluator, "judge_config", None)
    if callable(resolve):
        cfg = resolve()
        return cfg.provider, cfg.model
    return NO_JUDGE, NO_JUDGE


def _question_set(evaluator: Any) -> str:
    describe = getattr(evaluator, "question_set", None)
    return str(describe()) if callable(describe) else NO_QUESTION_SET


async def calibrate_async(evaluator: Any, labelled_cases: Sequence[LabelledCase],
                          judge: JudgeSpec = None, *, metric: str = "kappa",
                          folds: int | None = None, resamples: int = DEFAULT_RESAMPLES,
                          seed: int = 0, runs_dir: str | Path | None = None,
                          resume: str | Path | None = None, retry_errors: bool = False,
                          concurrency: int = DEFAULT_CONCURRENCY, timeout: float | None = None,
                          judge_timeout: float | None = None,
                          judge_max_tokens: int | None = None,
                          judge_max_retries: int | None = None,
                          verbose: bool = False, labels: str = "") -> CalibrationReport:
    """Run ``evaluator`` over the labelled outputs and report its agreement with the labels.

    The run goes through the engine, the judge layer (retries, limits, cache) and the run store
    like any other: judge errors are rows left out and counted, never an abort, and
    ``resume=RUN_DIR`` finishes an interrupted calibration without asking the judge again about
    finished rows. ``judge=`` ("provider/model" or a JudgeConfig) replaces the evaluator's judge;
    ``judge_timeout``, ``judge_max_tokens`` and ``judge_max_retries`` set those of whichever
    judge it uses (``timeout`` bounds a whole row).
    """
    if metric not in FIT_METRICS:
        raise ValueError(f"metric {metric!r}: expected one of {', '.join(FIT_METRICS)}")
    if folds is not None and folds < 2:
        raise ValueError(f"folds must be at least 2, got {folds}")
    if not callable(getattr(evaluator, "evaluate", None)):
        raise TypeError(f"{type(evaluator).__name__} is not an evaluator (no evaluate method)")
    rows = list(labelled_cases)
    run, evaluator, provider, model = await score_labelled(
        evaluator, rows, judge, runs_dir=runs_dir, resume=resume, retry_errors=retry_errors,
        concurrency=concurrency, timeout=timeout, judge_timeout=judge_timeout,
        judge_max_tokens=judge_max_tokens, judge_max_retries=judge_max_retries,
        verbose=verbose, labels=labels, purpose={"metric": metric, "folds": folds})
    name = criterion_name(evaluator)
    report = build_report(
        run, evaluator=name, judge_provider=provider, judge_model=model,
        question_set=_question_set(evaluator), metric=metric, folds=folds,
        resamples=resamples, seed=seed, labels=labels,
        data_fingerprint=data_fingerprint(rows))
    if report.run_dir:
        write_outputs(report, Path(report.run_dir))
    return report


async def score_labelled(evaluator: Any, rows: Sequence[LabelledCase],
                         judge: JudgeSpec, *, runs_dir: str | Path | None,
                         resume: str | Path | None = None, retry_errors: bool = False,
                         concurrency: int = DEFAULT_CONCURRENCY, timeout: float | None = None,
                         judge_timeout: float | None = None,
                         judge_max_tokens: int | None = None,
                         judge_max_retries: int | None = None, verbose: bool = False,
                         labels: str = "", purpose: dict[str, Any] | None = None,
                         ) -> tuple[EvalReport, Any, str, str]:
    """The labelled outputs scored by ``evaluator`` (with ``judge`` in place of its own) as a
    stored run: (the run, the evaluator as run, judge provider, judge model)."""
    if not rows:
        raise ValueError("no labelled cases to calibrate on")
    if getattr(evaluator, "calibration_required", False):
        raise ValueError(f"{type(evaluator).__name__} has threshold='calibrated', which needs the "
                         "calibration this run is to make; calibrate it with its default or a "
                         "numeric threshold (the scores do not depend on it)")
    config = parse_judge(judge)
    settings = {name: value for name, value in (("timeout", judge_timeout),
                                                ("max_tokens", judge_max_tokens),
                                                ("max_retries", judge_max_retries))
                if value is not None}
    if config is not None or settings:
        evaluator = _with_judge(evaluator, config, settings)
    provider, model = _judge_identity(evaluator)
    name = criterion_name(evaluator)
    cases: list[EvalCase] = [row.labelled_case() for row in rows]

    async def replay(case: EvalCase, caller: ModelCaller) -> Any:
        label = case.metadata[LABEL_KEY]
        if label.get("missing"):  # judged without its images, it would measure another judge
            raise ContentError(label["missing"])
        if label.get("outputs"):
            return ExecutionResult(actual_response=label["output"], outputs=label["outputs"])
        return label["output"]  # the output the people judged

    run = await run_evaluation(RunRequest(
        name=f"calibrate {name}", model_id="human-labelled outputs", cases=cases,
        criteria=[evaluator], execute=replay,
        config_used={"calibrate": {"evaluator": name, "labels": labels, **(purpose or {}),
                                   "judge": f"{provider}/{model}"}}),
        RunOptions(concurrency=concurrency, timeout=timeout, verbose=verbose,
                   runs_dir=runs_dir, resume=resume, retry_errors=retry_errors,
                   formats=("json",),
                   metadata={"calibration": {"labels": labels, **(purpose or {})}}))
    return run, evaluator, provider, model


def calibrate(evaluator: Any, labelled_cases: Sequence[LabelledCase],
              judge: JudgeSpec = None, **options: Any) -> CalibrationReport:
    """Sync front door of :func:`calibrate_async` (safe inside a running event loop)."""
    return run_sync(calibrate_async(evaluator, labelled_cases, judge, **options))


def write_outputs(report: CalibrationReport, run_dir: Path) -> None:
    """calibration.json and calibration.html beside the run's own files."""
    from referee.calibrate._render import render_html

    (run_dir / "calibration.json").write_text(report.to_json() + "\n", encoding="utf-8")
    (run_dir / "calibration.html").write_text(render_html(report), encoding="utf-8")
