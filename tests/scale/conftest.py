"""A local Ray cluster (2 CPUs) shared by the Ray backend tests; skipped without the extra."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the Ray backend tests need the extra: pip install 'referee[ray]'")

# Ray 2.5x writes a token for a cluster it starts under the home directory (~/.ray/auth_token),
# which no test may do; a local test cluster needs none.
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


@pytest.fixture(scope="session")
def ray_cluster() -> str:
    """The cluster's address; workers import referee and these test modules by path."""
    path = os.pathsep.join([str(REPO), str(HERE)])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
