"""Labels of an image run calibrate the judge that scored it: the export names each case's and
output's images and PDFs by hash, with their bytes in a folder beside the file, and `referee
calibrate` shows the judge the same parts, through the real Anthropic SDK against the scripted
judge server (checked on the recorded requests). The file and its folder move together; a
blob that is gone leaves its row out in one line; a judge without vision is refused before
the first replay; a text-only export keeps the keys it always had."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from content_samples import pdf, picture, sent_media

from referee import EvalCase, EvalSuite, ExecutionResult
from referee.calibrate import calibrate, load_labels
from referee.calibrate._recheck import recheck
from referee.cli import main
from referee.content import DocumentPart, ImagePart, TextPart, _prepare
from referee.errors import InputError
from referee.evaluators import Faithfulness
from referee.labels import Label, LabelStore

pytest.importorskip("numpy")

CHART = picture(400, 300, seed=11)
REPORT = pdf(2)
SHOTS = [picture(320, 240, seed=20 + i) for i in range(3)]
JUDGE = "anthropic/claude-sonnet-4-5"
TEXT_ROW_KEYS = {"id", "input", "output", "label", "metadata", "context"}


def _case(index: int) -> EvalCase:
    return EvalCase(eval_id=f"shot{index}",
                    input=[TextPart(text=f"Which region sold most? ({index})"),
                           ImagePart(data=SHOTS[index], path=f"shots/{index}.png")],
                    context=["The quarterly report is attached."],
                    metadata={"report": DocumentPart(data=REPORT, path="q3.pdf")})


def _charting(prompt: object) -> ExecutionResult:
    return ExecutionResult(actual_response="North sold most.",
                           outputs=[ImagePart(data=CHART, path="chart.png")])


def _labelled_run(server, runs: Path, cases: list[EvalCase], model) -> Path:
    """A judged run whose every verdict a person marked (the first one wrong)."""
    judge = server.judge_config(provider="anthropic", model="claude-sonnet-4-5")
    suite = EvalSuite("vision").add_cases(cases).add_evaluators(Faithfulness(judge=judge))
    report = suite.run(model, verbose=False, runs_dir=runs, concurrency=1)
    run_dir = runs / report.run_id
    store = LabelStore(run_dir)
    for index, case in enumerate(report.cases):
        [result] = case.criterion_results
        store.append(Label(case_id=case.eval_id, criterion=result.criterion, scoring=1,
                           verdict="wrong" if index == 0 else "right",
                           judge_passed=result.passed, judge_score=result.score,
                           labeller="ana", at=time.time()))
    return run_dir


def _sent(server) -> list[list[tuple[str, bytes]]]:
    return sorted(sent_media(r.body, "anthropic", "chat") for r in server.requests)


def _calibrate(capsys, labels: Path, runs: Path, judge: str = JUDGE) -> tuple[int, str, str]:
    _prepare._PREPARED.clear()  # as a new process calibrating the file would start
    code = main(["calibrate", str(labels), "--evaluator", "faithfulness", "--judge", judge,
                 "--resamples", "50", "--no-write", "--json", "--out", str(runs)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def exported(server, tmp_path, capsys):
    """An image run, labelled, exported to exports/labels.jsonl; the judge requests the run
    made (each one's images and PDFs, in Anthropic's format)."""
    run_dir = _labelled_run(server, tmp_path / "runs", [_case(i) for i in range(3)], _charting)
    sent_by_run = _sent(server)
    out = tmp_path / "exports" / "labels.jsonl"
    out.parent.mkdir()
    assert main(["labels", "export", str(run_dir), "-o", str(out)]) == 0
    capsys.readouterr()
    server.reset_record()
    return run_dir, out, sent_by_run


def test_an_image_runs_export_names_its_parts_by_hash_with_the_bytes_beside_it(exported):
    run_dir, out, _ = exported
    text = out.read_text()
    rows = [json.loads(line) for line in text.splitlines()]
    assert len(rows) == 3 and len(text) < 4000  # references, never base64
    for row in rows:
        index = int(row["id"].removeprefix("shot"))
        assert row["media"] == [
            {"type": "image", "media_type": "image/png", "sha256": _sha(SHOTS[index]),
             "path": f"shots/{index}.png"},
            {"type": "document", "media_type": "application/pdf", "sha256": _sha(REPORT),
             "path": "q3.pdf"}]
        assert row["output_media"] == [{"type": "image", "media_type": "image/png",
                                        "sha256": _sha(CHART), "path": "chart.png"}]
        assert row["blobs"] == "labels.jsonl.blobs"
    # Each blob once, named by its hash, holding the run's bytes.
    stored = sorted(p for p in (out.parent / "labels.jsonl.blobs").rglob("*") if p.is_file())
    assert sorted(p.name for p in stored) == sorted(_sha(b) for b in (*SHOTS, REPORT, CHART))
    assert all(p.read_bytes() == (run_dir / "blobs" / p.parent.name / p.name).read_bytes()
               for p in stored)


def test_calibrating_the_export_shows_the_judge_what_the_runs_judge_saw(
        exported, server, tmp_path, capsys):
    _, out, sent_by_run = exported
    code, report, err = _calibrate(capsys, out, tmp_path / "cal")
    assert code == 0, err
    assert json.loads(report)["scored"] == 3
    assert _sent(server) == sent_by_run
    for request in server.requests:
        media = sent_media(request.body, "anthropic", "chat")
        assert media[1:] == [("application/pdf", REPORT), ("image/png", CHART)]
        assert media[0] in [("image/png", shot) for shot in SHOTS]


def test_the_export_moved_with_its_blobs_folder_still_calibrates(
        exported, server, tmp_path, capsys):
    run_dir, out, sent_by_run = exported
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for path in (out, out.with_name("labels.jsonl.blobs")):
        shutil.move(str(path), elsewhere / path.name)
    shutil.rmtree(run_dir)  # nothing is read from the run any more
    code, report, err = _calibrate(capsys, elsewhere / "labels.jsonl", tmp_path / "cal")
    assert code == 0, err
    assert json.loads(report)["scored"] == 3
    assert _sent(server) == sent_by_run


def test_a_missing_blob_leaves_its_row_out_in_one_line_and_the_others_replay(
        exported, server, tmp_path, capsys):
    _, out, _ = exported
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    gone = rows[1]["media"][0]["sha256"]  # the second row's own screenshot
    (out.with_name("labels.jsonl.blobs") / gone[:2] / gone).unlink()
    code, report, err = _calibrate(capsys, out, tmp_path / "cal")
    assert code == 0, err
    [line] = [text for text in err.splitlines() if gone in text]
    assert line.startswith(f"referee: {out}:2: field 'media[0]': blob {gone} is missing")
    calibration = json.loads(report)
    assert calibration["scored"] == 2 and calibration["excluded"] == {"MODEL_ERROR": 1}
    assert {media[0][1] for media in _sent(server)} == {SHOTS[0], SHOTS[2]}


def test_a_judge_without_vision_is_refused_before_the_first_replay(
        exported, server, tmp_path, capsys):
    _, out, _ = exported
    code, _, err = _calibrate(capsys, out, tmp_path / "cal", judge="anthropic/claude-2.1")
    assert code != 0
    [line] = err.strip().splitlines()
    assert "judge anthropic/claude-2.1 takes text only" in line
    assert server.request_count == 0


def test_the_image_export_imports_into_its_run_again(exported, capsys):
    run_dir, out, _ = exported
    assert main(["labels", "import", str(run_dir), str(out)]) == 0
    err = capsys.readouterr().err
    assert "0 label(s) added" in err and "3 already there" in err
    assert len(LabelStore(run_dir).all()) == 3


def test_calibrating_from_the_run_itself_shows_the_judge_its_parts(
        exported, server, tmp_path, capsys):
    run_dir, _, sent_by_run = exported
    _prepare._PREPARED.clear()
    code = main(["calibrate", "--from-run", str(run_dir), "--evaluator", "faithfulness",
                 "--judge", JUDGE, "--resamples", "50", "--no-write", "--json",
                 "--out", str(tmp_path / "cal")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["scored"] == 3
    assert _sent(server) == sent_by_run


def test_an_export_printed_to_stdout_points_at_the_runs_own_blobs(exported, tmp_path, capsys):
    run_dir, _, _ = exported
    assert main(["labels", "export", str(run_dir)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {row["blobs"] for row in rows} == {str(run_dir / "blobs")}
    saved = tmp_path / "elsewhere.jsonl"
    saved.write_text("".join(json.dumps(row) + "\n" for row in rows))
    [labelled] = [row for row in load_labels(saved) if row.case.eval_id == "shot0"]
    assert [part.data for part in labelled.media] == [SHOTS[0], REPORT]
    assert [part.data for part in labelled.outputs] == [CHART]
    assert labelled.missing is None


@pytest.mark.parametrize(("media", "message"), [
    ("not a list", "field 'media': is a str (expected a list of"),
    (["chart.png"], "field 'media[0]': is not an image or PDF reference"),
    ([{"type": "image", "sha256": "ab"}],
     "field 'media[0]': sha256 'ab' is not a SHA-256 (expected 64 lowercase hex digits)"),
    ([{"type": "image", "sha256": "a" * 64, "colour": "red"}],
     "field 'media[0]': unknown ImagePart field 'colour'"),
])
def test_a_bad_media_reference_is_one_line_naming_the_file_line_and_field(
        tmp_path, media, message):
    labels = tmp_path / "labels.jsonl"
    row = {"input": "Which region?", "output": "North", "label": "pass", "media": media}
    labels.write_text(json.dumps({"input": "Hi", "output": "Hello", "label": "pass"}) + "\n"
                      + json.dumps(row) + "\n")
    with pytest.raises(InputError) as bad:
        load_labels(labels)
    assert str(bad.value).startswith(f"{labels}:2: {message}")
    assert "\n" not in str(bad.value)


def test_a_reference_without_a_blobs_folder_leaves_its_row_out(tmp_path):
    labels = tmp_path / "labels.jsonl"
    digest = _sha(CHART)
    labels.write_text(json.dumps({"input": "Which region?", "output": "North", "label": "pass",
                                  "output_media": [{"type": "image", "sha256": digest,
                                                    "media_type": "image/png"}]}) + "\n")
    [row] = load_labels(labels)
    assert row.missing == (f"{labels}:1: field 'output_media[0]': image {digest} has no "
                           "blobs folder to be read from")


def test_a_recheck_of_an_image_calibration_shows_the_judge_its_canarys_parts(
        exported, server, tmp_path):
    _, out, sent_by_run = exported
    judge = server.judge_config(provider="anthropic", model="claude-sonnet-4-5")
    rows = load_labels(out)
    report = calibrate(Faithfulness(), rows, judge, resamples=50, runs_dir=tmp_path / "cal")
    entry = report.calibration_entry()
    assert [row.model_extra["output_media"][0]["sha256"] for row in entry.canary] == \
        [_sha(CHART)] * 3
    server.reset_record()
    _prepare._PREPARED.clear()
    checked = recheck(Faithfulness(), entry, runs_dir=tmp_path / "rechecks")
    assert len(checked.answered) == 3
    assert _sent(server) == sent_by_run
    # The calibration run's blobs gone: each row is left out, saying which blob, not judged blind.
    shutil.rmtree(Path(report.run_dir) / "blobs")
    server.reset_record()
    checked = recheck(Faithfulness(), entry, runs_dir=tmp_path / "rechecks")
    assert checked.answered == [] and server.request_count == 0
    assert all("is missing from" in row.error for row in checked.rows)


def test_a_text_only_export_keeps_its_keys_and_writes_no_blobs_folder(
        server, tmp_path, capsys):
    cases = [EvalCase(eval_id=f"t{i}", input=f"Question {i}?", context=[f"Fact {i}."])
             for i in range(2)]
    run_dir = _labelled_run(server, tmp_path / "runs", cases,
                            lambda prompt: ExecutionResult(actual_response="An answer."))
    out = tmp_path / "labels.jsonl"
    assert main(["labels", "export", str(run_dir), "-o", str(out)]) == 0
    assert main(["labels", "export", str(run_dir)]) == 0
    printed = capsys.readouterr().out
    assert out.read_text() == printed
    rows = [json.loads(line) for line in printed.splitlines()]
    assert [set(row) for row in rows] == [TEXT_ROW_KEYS, TEXT_ROW_KEYS]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["labels.jsonl", "runs"]
    assert not (run_dir / "blobs").exists()


def _sha(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()
