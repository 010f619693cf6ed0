"""Models and agents that cannot be pickled (live clients, open sessions), built where they run:
on each Ray worker (``referee.scale``), or in this process for a local run."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import Any

# One model per factory per process: every shard a worker runs reuses it.
_built: dict[str, Any] = {}
_built_lock = threading.Lock()


def _load_target(target: str) -> Callable[[], Any]:
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"model factory {target!r}: expected 'module:function'")
    try:
        value: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"model factory {target!r}: cannot import {module_name!r} ({exc})") from None
    for part in attr.split("."):
        if not hasattr(value, part):
            raise ValueError(f"model factory {target!r}: {module_name!r} has no {attr!r}")
        value = getattr(value, part)
    if not callable(value):
        raise ValueError(f"model factory {target!r}: {attr!r} is not callable")
    return value


class BuiltOnWorker:
    """A model callable that is built where it runs: ``factory()`` is called once per process.

    ``factory`` is a ``'module:function'`` target (importable on every worker) or a picklable
    function. What it returns is the model or agent under test: called with the case's input
    (sync or async), exactly as a model passed directly would be.
    """

    def __init__(self, factory: str | Callable[[], Any]) -> None:
        if isinstance(factory, str):
            _load_target(factory)  # a typo fails here, on the driver, not on every worker
            self._key = factory
        elif callable(factory):
            self._key = f"{getattr(factory, '__module__', '')}:{getattr(factory, '__qualname__', id(factory))}"
        else:
            raise TypeError(f"model_factory must be 'module:function' or a callable, "
                            f"got {type(factory).__name__}")
        self.factory = factory
        self.__name__ = self._key.rpartition(":")[2] or "model"

    def model(self) -> Any:
        with _built_lock:
            model = _built.get(self._key)
            if model is None:
                make = _load_target(self.factory) if isinstance(self.factory, str) else self.factory
                model = _built[self._key] = make()
        return model

    def __call__(self, *args: Any) -> Any:
        return self.model()(*args)

    def __repr__(self) -> str:
        return f"BuiltOnWorker({self._key!r})"


def with_model_factory(model: Any, factory: str | Callable[[], Any] | None) -> Any:
    """The model a front door runs: ``model``, or one built from ``factory`` where it runs."""
    if factory is None:
        return model
    if model is not None:
        raise ValueError("pass the model or model_factory=, not both")
    return BuiltOnWorker(factory)
