"""A tiny run of benchmarks/serve.py, so it cannot rot (counts only, no timing)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.common")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # benchmarks/ is at the root

from benchmarks import serve as serve_benchmark  # noqa: E402


@pytest.mark.parametrize("receive_only", [False, True])
def test_the_serve_benchmark_counts_every_trace(receive_only):
    result = serve_benchmark.run(traces=30, spans_per_trace=3, per_request=7, connections=2,
                                 concurrency=2, receive_only=receive_only)
    assert (result["traces"], result["spans"], result["requests"]) == (30, 90, 5)
    assert result["cases_scored"] == 30 and result["rejected"] == 0
    assert result["spans_per_s_received"] > 0 and result["cases_per_s_scored"] > 0
