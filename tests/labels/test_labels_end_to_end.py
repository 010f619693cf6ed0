"""The loop end to end: a run judged through the real OpenAI SDK against the scripted judge,
labels made through the viewer's write path, a re-score, the export, and `referee calibrate
--from-run`, which gives the figures of calibrating from the exported file."""

from __future__ import annotations

import http.client
import json
from pathlib import Path

import pytest

pytest.importorskip("numpy")

# The scripted judge of the calibration tests (a fixture, used by name below).
from calibrate.test_calibrate_end_to_end import server  # noqa: E402,F401

from referee.case import EvalCase  # noqa: E402
from referee.cli import main  # noqa: E402
from referee.evaluators import Faithfulness  # noqa: E402
from referee.judge import JudgeConfig  # noqa: E402
from referee.labels import LABELS_FILE, LabelStore  # noqa: E402
from referee.report.store import load_run  # noqa: E402
from referee.report.viewer import start_viewer  # noqa: E402
from referee.run.session import RunOptions, run_stored  # noqa: E402
from referee.run.sync import run_sync  # noqa: E402

ROWS = 16


def _cases() -> list[EvalCase]:
    """Half the answers are right; the judge is fooled by the first two wrong ones."""
    cases = []
    for i in range(ROWS):
        right = i % 2 == 0
        marker = "[ok]" if right or i < 4 else "[bad]"
        cases.append(EvalCase(eval_id=f"q{i:02d}", input=f"Question {i}?",
                              context=f"Fact number {i}.",
                              metadata={"answer": f"{marker} answer {i}", "right": right}))
    return cases


def _run(runs: Path, **options) -> Path:
    async def answer(case: EvalCase, caller) -> str:
        return case.metadata["answer"]

    report = run_sync(run_stored(
        name="support bot", model_id="replayed answers", cases=_cases(),
        criteria=[Faithfulness(judge=JudgeConfig(provider="openai", model="gpt-4o-mini"))],
        execute=answer, options=RunOptions(**{"runs_dir": runs, "formats": ("json",), **options})))
    return Path(report.metadata["run_dir"]) if "run_dir" in report.metadata else next(
        p for p in runs.iterdir() if p.is_dir())


def _label_through_the_viewer(run_dir: Path, key: str = "", only: int | None = None) -> None:
    """A person marks each verdict right or wrong, as the labelling page posts it; ``key``
    names the run (or ``RUN@N``, one of its scorings) in the viewer's URLs."""
    key = key or run_dir.name
    report = load_run(run_dir.parent / key)
    with start_viewer(None, run_dir.parent, labeller="ana") as handle:
        port = handle.server.server_address[1]
        token = handle.server.RequestHandlerClass.token
        for case in report.cases[:only]:
            [result] = case.criterion_results
            verdict = "right" if result.passed == case.case.metadata["right"] else "wrong"
            body = json.dumps({"case_id": case.eval_id, "criterion": result.criterion,
                               "verdict": verdict})
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("POST", f"/run/{key}/labels", body=body, headers={
                "Host": f"127.0.0.1:{port}", "Content-Type": "application/json",
                "X-Referee-Token": token})
            assert conn.getresponse().status == 200
            conn.close()


def _calibrate(capsys, *argv: str) -> dict:
    code = main(["calibrate", *argv, "--judge", "openai/gpt-4o-mini", "--evaluator",
                 "faithfulness", "--resamples", "200", "--no-write", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_run_label_rescore_export_and_calibrate_from_the_run(tmp_path, capsys, server):
    runs = tmp_path / "runs"
    run_dir = _run(runs)
    _label_through_the_viewer(run_dir)
    labels_before = (run_dir / LABELS_FILE).read_bytes()
    assert "labels.jsonl" not in (run_dir / "cases.jsonl").read_text()

    # A re-score keeps the earlier scoring under versions/1; the labels stay with the run.
    _run(runs, resume=run_dir, rescore=True)
    assert (run_dir / "versions" / "1" / "cases.jsonl").is_file()
    assert not (run_dir / "versions" / "1" / LABELS_FILE).exists()
    assert (run_dir / LABELS_FILE).read_bytes() == labels_before
    assert {label.scoring for label in LabelStore(run_dir).all()} == {1}
    # Labelling again names the scoring looked at: RUN@1 the kept one, RUN the current one.
    _label_through_the_viewer(run_dir, f"{run_dir.name}@1", only=1)
    _label_through_the_viewer(run_dir, only=1)
    assert [label.scoring for label in LabelStore(run_dir).all()][-2:] == [1, 2]

    exported = tmp_path / "exported.jsonl"
    assert main(["labels", "export", str(run_dir), "-o", str(exported)]) == 0
    capsys.readouterr()
    rows = [json.loads(line) for line in exported.read_text().splitlines()]
    assert len(rows) == ROWS
    truth = {case.eval_id: case.metadata["right"] for case in _cases()}
    assert all((row["label"] == "pass") == truth[row["id"]] for row in rows)

    requests_before = server.request_count
    from_file = _calibrate(capsys, str(exported), "--out", str(tmp_path / "cal-file"))
    from_run = _calibrate(capsys, "--from-run", str(run_dir), "--out", str(tmp_path / "cal-run"))
    for key in ("agreement", "threshold", "curve", "questions", "rows", "scored",
                "data_fingerprint"):
        assert from_run[key] == from_file[key], key
    # The judge was fooled by two wrong answers of the sixteen.
    agreement = from_run["agreement"]
    assert (agreement["tp"], agreement["fp"], agreement["fn"], agreement["tn"]) == (8, 2, 0, 6)
    # Both calibrations asked the judge; neither asked a model under test (there is none to
    # ask: the stored outputs are replayed).
    assert server.request_count > requests_before


def test_calibrate_from_run_without_labels_is_a_one_line_error(tmp_path, capsys, server):
    run_dir = _run(tmp_path / "runs")
    capsys.readouterr()
    code = main(["calibrate", "--from-run", str(run_dir), "--evaluator", "faithfulness"])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{run_dir}/labels.jsonl" in err and "no pass/fail labels" in err
    assert len(err.strip().splitlines()) == 1
    code = main(["calibrate", str(tmp_path / "x.jsonl"), "--from-run", str(run_dir),
                 "--evaluator", "faithfulness"])
    assert code == 2 and "either LABELS or --from-run" in capsys.readouterr().err


def test_labels_made_on_a_killed_run_survive_its_resume(tmp_path, capsys):
    """A person labels the finished cases of a run that was killed mid-way; resuming it writes
    the rest of the run and leaves the labels as they were, still on the same outputs."""
    from test_run_store import killed_run

    from referee import EvalCase, EvalSuite
    from referee.evaluators.deterministic import Contains

    run_dir = killed_run(tmp_path)
    interrupted = load_run(run_dir)
    assert interrupted.metadata["interrupted"] is True
    labelled = interrupted.cases[:2]
    person = tmp_path / "person.jsonl"
    person.write_text("".join(json.dumps({
        "label": verdict, "metadata": {"case_id": case.eval_id, "criterion": "contains"}}) + "\n"
        for case, verdict in zip(labelled, ("pass", "fail"))))
    assert main(["labels", "import", str(run_dir), str(person), "--labeller", "ana"]) == 0
    labels_before = (run_dir / LABELS_FILE).read_bytes()

    suite = EvalSuite("killed").add_cases([EvalCase(input=f"q{i}") for i in range(10)])
    suite.add_evaluator(Contains(["answer"]))
    report = suite.run(lambda prompt: "answer to " + prompt, verbose=False, resume=run_dir)
    assert report.total == 10 and not report.metadata.get("interrupted")
    assert (run_dir / LABELS_FILE).read_bytes() == labels_before
    capsys.readouterr()
    assert main(["labels", "export", str(run_dir)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(row["id"], row["label"], row["output"]) for row in rows] == [
        (case.eval_id, verdict, case.execution.actual_response)
        for case, verdict in zip(labelled, ("pass", "fail"))]
