"""A package's names that load on first use, so importing the package stays cheap."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, namespace: dict[str, Any], exports: Mapping[str, str],
                 moved: Mapping[str, str] | None = None) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: a name in ``exports`` is imported from its
    module on first use and kept in ``namespace`` (the package's globals), so it resolves once.
    A name in ``moved`` still imports, with a DeprecationWarning naming its new home."""
    moved = moved or {}

    def __getattr__(name: str) -> Any:
        module_name = exports.get(name)
        if module_name is None:
            module_name = moved.get(name)
            if module_name is None:
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            # stacklevel 2 is the caller's line: this function is the module's __getattr__.
            warnings.warn(f"{package}.{name} has moved: import it from {module_name}",
                          DeprecationWarning, stacklevel=2)
            return getattr(importlib.import_module(module_name), name)
        value = getattr(importlib.import_module(module_name), name)
        namespace[name] = value
        return value

    return __getattr__
