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


def test_the_serve_benchmark_measures_grpc_beside_http_on_the_same_traffic():
    pytest.importorskip("grpc")
    result = serve_benchmark.side_by_side(traces=20, spans_per_trace=3, per_request=5,
                                          connections=2, concurrency=2, rounds=2)
    first, second = result["rounds"]
    assert (first["first"], second["first"]) == ("http", "grpc")  # the order alternates
    for pair in (first, second):
        for transport in ("http", "grpc"):
            row = pair[transport]
            assert row["transport"] == transport
            assert (row["spans"], row["requests"], row["cases_scored"]) == (60, 4, 20)
            assert row["rejected"] == 0
        assert pair["http"]["answers"] == {"200": 4} and pair["grpc"]["answers"] == {"OK": 4}
        assert set(pair["ratio"]) == {"spans_per_s_received", "cases_per_s_scored"}
    assert all(value > 0 for value in result["median_ratio"].values())
