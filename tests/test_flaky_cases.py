"""Flaky cases: with --trials N (runs=N), cases whose verdict flips between runs are listed with
their flip rate, and --flaky quarantine|fail decides what the gate does with them."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

import pytest
from rich.console import Console

from referee import EvalCase, EvalSuite
from referee.errors import EvalGateFailure
from referee.evaluators.deterministic import Contains
from referee.record import EvalReport
from referee.report.console import render_console
from referee.report.html import render_html
from referee.run.gates import apply_gates
from referee.run.options import RunOptions
from referee.stats import flip_rate


def test_flip_rate_by_hand() -> None:
    # Two runs chosen from 3 passes and 1 fail disagree in 3 of the 6 pairs.
    assert flip_rate(3, 1) == pytest.approx(0.5)
    assert flip_rate(2, 2) == pytest.approx(4 / 6)
    assert flip_rate(1, 1) == 1.0 and flip_rate(5, 0) == 0.0
    assert flip_rate(1, 0) is None and flip_rate(0, 0) is None
    with pytest.raises(ValueError):
        flip_rate(-1, 2)


# Case i passes in these runs (0-based), of 4; every other case passes all of them.
PASSING_RUNS = {0: {0, 2}, 1: {3}, 2: set()}


def _run(tmp_path: Path, **settings) -> EvalReport:
    suite = EvalSuite("flaky").add_cases([EvalCase(input=f"q{i}") for i in range(10)])
    suite.add_evaluators(Contains(["ok"]))
    calls: dict[int, int] = {}

    def model(question: str) -> str:
        index = int(question[1:])
        run = calls.get(index, 0)
        calls[index] = run + 1
        return "ok" if run in PASSING_RUNS.get(index, {0, 1, 2, 3}) else "no"

    return suite.run(model, verbose=False, runs=4, runs_dir=tmp_path, concurrency=1, **settings)


def test_flaky_cases_are_listed_with_their_flip_rate(tmp_path: Path) -> None:
    report = _run(tmp_path)
    assert [c.label for c in report.flaky_cases] == ["q0", "q1"]  # highest flip rate first
    entries = report.to_dict()["trials"]["flaky_cases"]
    assert [(e["passed_runs"], e["runs"]) for e in entries] == [(2, 4), (1, 4)]
    assert [e["flip_rate"] for e in entries] == pytest.approx([4 / 6, 3 / 6])
    # q2 failed every run: a steady failure, not a flaky one.
    assert all(e["name"] != "q2" for e in entries)
    out = io.StringIO()
    render_console(report, Console(file=out, width=120))
    text = out.getvalue()
    assert "Flaky cases (the verdict flipped between runs" in text
    assert "q0  passed 2 of 4 runs, flip rate 0.67" in text
    assert "q1  passed 1 of 4 runs, flip rate 0.50" in text
    page = render_html(report)
    assert 'id="flaky-cases"' in page and "q0  passed 2 of 4 runs, flip rate 0.67" in page


def test_by_default_flaky_cases_fail_the_gate_as_failures(tmp_path: Path) -> None:
    # 7 of 10 pass every run: pass rate 0.70 < 0.75.
    with pytest.raises(EvalGateFailure, match=r"pass rate 70.0% < threshold 75.0%"):
        _run(tmp_path, fail_threshold=0.75)


def test_quarantine_leaves_flaky_cases_out_of_the_pass_rate(tmp_path: Path) -> None:
    # Without the 2 flaky cases: 7 of 8 pass, 0.875 >= 0.75.
    report = _run(tmp_path, fail_threshold=0.75, flaky="quarantine")
    assert report.flaky_count == 2
    with pytest.raises(EvalGateFailure, match=r"pass rate 87.5% < threshold 90.0% \(7 of 8 "
                                              r"evaluated case\(s\) passed; 2 flaky case\(s\) "
                                              r"quarantined\)"):
        apply_gates(report, 0.9, flaky="quarantine")


def test_fail_fails_the_gate_on_any_flaky_case(tmp_path: Path) -> None:
    with pytest.raises(EvalGateFailure) as failure:
        _run(tmp_path, fail_threshold=0.5, flaky="fail")
    message = str(failure.value)
    assert message.startswith("Eval gate FAILED: 2 flaky case(s), whose verdict flipped")
    assert "q0 (flip rate 0.67), q1 (flip rate 0.50)" in message


def test_flaky_needs_several_runs() -> None:
    with pytest.raises(ValueError, match="flaky quarantine needs several runs of each case"):
        RunOptions(flaky="quarantine")
    with pytest.raises(ValueError, match="flaky"):
        RunOptions(flaky="sometimes", runs=3)
    with pytest.raises(ValueError, match="flaky must be"):
        apply_gates(EvalReport(name="x"), flaky="sometimes")


SUITE_FILE = """
    from referee import EvalCase, EvalSuite
    from referee.evaluators.deterministic import Contains

    suite = EvalSuite("cli-flaky").add_cases([EvalCase(input=f"q{i}") for i in range(5)])
    suite.add_evaluators(Contains(["ok"]))
    calls = {}

    def model(question):
        calls[question] = calls.get(question, 0) + 1
        return "no" if question == "q0" and calls[question] == 2 else "ok"
"""


def test_cli_trials_and_flaky(tmp_path: Path, capsys) -> None:
    from referee.cli import main

    target = tmp_path / "evals.py"
    target.write_text(textwrap.dedent(SUITE_FILE))
    runs = ["--out", str(tmp_path / "runs"), "--concurrency", "1"]
    assert main(["run", str(target), *runs, "--trials", "3", "--fail-threshold", "0.9",
                 "--flaky", "quarantine"]) == 0
    out = capsys.readouterr().out
    assert "Runs per case: 3" in out and "q0  passed 2 of 3 runs, flip rate 0.67" in out
    assert main(["run", str(target), *runs, "--trials", "3", "--flaky", "fail", "-q"]) == 1
    assert "1 flaky case(s)" in capsys.readouterr().err
    assert main(["run", str(target), *runs, "--flaky", "quarantine"]) == 2
    err = capsys.readouterr().err
    assert "--flaky quarantine needs several runs" in err and "give --trials N with N >= 2" in err
