"""Small things a user trips on (issue 31's papercuts): messages that say what is wrong in one
line, and options that every judging command spells alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from referee import EvalCase, EvalSuite
from referee.cli import main
from referee.evaluators.deterministic import Contains


def _err(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.strip()]


@pytest.fixture
def labels_file(tmp_path: Path) -> Path:
    path = tmp_path / "labels.jsonl"
    path.write_text('{"input": "q", "output": "a", "label": "pass"}\n'
                    '{"input": "q2", "output": "b", "label": "fail"}\n')
    return path


def test_an_unknown_judge_provider_is_named_with_the_known_ones(labels_file, capsys) -> None:
    base = ["calibrate", str(labels_file), "--evaluator", "faithfulness"]
    assert main([*base, "--judge", "foo/bar"]) == 2
    [line] = _err(capsys)
    assert "unknown provider 'foo'" in line and "anthropic" in line and "google, openai" in line
    assert "is not PROVIDER/MODEL" not in line
    assert main([*base, "--judge", "opnai/some-model"]) == 2
    assert "did you mean 'openai'?" in _err(capsys)[0]
    assert main([*base, "--judge", "openai"]) == 2  # no model at all: the shape is wrong
    assert "is not PROVIDER/MODEL" in _err(capsys)[0]


def test_a_misspelt_evaluator_gets_a_suggestion(labels_file, capsys) -> None:
    assert main(["calibrate", str(labels_file), "--evaluator", "faithfulnes"]) == 2
    [line] = _err(capsys)
    assert "unknown evaluator 'faithfulnes'; did you mean 'faithfulness'?" in line


def _stored_run(runs: Path) -> Path:
    suite = EvalSuite("labelled").add_cases([EvalCase(eval_id=f"c{i}", input=f"q{i}")
                                             for i in range(12)])
    suite.add_evaluator(Contains(["answer"]))
    report = suite.run(lambda prompt: "answer", verbose=False, runs_dir=runs, formats=())
    return Path(report.metadata["run_dir"])


def test_another_runs_labels_are_refused_in_one_line(tmp_path: Path, capsys) -> None:
    first, second = _stored_run(tmp_path / "a"), _stored_run(tmp_path / "b")
    other_run = json.loads((first / "meta.json").read_text())["run_id"]
    labels = tmp_path / "first.jsonl"
    labels.write_text("".join(json.dumps({"label": "pass", "metadata": {
        "run_id": other_run, "case_id": f"c{i}", "criterion": "contains"}}) + "\n"
        for i in range(12)))
    assert main(["labels", "import", str(second), str(labels)]) == 2
    [line] = _err(capsys)
    assert f"lines 1-12: field 'metadata.run_id': labels of run {other_run!r}" in line
    assert "all 12 lines" in line and line.endswith("nothing was imported")


def test_a_missing_run_directory_reads_plainly(tmp_path: Path, capsys) -> None:
    labels = tmp_path / "labels.jsonl"
    labels.write_text("{}\n")
    assert main(["labels", "import", str(tmp_path / "nope"), str(labels)]) == 2
    [line] = _err(capsys)
    assert line == (f"referee: error: {tmp_path / 'nope'}: no such directory (expected a "
                    "stored run's directory, as `referee list` shows it)")
