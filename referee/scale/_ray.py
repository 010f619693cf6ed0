"""The one place that imports Ray, with the one error that names the extra."""

from __future__ import annotations

from types import ModuleType

RAY_EXTRA_HINT = "the Ray backend needs the optional extra: pip install 'referee[ray]'"


def require_ray() -> ModuleType:
    try:
        import ray
    except ImportError:
        raise ImportError(RAY_EXTRA_HINT) from None
    return ray
