"""The self-contained report's "Download labels" on an image run, in headless Chromium: the
rows of cases whose judge saw images or PDFs name them by hash as `referee labels export` does,
with the run's blobs folder as an absolute path, so `referee calibrate` on the downloaded file
shows the judge (the real Anthropic SDK against the scripted judge server) what the run's judge
saw; once the run is gone those rows are left out, one line each, never judged on text. A
text-only case's row keeps the keys it always had."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from content_samples import sent_media
from test_content_labels import (
    SHOTS,
    TEXT_ROW_KEYS,
    _calibrate,
    _case,
    _charting,
    _sha,
)

from referee import EvalCase, EvalSuite, ExecutionResult
from referee.calibrate import load_labels
from referee.cli import main
from referee.content import ImagePart, TextPart
from referee.evaluators import Faithfulness
from referee.labels._review import report_labelling
from referee.record import EvalReport
from referee.report.store import load_run

pytest.importorskip("numpy")

from chromium_cdp import Browser  # noqa: E402
from labels.test_report_labels import _downloaded, _open_panel  # noqa: E402

PLAIN = EvalCase(eval_id="plain", input="Which region sold most?",
                 context=["North sold most this quarter."])


def _media(request) -> list[tuple[str, bytes]]:
    """(media type, bytes) of each image or PDF a judge request holds; none for a text one."""
    content = request.body["messages"][0]["content"]
    return [] if isinstance(content, str) else sent_media(request.body, "anthropic", "chat")


def _sent(server) -> list[list[tuple[str, bytes]]]:
    return sorted(_media(request) for request in server.requests)


def _answer(prompt: object) -> ExecutionResult:
    """A chart for the cases that came with pictures; words alone for the text-only case."""
    if isinstance(prompt, str) and "(" not in prompt:
        return ExecutionResult(actual_response="North sold most.")
    return _charting(prompt)


def _image_run(server, runs: Path) -> Path:
    judge = server.judge_config(provider="anthropic", model="claude-sonnet-4-5")
    suite = (EvalSuite("vision").add_cases([_case(0), _case(1), PLAIN])
             .add_evaluators(Faithfulness(judge=judge)))
    report = suite.run(_answer, verbose=False, runs_dir=runs, concurrency=1,
                       formats=("json", "html"))
    return runs / report.run_id


def _label_everything_in_the_report(run_dir: Path, folder: Path) -> str:
    """A person marks every verdict right in report.html and downloads the labels."""
    with Browser(folder) as page:
        page.goto((run_dir / "report.html").as_uri())
        _open_panel(page)
        total = page.evaluate("document.querySelectorAll('#labelling section.item').length")
        for index in range(total):
            page.press("y")
            page.wait_for(f"document.querySelector('#item-{index}').dataset.label !== ''")
        # The panel says where the downloaded rows' images stay, and what calibrate does then.
        note = page.evaluate("document.getElementById('label-media-note').textContent")
        assert str(run_dir.resolve() / "blobs") in note and "leaves out" in note
        return _downloaded(page, folder / "downloads")


@pytest.fixture
def downloaded(server, tmp_path, capsys):
    """An image run labelled in its report, the download saved as downloaded.jsonl; the judge
    requests the run made."""
    run_dir = _image_run(server, tmp_path / "runs")
    sent_by_run = _sent(server)
    text = _label_everything_in_the_report(run_dir, tmp_path)
    out = tmp_path / "downloaded.jsonl"
    out.write_text(text, encoding="utf-8")
    capsys.readouterr()
    server.reset_record()
    return run_dir, out, sent_by_run


def test_downloaded_rows_name_the_images_as_the_export_does(downloaded, capsys):
    run_dir, out, _ = downloaded
    rows = {row["id"]: row for row in map(json.loads, out.read_text().splitlines())}
    assert sorted(rows) == ["plain", "shot0", "shot1"]
    blobs = str(run_dir.resolve() / "blobs")
    assert {rows[i]["blobs"] for i in ("shot0", "shot1")} == {blobs}
    # The text-only case's row is the row it always was: no media keys, no blobs.
    assert set(rows["plain"]) == TEXT_ROW_KEYS
    # The run's own export (printed, so it points at the run's blobs/) names the same parts.
    assert main(["labels", "import", str(run_dir), str(out)]) == 0
    capsys.readouterr()
    assert main(["labels", "export", str(run_dir.resolve())]) == 0
    exported = {row["id"]: row for row in map(json.loads, capsys.readouterr().out.splitlines())}
    for row in (*rows.values(), *exported.values()):
        row.pop("metadata")  # who labelled: the page's and the store's own words
    assert exported == rows
    assert rows["shot1"]["media"][0]["sha256"] == _sha(SHOTS[1])
    assert len(out.read_text()) < 4000  # references only: never the bytes


def test_calibrating_the_download_shows_the_judge_the_runs_images(
        downloaded, server, tmp_path, capsys):
    _, out, sent_by_run = downloaded
    code, report, err = _calibrate(capsys, out, tmp_path / "cal")
    assert code == 0, err
    assert json.loads(report)["scored"] == 3
    assert _sent(server) == sent_by_run  # the very images and PDFs, case by case
    for shot in SHOTS[:2]:
        assert any(("image/png", shot) in _media(request) for request in server.requests)


def test_once_the_run_is_gone_its_image_rows_are_left_out_one_line_each(
        downloaded, server, tmp_path, capsys):
    run_dir, out, _ = downloaded
    shutil.rmtree(run_dir)
    code, report, err = _calibrate(capsys, out, tmp_path / "cal")
    assert code == 0, err
    left_out = [line for line in err.splitlines() if "the row is left out" in line]
    lines = {row["id"]: n for n, row in
             enumerate(map(json.loads, out.read_text().splitlines()), start=1)}
    assert sorted(left_out) == sorted(
        f"referee: {out}:{lines[i]}: field 'media[0]': blob "
        f"{_sha(SHOTS[int(i[-1])])} is missing from {run_dir.resolve() / 'blobs'}: "
        "the row is left out" for i in ("shot0", "shot1"))
    assert json.loads(report)["scored"] == 1  # the text-only row alone, judged on its text
    # Every judge request is the text-only case's: no image row was replayed on its text.
    assert server.requests and all(
        _media(request) == [] and "North sold most this quarter" in json.dumps(request.body)
        for request in server.requests)


def test_a_report_that_knows_no_run_directory_names_no_blobs_folder(downloaded, tmp_path):
    run_dir, _, _ = downloaded
    stored = load_run(run_dir)
    unplaced = EvalReport.model_validate({**stored.model_dump(), "metadata": {
        key: value for key, value in stored.metadata.items() if key != "run_dir"}})
    labelling = report_labelling(unplaced, unplaced.cases, max_field_chars=10_000)
    assert "blobs" not in labelling and labelling["media"]
    assert labelling["rows"]["shot0"]["output_media"][0]["path"] == "chart.png"
    # Such a row read back is left out (no folder to read its parts from), never judged on text.
    row = {"id": "shot0", "input": "q", "output": "a", "label": "pass",
           "media": labelling["rows"]["shot0"]["media"]}
    saved = tmp_path / "no-folder.jsonl"
    saved.write_text(json.dumps(row) + "\n")
    [labelled] = load_labels(saved)
    assert labelled.missing and "has no blobs folder" in labelled.missing



def test_a_text_only_reports_rows_and_panel_are_as_they_were(tmp_path):
    from labels.test_labels_end_to_end import _run

    run_dir = _run(tmp_path / "runs", formats=("json", "html"))
    labelling = report_labelling(load_run(run_dir), load_run(run_dir).cases,
                                 max_field_chars=10_000)
    assert not labelling["media"]
    assert all(set(row) <= {"input", "output", "context", "expected_output"}
               for row in labelling["rows"].values())
    assert "label-media-note" not in (run_dir / "report.html").read_text(encoding="utf-8")


def test_a_remote_parts_url_reaches_the_page_with_its_password_masked(downloaded):
    run_dir, _, _ = downloaded
    stored = load_run(run_dir)
    shot = next(case for case in stored.cases if case.eval_id == "shot0")
    url = "https://ana:sk-abcdefghijklmnop@images.example/chart.png"
    remote = shot.model_copy(update={"case": shot.case.model_copy(update={"input": [
        TextPart(text="What is shown?"), ImagePart(url=url, media_type="image/png")]})})
    labelling = report_labelling(stored, [remote], max_field_chars=10_000)
    reference = labelling["rows"]["shot0"]["media"][0]  # then the case metadata's PDF
    assert reference["type"] == "image" and "images.example/chart.png" in reference["url"]
    assert "sk-abcdefghijklmnop" not in json.dumps(labelling)
