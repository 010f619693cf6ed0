"""Run one evaluation across a Ray cluster (the optional extra ``referee[ray]``).

``RayBackend`` ships small shards of cases to Ray tasks; each runs referee's own engine on its
worker and streams every finished case back to the driver, the run store's only writer.
``BuiltOnWorker`` builds a model that cannot be pickled on each worker from a factory, and
``cluster_judge_budget`` gives every judge endpoint one budget across the cluster.

Nothing here is imported by ``import referee``; Ray is imported when a backend is built.
"""

from __future__ import annotations

from referee._lazy import lazy_getattr

_EXPORTS = {
    "RayBackend": "referee.scale._backend",
    "BuiltOnWorker": "referee.run.model_factory",
    "require_ray": "referee.scale._ray",
}

__all__ = list(_EXPORTS)

__getattr__ = lazy_getattr(__name__, globals(), _EXPORTS)
