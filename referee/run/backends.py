"""Where a run's cases execute: the local engine (the default) or a backend such as Ray.

A backend gets the engine (criteria prepared on this machine, the store, the progress display,
the stored outputs a ``--rescore`` scores again), the cases with their keys and the keys to
skip (resume). It runs the others wherever it likes and hands every finished ``CaseResult``
to ``engine.record`` on this machine, which keeps the run store's single writer, resume and
the reports the same whatever ran the cases.

A backend that runs cases in other processes sends each judged criterion with its bound judge
(``JudgedCriterionBase.ship_judge``, which adds the endpoint and key this process's environment
gives it): the judge the run names is the one that judges, and the other process looks none up.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Container, Sequence
from typing import Any, Protocol

from referee.case import EvalCase
from referee.record import CaseResult
from referee.run.engine import Engine, Execute


class CaseExecutor(Protocol):
    async def stream(self, engine: Engine, cases: Sequence[EvalCase], execute: Execute, *,
                     keys: Sequence[str], skip: Container[str],
                     on_result: Callable[[CaseResult], None]) -> int: ...


class LocalExecutor:
    """The cases run here, on the engine's own event loop."""

    async def stream(self, engine: Engine, cases: Sequence[EvalCase], execute: Execute, *,
                     keys: Sequence[str], skip: Container[str],
                     on_result: Callable[[CaseResult], None]) -> int:
        return await engine.stream(cases, execute, keys=keys, skip=skip, on_result=on_result)


# Backends that live in optional packages: (module, class, extra). The module is imported only
# when a run names the backend, so `import referee` never imports Ray.
_NAMED_BACKENDS: dict[str, tuple[str, str, str]] = {
    "ray": ("referee.scale", "RayBackend", "ray"),
}


def resolve_backend(backend: Any) -> CaseExecutor:
    """``None``/``"local"``, a registered name (``"ray"``), or an executor object."""
    if backend is None or backend == "local":
        return LocalExecutor()
    if isinstance(backend, str):
        spec = _NAMED_BACKENDS.get(backend)
        if spec is None:
            known = ", ".join(["local", *_NAMED_BACKENDS])
            raise ValueError(f"unknown backend {backend!r}; expected one of: {known}")
        module, name, _extra = spec
        return getattr(importlib.import_module(module), name)()
    if not callable(getattr(backend, "stream", None)):
        raise TypeError(f"backend must be 'local', 'ray' or an executor with stream(), "
                        f"got {type(backend).__name__}")
    return backend
