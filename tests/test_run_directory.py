"""Where a run is stored is worked out in one place (the environment included) and travels as a
typed value, ``report.run_dir`` (issue 29)."""

from __future__ import annotations

from pathlib import Path

import pytest

from referee import EvalCase, EvalReport, EvalSuite
from referee.evaluators import Contains
from referee.run.options import RunOptions
from referee.store import list_runs, load_run, runs_dir_or_default


def test_the_runs_directory_default_reads_the_environment_everywhere(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REFEREE_RUNS_DIR", raising=False)
    assert runs_dir_or_default() == Path(".referee") / "runs"
    assert runs_dir_or_default(tmp_path / "given") == tmp_path / "given"
    monkeypatch.setenv("REFEREE_RUNS_DIR", str(tmp_path / "from-env"))
    assert runs_dir_or_default() == tmp_path / "from-env"
    assert RunOptions().runs_dir == tmp_path / "from-env"
    assert RunOptions(runs_dir=tmp_path / "given").runs_dir == tmp_path / "given"
    with pytest.raises(ValueError, match="runs_dir must be a path, got int"):
        RunOptions(runs_dir=3)

    report = _suite().run(lambda q: "ok", verbose=False)  # no runs_dir: the environment's
    assert report.run_dir is not None and report.run_dir.parent == tmp_path / "from-env"
    assert [run.path for run in list_runs()] == [report.run_dir]  # the index reads it too


def _suite() -> EvalSuite:
    return EvalSuite("where").add_cases([EvalCase(input="q", eval_id="c")]).add_evaluators(
        Contains(["ok"]))


def test_a_run_and_its_loaded_copy_say_where_they_are_stored(tmp_path: Path) -> None:
    report = _suite().run(lambda q: "ok", verbose=False, runs_dir=tmp_path)
    assert isinstance(report.run_dir, Path) and (report.run_dir / "meta.json").is_file()
    assert report.metadata["run_dir"] == str(report.run_dir)  # the text, for report.json
    assert "run_dir" not in report.to_dict(with_cases=False)  # stored as metadata's text only
    read_back = EvalReport.from_dict(report.to_dict())
    assert read_back.run_dir == report.run_dir  # a report.json read as text still says where

    moved = tmp_path / "moved"
    report.run_dir.rename(moved)
    assert load_run(moved).run_dir == moved  # from the directory itself, never stale
    assert load_run(moved / "report.json").run_dir == moved
    assert _suite().run(lambda q: "ok", verbose=False, save=False).run_dir is None


def test_options_name_the_run_directory_before_the_run_starts(tmp_path: Path) -> None:
    from referee.record import new_run_id

    run_id = new_run_id()
    options = RunOptions(runs_dir=tmp_path, run_id=run_id, verbose=False)
    assert options.run_dir == tmp_path / run_id and not options.run_dir.exists()
    report = _suite().run(lambda q: "ok", options=options)
    assert report.run_id == run_id and report.run_dir == options.run_dir
    assert RunOptions(resume=tmp_path / run_id).run_dir == tmp_path / run_id
    assert RunOptions(save=False, run_id=run_id).run_dir is None
    assert RunOptions().run_dir is None  # named when the run starts
    for bad in ("", "../up", "a/b", ".."):
        with pytest.raises(ValueError, match="run_id must be a directory name"):
            RunOptions(run_id=bad)
