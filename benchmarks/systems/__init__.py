"""One runner per system; each is started as ``python -m benchmarks.systems.<name>`` in its own process."""
