"""Issue 22: a model's exception keeps its traceback with the case, redacted and bounded, and
the reports show it (cases.jsonl, results.json, the console, the HTML case detail in Chromium);
the model's latency and the time spent scoring are shown apart."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
from test_report_samples import chromium_dom

from referee.cli import main
from referee.report.store import load_run

SECRET = "gw-live-7f3a9c1e5b2d8a4f"

SUITE = """
    import os
    import time
    from referee import EvalCase, EvalSuite
    from referee.evaluators.deterministic import Contains

    suite = EvalSuite("tracebacks")
    suite.add_cases([EvalCase(input=q, name=q) for q in ("lookup", "deep", "fine")])
    suite.add_evaluator(Contains(["fine"]))

    def lookup(record):
        return record["answer"]

    def deep(n):
        return deep(n + 1)

    def model(prompt):
        if prompt == "lookup":
            return lookup(None)
        if prompt == "deep":
            try:
                deep(0)
            except RecursionError as exc:
                raise RuntimeError("gave up, key " + os.environ["OPENAI_API_KEY"] + " after"
                                   + " calls" * 3000) from exc
        time.sleep(0.05)
        return "fine"
"""


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch, capsys) -> Path:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.delenv("REFEREE_DEBUG", raising=False)
    suite = tmp_path / "suite_tracebacks.py"
    suite.write_text(textwrap.dedent(SUITE))
    assert main(["run", str(suite), "--out", str(tmp_path / "runs")]) == 0
    (found,) = (tmp_path / "runs").iterdir()
    return found


def test_the_traceback_is_stored_redacted_and_bounded(run_dir: Path, capsys) -> None:
    out = capsys.readouterr().out
    cases = {c.name: c for c in load_run(run_dir).cases}
    lookup = cases["lookup"].traceback
    assert lookup.startswith("Traceback (most recent call last):")
    assert re.search(r'suite_tracebacks\.py", line \d+, in model\n.*?, in lookup\n', lookup, re.S)
    assert lookup.rstrip().endswith("TypeError: 'NoneType' object is not subscriptable")
    assert "referee/run/engine.py" not in lookup  # referee's own frames calling the model
    deep = cases["deep"].traceback
    assert "RecursionError" in deep and "gave up, key *** after calls" in deep
    assert len(deep) <= 8_000 + 100 and "characters cut) …" in deep
    assert deep.rstrip().endswith("calls calls")
    assert cases["fine"].traceback is None
    for name in ("cases.jsonl", "results.json", "report.html"):
        text = (run_dir / name).read_text()
        assert SECRET not in text and "in lookup" in text, name
    # The failing case's lines say where it was raised.
    # The console wraps long lines where the run's path happens to fall: read it unwrapped.
    unwrapped = re.sub(r"\s+", "", out)
    assert re.search(r"raisedat.*suite_tracebacks\.py:\d+inlookup\(REFEREE_DEBUG=1", unwrapped)


def test_referee_debug_prints_the_whole_traceback(run_dir: Path, monkeypatch, capsys) -> None:
    capsys.readouterr()
    monkeypatch.setenv("REFEREE_DEBUG", "1")
    from referee.report.console import render_console

    render_console(load_run(run_dir))
    out = capsys.readouterr().out
    assert "Traceback (most recent call last):" in out and "in lookup" in out
    assert "return record[\"answer\"]" in out and SECRET not in out


def test_the_html_case_detail_shows_the_traceback_and_latency_apart(run_dir: Path,
                                                                  tmp_path: Path) -> None:
    dom = chromium_dom((run_dir / "report.html").as_uri(), tmp_path)
    tracebacks = re.findall(r'<details class="traceback" open=""><summary>traceback</summary>'
                            r"<pre>(.*?)</pre>", dom, re.S)
    assert len(tracebacks) == 2 and any("in lookup" in t for t in tracebacks)
    header = re.search(r"<thead>(.*?)</thead>", dom, re.S).group(1)
    assert "model (s)" in header and "scoring (s)" in header and "latency (s)" not in header
    fine = load_run(run_dir).cases[2]
    assert fine.execution.latency_s >= 0.05 and fine.scoring_seconds < 0.05
    row = re.search(r'<tr data-case="2".*?</tr>', dom, re.S).group(0)
    cells = re.findall(r'<td class="num" data-v="([^"]*)">', row)
    assert f"{fine.execution.latency_s}" in cells and f"{fine.scoring_seconds}" in cells
    # The run's means, apart, on the page and in both JSON files (the stored tally and the report).
    summary = load_run(run_dir).summary
    assert summary.avg_model_latency_seconds == fine.execution.latency_s  # the one that answered
    assert summary.avg_scoring_seconds < summary.avg_model_latency_seconds
    timing = re.search(r'<span id="timing">([^<]*)</span>', dom).group(1)
    assert timing == (f"mean per case: model latency {summary.avg_model_latency_seconds:.3f}s, "
                      f"scoring {summary.avg_scoring_seconds:.3f}s")
    results = json.loads((run_dir / "results.json").read_text())
    assert results["summary"]["avg_model_latency_seconds"] == summary.avg_model_latency_seconds
    assert results["cases"][2]["scoring_seconds"] == fine.scoring_seconds


def test_a_case_run_several_times_keeps_the_traceback_and_the_scoring_time() -> None:
    from referee import EvalCase, EvalSuite
    from referee.evaluators.deterministic import Contains

    suite = EvalSuite("runs")
    suite.add_cases([EvalCase(input="fine"), EvalCase(input="broken")])
    suite.add_evaluator(Contains(["fine"]))

    def model(prompt: str) -> str:
        if prompt == "broken":
            raise ValueError("no answer for " + prompt)
        return prompt

    fine, broken = suite.run(model, verbose=False, save=False, runs=3).cases
    assert fine.scoring_seconds is not None and fine.traceback is None
    assert broken.traceback.rstrip().endswith("ValueError: no answer for broken")
    assert ", in model\n" in broken.traceback and broken.scoring_seconds is None
