"""The one public front door to a run: ``run_evaluation(request, options)``.

A front door says *what* to run as a ``RunRequest`` (the cases, the criteria, how one case is
executed, the names to record); ``RunOptions`` says *how* (concurrency, storage, resume, gates).
``run_evaluation`` runs and stores it (run/session.py), lets the request's ``after_run`` see the
stored report, then applies the gates. ``EvalSuite``, ``AgentEvaluator``, ``UserSimulator``,
the recorded-trace scorer and the CLI all come in here; none of them drives the engine itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from referee.case import EvalCase
from referee.criteria.base import Criterion
from referee.record import EvalReport
from referee.run.engine import Execute
from referee.run.gates import gate
from referee.run.options import RunOptions
from referee.run.session import run_stored


@dataclass(frozen=True)
class RunRequest:
    """What one run evaluates. ``execute(case, caller)`` produces a case's output (the model,
    the agent's conversation, a recorded output); ``config_used`` is stored as the run's config;
    ``after_run`` sees the stored report before the gates judge it (so a failed gate still
    leaves what it writes, as 10xgraph's reporters)."""

    name: str
    cases: Sequence[EvalCase]
    criteria: Sequence[Criterion]
    execute: Execute
    # The label the user gave (empty: none), and the name the run takes without one (the
    # model function's): a resume without a label keeps the stored run's own.
    model_id: str = ""
    default_model_id: str = ""
    config_used: dict[str, Any] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    after_run: Callable[[EvalReport], None] | None = None


async def run_evaluation(request: RunRequest, options: RunOptions) -> EvalReport:
    """Run ``request`` with ``options``: stored (unless ``options.save`` is False), reported,
    then gated (``EvalGateFailure`` once the run is fully stored)."""
    report = await run_stored(name=request.name, model_id=request.model_id,
                              default_model_id=request.default_model_id, cases=request.cases,
                              criteria=request.criteria, execute=request.execute,
                              options=options, config_used=request.config_used,
                              metadata=request.metadata)
    if request.after_run is not None:
        request.after_run(report)
    gate(report, options)
    return report
