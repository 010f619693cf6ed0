"""Issue 22: ``--rescore`` and ``--retry-errors`` keep the scoring they replace.

A run scored three times (first run, a retry of its errors, a re-score with other criteria)
keeps every scoring: ``RUN@N`` is readable by ``load_run``, ``referee compare``, ``referee
list`` and the viewer (checked in headless Chromium), cases.jsonl holds one line per case, and
a run stored before versions existed reads as it always did.
"""

from __future__ import annotations

import json
import re
import textwrap
import urllib.request
from pathlib import Path

import pytest
from test_report_samples import chromium_dom

from referee.cli import main
from referee.errors import InputError
from referee.report.model import CaseStatus
from referee.report.store import RunStore, list_runs, load_run
from referee.report.viewer import start_viewer

SUITE = """
    import os
    from pathlib import Path
    from referee import EvalCase, EvalSuite
    from referee.evaluators.deterministic import Contains
    suite = EvalSuite("versions")
    suite.add_cases([EvalCase(input=f"question {{i}}", name=f"case {{i}}") for i in range(5)])
    suite.add_evaluator(Contains([{needle!r}]))
    FLAKY = Path({flag!r})
    def model(prompt):
        if prompt.endswith(("3", "4")) and FLAKY.exists():
            raise RuntimeError("upstream unavailable")
        return "refunds within 30 days"
"""


def _suite_file(tmp_path: Path, needle: str) -> Path:
    path = tmp_path / f"suite_{needle.replace(' ', '_')}.py"
    path.write_text(textwrap.dedent(SUITE.format(needle=needle, flag=str(tmp_path / "flaky"))))
    return path


def _statuses(report) -> list[str]:
    return [c.status.value.lower() for c in report.cases]


@pytest.fixture
def scored_three_times(tmp_path: Path, capsys) -> Path:
    runs = tmp_path / "runs"
    (tmp_path / "flaky").touch()
    thirty = _suite_file(tmp_path, "30 days")
    assert main(["run", str(thirty), "--out", str(runs), "-q"]) == 0
    (run_dir,) = runs.iterdir()
    (tmp_path / "flaky").unlink()
    assert main(["run", str(thirty), "--resume", str(run_dir), "--retry-errors", "-q"]) == 0
    sixty = _suite_file(tmp_path, "60 days")
    assert main(["run", str(sixty), "--resume", str(run_dir), "--rescore", "-q"]) == 0
    capsys.readouterr()
    return run_dir


def test_each_scoring_is_kept_and_readable_as_run_at_n(scored_three_times: Path) -> None:
    run_dir = scored_three_times
    first, retried, rescored = (load_run(f"{run_dir}@{n}") for n in (1, 2, 3))
    assert _statuses(first) == ["passed"] * 3 + ["model_error"] * 2
    assert _statuses(retried) == ["passed"] * 5
    assert _statuses(rescored) == ["failed"] * 5
    assert _statuses(load_run(run_dir)) == _statuses(rescored)
    assert [r.metadata["version"] for r in (first, retried, rescored)] == [1, 2, 3]
    # A re-score keeps the model's latency and times only its own scoring.
    assert [c.execution.latency_s for c in rescored.cases] == \
        [c.execution.latency_s for c in retried.cases]
    assert all(c.scoring_seconds is not None for c in rescored.cases)
    assert rescored.metadata["versions"] == [1, 2, 3]
    # One line per case, in every scoring: superseded lines are not left behind.
    for where in (run_dir, run_dir / "versions" / "1", run_dir / "versions" / "2"):
        assert len((where / "cases.jsonl").read_text().splitlines()) == 5
    # Each scoring keeps the reports rendered from it; the top level's are the current one's.
    assert "upstream unavailable" in (run_dir / "versions" / "1" / "report.html").read_text()
    assert "MODEL_ERROR" in (run_dir / "versions" / "1" / "results.json").read_text()
    page = (run_dir / "report.html").read_text()
    assert "upstream unavailable" not in page
    assert re.search(r'<span id="scorings">scoring 1 2 <strong>3</strong>', page)
    assert json.loads((run_dir / "meta.json").read_text())["version"] == 3
    with pytest.raises(InputError, match=r"no scoring 7 .*expected one of @1, @2, @3"):
        load_run(f"{run_dir}@7")


def test_compare_and_list_show_the_scorings(scored_three_times: Path, capsys) -> None:
    run_dir = scored_three_times
    assert main(["compare", f"{run_dir}@1", f"{run_dir}@2", "--json"]) == 0
    diff = json.loads(capsys.readouterr().out)
    assert {c["name"]: c["kind"] for c in diff["changes"] if c["kind"] != "unchanged"} == {
        "case 3": "improvement", "case 4": "improvement"}
    assert main(["compare", f"{run_dir}@2", str(run_dir)]) == 1  # 60 days: every case regressed
    capsys.readouterr()
    assert main(["list", "--dir", str(run_dir.parent)]) == 0
    line = capsys.readouterr().out.strip()
    assert line.endswith("(scoring 3; earlier: @1, @2)"), line
    (info,) = list_runs(run_dir.parent)  # versions/ holds no run of its own
    assert (info.version, info.versions) == (3, (1, 2, 3))


def test_the_viewer_links_every_scoring(scored_three_times: Path, tmp_path: Path) -> None:
    run_dir = scored_three_times
    key = run_dir.name
    with start_viewer(None, run_dir.parent) as handle:
        index = urllib.request.urlopen(handle.base_url + "/", timeout=30).read().decode()
        assert f'href="/run/{key}%401"' in index and f'<option value="{key}@2">' in index
        dom = chromium_dom(f"{handle.base_url}/run/{key}@1", tmp_path)
        compare = urllib.request.urlopen(
            f"{handle.base_url}/compare?a={key}%401&b={key}", timeout=30).read().decode()
    # `referee view RUN_DIR@1` opens scoring 1.
    with start_viewer(Path(f"{run_dir}@1"), tmp_path / "elsewhere") as pinned:
        assert pinned.url.endswith(f"/run/{key}%401")
        opened = urllib.request.urlopen(pinned.url, timeout=30).read().decode()
        assert "upstream unavailable" in opened and "<strong>1</strong>" in opened
    scorings = re.search(r'<span id="scorings">(.*?)</span>', dom).group(1)
    assert "<strong>1</strong>" in scorings
    assert f'href="/run/{key}@2"' in scorings and f'href="/run/{key}"' in scorings
    assert "upstream unavailable" in dom  # scoring 1's page shows scoring 1's verdicts
    assert "regression" in compare


def test_an_interrupted_rescore_keeps_its_number_and_old_runs_read_as_before(
        tmp_path: Path, capsys) -> None:
    runs = tmp_path / "runs"
    thirty = _suite_file(tmp_path, "30 days")
    assert main(["run", str(thirty), "--out", str(runs), "-q"]) == 0
    (run_dir,) = runs.iterdir()
    # A run stored before versions: no version field, no versions/ folder.
    assert "version" not in json.loads((run_dir / "meta.json").read_text())
    assert "versions" not in load_run(run_dir).metadata
    assert list_runs(runs)[0].versions == ()
    assert _statuses(load_run(f"{run_dir}@1")) == ["passed"] * 5

    # A re-score that stops after the scoring was kept (reopened, then released unfinished)
    # is finished by the next --rescore as the same scoring 2, not a 3rd.
    RunStore.reopen(run_dir, new_version=True).release()
    assert (run_dir / "versions" / "1" / "report.json").is_file()
    sixty = _suite_file(tmp_path, "60 days")
    assert main(["run", str(sixty), "--resume", str(run_dir), "--rescore", "-q"]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in (run_dir / "versions").iterdir()) == ["1"]
    assert load_run(run_dir).metadata["versions"] == [1, 2]
    assert _statuses(load_run(f"{run_dir}@1")) == ["passed"] * 5


def test_a_plain_resume_and_a_retry_with_nothing_to_retry_make_no_new_scoring(
        tmp_path: Path, capsys) -> None:
    runs = tmp_path / "runs"
    thirty = _suite_file(tmp_path, "30 days")
    assert main(["run", str(thirty), "--out", str(runs), "-q"]) == 0
    (run_dir,) = runs.iterdir()
    assert main(["run", str(thirty), "--resume", str(run_dir), "--retry-errors", "-q"]) == 0
    capsys.readouterr()
    assert not (run_dir / "versions").exists()
    assert all(c.status is CaseStatus.PASSED for c in load_run(run_dir).cases)


def test_a_kill_between_keeping_a_scoring_and_renumbering_keeps_one_copy(
        tmp_path: Path, capsys) -> None:
    """versions/1 renamed into place, then killed before meta.json said scoring 2: the next
    re-score finds versions/1 whole and keeps it as it is; a staging folder left by a kill
    before the rename is listed by nobody."""
    import shutil

    runs = tmp_path / "runs"
    assert main(["run", str(_suite_file(tmp_path, "30 days")), "--out", str(runs), "-q"]) == 0
    (run_dir,) = runs.iterdir()
    kept = run_dir / "versions" / "1"
    kept.parent.mkdir()
    shutil.copytree(run_dir, kept, ignore=shutil.ignore_patterns("versions", ".*"))
    (kept.parent / ".1.abandoned").mkdir()  # a kill before the rename
    first = (kept / "cases.jsonl").read_bytes()
    assert main(["run", str(_suite_file(tmp_path, "60 days")), "--resume", str(run_dir),
                 "--rescore", "-q"]) == 0
    capsys.readouterr()
    assert (kept / "cases.jsonl").read_bytes() == first
    assert load_run(run_dir).metadata["versions"] == [1, 2]
    assert _statuses(load_run(f"{run_dir}@1")) == ["passed"] * 5
    assert _statuses(load_run(run_dir)) == ["failed"] * 5
    assert [r.run_id for r in list_runs(runs)] == [run_dir.name]
