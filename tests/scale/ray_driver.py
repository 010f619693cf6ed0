"""A driver process for the resume test: connects to the test's cluster and runs slowly."""

import sys
from pathlib import Path

import ray
from scale_models import Logged, suite

from referee.scale import RayBackend

address, runs_dir, count = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
ray.init(address=address, log_to_driver=False)
suite(count).run(Logged(runs_dir / "first.log", delay_s=0.05), verbose=False, runs_dir=runs_dir,
                 concurrency=1, backend=RayBackend(shard_size=10, task_cpus=0.5))
