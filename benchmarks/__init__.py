"""Side-by-side benchmarks of referee against its peers (multivon-eval, deepeval).

Run ``python -m benchmarks.run --help``. Modules imported by the peer runners
(``workloads``, ``replies``, ``measure``) use only the standard library, because the peers run in
their own virtual environment where referee is not installed.
"""
