"""The labelling queue holds only what a judge scored: labels measure a judge's errors, so a
run of deterministic checks has nothing to label and says so in one line (report.html in
headless Chromium, the viewer's labelling page, `referee labels`); a mixed run queues its judged
criterion's results alone; a run stored before referee recorded which criteria a judge scores
(or a report built in code) queues every result, as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("numpy")

# The scripted judge of the calibration tests (a fixture, used by name below).
from calibrate.test_calibrate_end_to_end import server  # noqa: E402,F401
from chromium_cdp import Browser  # noqa: E402
from labels.test_labels_end_to_end import ROWS, _cases  # noqa: E402
from test_viewer import _get  # noqa: E402

from referee import CompositeCriterion, ContainsKeywordsCriterion, ResponseMatchCriterion  # noqa: E402
from referee.cli import main  # noqa: E402
from referee.evaluators import Contains, Faithfulness, NotEmpty  # noqa: E402
from referee.judge import JudgeConfig, JudgePanel  # noqa: E402
from referee.judge.cascade import JudgeCascade  # noqa: E402
from referee.labels import LABELS_FILE, review_queue  # noqa: E402
from referee.labels._queue import nothing_to_label  # noqa: E402
from referee.record import judged_labels  # noqa: E402
from referee.report.html import render_html  # noqa: E402
from referee.report.store import load_run  # noqa: E402
from referee.report.viewer import start_viewer  # noqa: E402
from referee.run.describe import criteria_difference, describe_run  # noqa: E402
from referee.run.session import RunOptions, run_stored  # noqa: E402
from referee.run.sync import run_sync  # noqa: E402

NOTHING = "Nothing to label: no judge scored this run"


def _run(runs: Path, criteria: list, formats: tuple[str, ...] = ("json",)) -> Path:
    async def answer(case, caller) -> str:
        return case.metadata["answer"]

    report = run_sync(run_stored(
        name="support bot", model_id="replayed answers", cases=_cases(), criteria=criteria,
        execute=answer, options=RunOptions(runs_dir=runs, formats=formats)))
    assert report.run_dir is not None
    return report.run_dir


def _deterministic() -> list:
    return [Contains(["answer"]), NotEmpty()]


def _judge() -> JudgeConfig:
    return JudgeConfig(provider="openai", model="gpt-4o-mini")


def test_a_run_of_deterministic_checks_queues_nothing_and_the_report_says_so_in_one_line(
        tmp_path):
    run_dir = _run(tmp_path / "runs", _deterministic(), formats=("json", "html"))
    meta = json.loads((run_dir / "meta.json").read_text())
    assert [(c["name"], c["judged"]) for c in meta["criteria"]] == [
        ("contains", False), ("not_empty", False)]
    report = load_run(run_dir)
    assert report.judged_criteria == [] and report.total == ROWS
    assert review_queue(report) == []
    with Browser(tmp_path) as page:
        page.goto((run_dir / "report.html").as_uri())
        assert page.evaluate("document.getElementById('label-panel')") is None
        assert page.evaluate("document.getElementById('labelled-count')") is None
        line = page.evaluate("document.getElementById('label-none').innerText")
    assert line.startswith(NOTHING) and "\n" not in line.strip()


def test_the_viewer_says_it_in_one_line_on_the_labelling_page_and_links_to_none(tmp_path):
    run_dir = _run(tmp_path / "runs", _deterministic())
    with start_viewer(None, run_dir.parent) as viewer:
        status, run_page, _ = _get(viewer, f"/run/{run_dir.name}")
        assert status == 200 and f'href="/run/{run_dir.name}/label"' not in run_page
        assert NOTHING in run_page and 'id="label-panel"' not in run_page
        status, labels_page, _ = _get(viewer, f"/run/{run_dir.name}/label")
    assert status == 200
    assert f'<p id="label-none">{NOTHING}' in labels_page
    assert 'id="labelled-count"' not in labels_page and 'id="labelling"' not in labels_page


def test_referee_labels_says_it_in_one_line_for_a_run_no_judge_scored(tmp_path, capsys):
    run_dir = _run(tmp_path / "runs", _deterministic())
    capsys.readouterr()
    for argv in (["export"], ["export", "--output", str(tmp_path / "rows.jsonl")],
                 ["estimate"]):
        assert main(["labels", argv[0], str(run_dir), *argv[1:]]) == 0
        out, err = capsys.readouterr()
        assert out == "" and err.strip().splitlines() == [
            f"referee: {run_dir}: nothing to label: no judge scored this run, and labels "
            "measure a judge's errors (its criteria are all deterministic checks)"]
    assert not (tmp_path / "rows.jsonl").exists()
    assert main(["labels", "estimate", str(run_dir), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == [] and len(err.strip().splitlines()) == 1


def test_a_mixed_run_queues_only_the_judged_criterions_results(tmp_path, server, capsys):
    run_dir = _run(tmp_path / "runs", [Contains(["answer"]), Faithfulness(judge=_judge())])
    report = load_run(run_dir)
    assert report.judged_criteria == ["faithfulness"]
    assert nothing_to_label(report) is None
    queue = review_queue(report)
    assert len(queue) == ROWS and {item.criterion for item in queue} == {"faithfulness"}
    assert {(c.eval_id, r.criterion) for c in report.cases for r in c.criterion_results} \
        >= {(c.eval_id, "contains") for c in report.cases}  # the check is still scored
    html = render_html(report)
    assert f"0 of {ROWS} labelled" in html and 'id="label-none"' not in html
    with start_viewer(None, run_dir.parent) as viewer:
        status, page, _ = _get(viewer, f"/run/{run_dir.name}/label")
    assert status == 200 and f"0 of {ROWS} labelled" in page
    data = json.loads(page.split('id="label-data">', 1)[1].split("</script>", 1)[0])
    assert {item["criterion"] for item in data["queue"]} == {"faithfulness"}
    capsys.readouterr()
    assert main(["labels", "export", str(run_dir)]) == 0  # no labels yet: no "nothing to label"
    assert capsys.readouterr().err.strip() == "0 labelled row(s)"


def _as_stored_before(run_dir: Path) -> None:
    """Make ``run_dir`` look as a run stored before referee recorded which criteria a judge
    scores: no ``judged`` in meta.json's criteria, no ``judged_criteria`` in report.json."""
    meta_path, report_path = run_dir / "meta.json", run_dir / "report.json"
    meta = json.loads(meta_path.read_text())
    for criterion in meta["criteria"]:
        del criterion["judged"]
    meta_path.write_text(json.dumps(meta))
    report = json.loads(report_path.read_text())
    del report["judged_criteria"]
    report_path.write_text(json.dumps(report))


def test_a_run_stored_before_the_record_queues_every_result_as_before(tmp_path, capsys):
    run_dir = _run(tmp_path / "runs", _deterministic())
    _as_stored_before(run_dir)
    report = load_run(run_dir)
    assert report.judged_criteria is None and nothing_to_label(report) is None
    assert len(review_queue(report)) == 2 * ROWS
    assert 'id="label-panel"' in render_html(report)
    capsys.readouterr()
    assert main(["labels", "export", str(run_dir)]) == 0
    assert capsys.readouterr().err.strip() == "0 labelled row(s)"
    # Interrupted (no report.json), it is rebuilt from meta.json, which says nothing either.
    (run_dir / "report.json").unlink()
    assert len(review_queue(load_run(run_dir))) == 2 * ROWS


def test_an_interrupted_run_reads_which_criteria_a_judge_scored_from_its_meta(tmp_path):
    run_dir = _run(tmp_path / "runs", _deterministic())
    (run_dir / "report.json").unlink()  # as a killed run leaves it
    report = load_run(run_dir)
    assert report.metadata["interrupted"] is True and report.judged_criteria == []
    assert review_queue(report) == [] and nothing_to_label(report) is not None


def test_a_report_json_without_the_record_takes_it_from_meta_json(tmp_path):
    """`referee serve`'s windows write report.json without it; meta.json has the criteria."""
    run_dir = _run(tmp_path / "runs", _deterministic())
    report_path = run_dir / "report.json"
    report = json.loads(report_path.read_text())
    del report["judged_criteria"]
    report_path.write_text(json.dumps(report))
    assert load_run(run_dir).judged_criteria == []


def test_a_labelled_run_keeps_its_labels_exportable(tmp_path, server, capsys):
    """Labels on the judged criterion export as before; the check's results are not offered."""
    run_dir = _run(tmp_path / "runs", [Contains(["answer"]), Faithfulness(judge=_judge())])
    first = review_queue(load_run(run_dir))[0]
    person = tmp_path / "person.jsonl"
    person.write_text(json.dumps({"label": "pass", "metadata": {
        "case_id": first.case_id, "criterion": first.criterion}}) + "\n")
    assert main(["labels", "import", str(run_dir), str(person), "--labeller", "ana"]) == 0
    assert (run_dir / LABELS_FILE).is_file()
    capsys.readouterr()
    assert main(["labels", "export", str(run_dir)]) == 0
    out, err = capsys.readouterr()
    [row] = [json.loads(line) for line in out.splitlines()]
    assert row["metadata"]["criterion"] == "faithfulness" and err.strip() == "1 labelled row(s)"


def test_nested_panel_and_cascade_judges_count_as_judged():
    judge, strong = _judge(), JudgeConfig(provider="openai", model="gpt-4o")
    both = CompositeCriterion([ResponseMatchCriterion(judge=judge),
                               ContainsKeywordsCriterion(keywords=["a"])])
    checks = CompositeCriterion([ContainsKeywordsCriterion(keywords=["a"])])
    checks.name = "checks only"
    criteria = [both, checks, Faithfulness(judge=JudgePanel(members=[judge, strong])),
                Faithfulness(judge=JudgeCascade([judge, strong])), Contains(["a"])]
    description = describe_run(criteria)
    assert [c["judged"] for c in description.criteria] == [True, False, True, True, False]
    assert description.judged_criteria == [both.name, "faithfulness", "faithfulness#2"]


def test_namesakes_are_told_apart_as_their_results_are():
    described = [{"name": "contains", "judged": False}, {"name": "contains", "judged": True}]
    assert judged_labels(described) == ["contains#2"]
    assert judged_labels([{"name": "contains"}]) is None  # stored before: says nothing
    assert judged_labels(None) is None


def test_a_run_stored_before_the_record_still_resumes():
    """A resume compares each criterion's class and settings, not the new ``judged``."""
    now = describe_run([Contains(["answer"])]).criteria
    stored = [{k: v for k, v in c.items() if k != "judged"} for c in now]
    assert criteria_difference(stored, now) is None
