"""Durability trust hunt: run directories whose metadata lies about its own shape, and resumes
that would mix results the stored run never produced (another judge, other cases, a half-done
re-score). Each test failed before its fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from referee import EvalCase, EvalSuite
from referee.cli import main
from referee.errors import InputError
from referee.evaluators.deterministic import Contains
from referee.report.store import list_runs, load_run


def _suite(name: str, n: int, needle: str = "yes") -> EvalSuite:
    suite = EvalSuite(name)
    suite.add_cases([EvalCase(input=f"question {i}", eval_id=f"q{i}") for i in range(n)])
    suite.add_evaluator(Contains([needle]))
    return suite


def _stored_run(runs: Path, name: str, n: int) -> Path:
    report = _suite(name, n).run(lambda prompt: "yes", verbose=False, runs_dir=runs)
    return Path(report.metadata["run_dir"])


def _interrupt(run_dir: Path, keep: int) -> None:
    """What a kill leaves: no report.json, and only the first ``keep`` case lines."""
    (run_dir / "report.json").unlink()
    lines = (run_dir / "cases.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (run_dir / "cases.jsonl").write_text("".join(lines[:keep]), encoding="utf-8")


@pytest.mark.parametrize(("field", "value", "expected"), [
    ("metadata", [1], "a JSON object"),
    ("case_ids", 5, "a list of case ids"),
    ("case_ids", [[1]], "a list of case ids"),
    ("started_at", "yesterday", "a number"),
    ("judge", "gpt", "a JSON object"),
    ("run_id", 5, "a string"),
])
def test_a_meta_json_field_of_the_wrong_type_is_one_line_and_hides_no_other_run(
        tmp_path: Path, capsys, field: str, value: object, expected: str) -> None:
    runs = tmp_path / "runs"
    whole = _stored_run(runs, "whole", 2)
    broken = _stored_run(runs, "broken", 2)
    _interrupt(broken, keep=1)
    meta = json.loads((broken / "meta.json").read_text(encoding="utf-8"))
    meta[field] = value
    (broken / "meta.json").write_text(json.dumps(meta), encoding="utf-8")

    assert main(["list", "--dir", str(runs)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2, out  # one line per run, the damaged one's reason on its own line
    [broken_line] = [line for line in out if line.startswith(broken.name)]
    assert "damaged" in broken_line and "meta.json" in broken_line
    assert f"field '{field}'" in broken_line and expected in broken_line
    assert any(line.startswith(whole.name) and "2/2" in line for line in out)

    with pytest.raises(InputError, match=rf"meta\.json: field '{field}'.*expected {expected}"):
        load_run(broken)
    assert main(["compare", str(whole), str(broken)]) == 2
    [err] = capsys.readouterr().err.strip().splitlines()
    assert "meta.json" in err and f"field '{field}'" in err
    assert [run.path for run in list_runs(runs) if run.damaged] == [broken]
