"""One rule for the reports a run writes when it names none, from the CLI and from Python
(issue 31, item 5: README says every run writes a self-contained report.html)."""

from __future__ import annotations

import re
from pathlib import Path

from referee import AgentEvaluator, EvalCase, EvalSuite
from referee.cli import main
from referee.evaluators.deterministic import Contains
from referee.report_formats import DEFAULT_FORMATS
from referee.run.options import RunOptions

ROOT = Path(__file__).resolve().parent.parent
WRITTEN = {"meta.json", "cases.jsonl", "report.json", "results.json", "junit.xml", "report.html"}


def _suite() -> EvalSuite:
    suite = EvalSuite("formats").add_cases([EvalCase(input="q1"), EvalCase(input="q2")])
    suite.add_evaluator(Contains(["refund"]))
    return suite


def _files(run_dir: str) -> set[str]:
    return {p.name for p in Path(run_dir).iterdir() if p.is_file()}


def test_a_python_run_writes_the_reports_the_readme_lists(tmp_path: Path, capsys) -> None:
    report = _suite().run(lambda prompt: "refund issued", runs_dir=tmp_path)
    assert _files(report.metadata["run_dir"]) >= WRITTEN
    html = (Path(report.metadata["run_dir"]) / "report.html").read_text()
    assert not re.search(r'<(script|link)[^>]+(src|href)="https?://', html)  # self-contained
    assert "formats" in capsys.readouterr().out  # verbose: the console summary too


def test_a_quiet_python_run_writes_the_files_and_prints_nothing(tmp_path: Path, capsys) -> None:
    report = _suite().run(lambda prompt: "refund issued", runs_dir=tmp_path, verbose=False)
    assert _files(report.metadata["run_dir"]) >= WRITTEN
    assert capsys.readouterr().out == ""


def test_an_agent_run_writes_them_too_and_named_formats_still_rule(tmp_path: Path) -> None:
    def agent(message: str) -> str:
        return "refund issued"

    report = AgentEvaluator(agent, criteria=[Contains(["refund"])]).evaluate_sync(
        [EvalCase(input="q")], output_dir=tmp_path / "agent", verbose=False)
    assert _files(report.metadata["run_dir"]) >= WRITTEN
    named = _suite().run(lambda prompt: "x", runs_dir=tmp_path / "named", verbose=False,
                         formats="junit")
    assert _files(named.metadata["run_dir"]) & {"results.json", "report.html"} == set()
    assert "junit.xml" in _files(named.metadata["run_dir"])
    none = _suite().run(lambda prompt: "x", runs_dir=tmp_path / "none", verbose=False,
                        formats=())
    assert _files(none.metadata["run_dir"]) == {"meta.json", "cases.jsonl", "report.json"}


def test_an_unsaved_run_writes_nothing_and_is_not_refused(tmp_path: Path) -> None:
    report = _suite().run(lambda prompt: "refund issued", save=False, verbose=False)
    assert report.passed == 2 and "run_dir" not in report.metadata


def test_the_cli_and_python_share_the_rule(tmp_path: Path, capsys) -> None:
    assert RunOptions().formats == DEFAULT_FORMATS
    assert RunOptions(verbose=False).formats == DEFAULT_FORMATS[1:]
    assert RunOptions(save=False).formats == ("console",)
    assert RunOptions.from_command_line(quiet=True, formats=None).formats == DEFAULT_FORMATS[1:]
    code = main(["run", str(ROOT / "examples" / "quickstart" / "eval_shop.py"), "--out",
                 str(tmp_path), "-q"])
    assert code == 0
    (run_dir,) = tmp_path.iterdir()
    assert _files(str(run_dir)) >= WRITTEN
    capsys.readouterr()
    assert "console,json,junit,html" in _help(capsys)


def _help(capsys) -> str:
    try:
        main(["run", "--help"])
    except SystemExit:
        pass
    return re.sub(r"\s+", "", capsys.readouterr().out)
