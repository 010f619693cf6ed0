"""The judge-cascade benchmark runs, and its counts add up (never its timings)."""

from __future__ import annotations

from benchmarks.cascade import main


def test_the_cascade_benchmark_counts_add_up(isolated_judge: None) -> None:
    result = main(["--cases", "20", "--seed", "3"])
    rows = {row["config"]: row for row in result["rows"]}
    assert rows["strong alone"]["requests"] == 20
    assert rows["strong alone"]["agreement_with_strong"] == 1.0
    margin = rows["cascade: margin 0.1"]
    escalated = round(margin["escalation_rate"] * 20)
    assert margin["requests"] == 20 + escalated
    assert margin["cost_usd"] < rows["strong alone"]["cost_usd"]
    assert all(row["errors"] == 0 for row in rows.values())
