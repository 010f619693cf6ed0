"""`referee calibrate` end to end: the CLI, the real OpenAI SDK, the scripted judge server, the
run store and the calibration file, which an evaluator then uses."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("numpy")

from referee.calibrate import calibrate, load_labels  # noqa: E402
from referee.case import EvalCase  # noqa: E402
from referee.cli import main  # noqa: E402
from referee.errors import InputError  # noqa: E402
from referee.evaluators import Faithfulness, Hallucination, threshold_table  # noqa: E402
from referee.evaluators.calibration import read_calibration_file  # noqa: E402
from referee.execution import ExecutionResult  # noqa: E402
from referee.testing import DUMMY_API_KEY, Fault, RecordedRequest, ScriptedJudgeServer  # noqa: E402

SUPPORTED = "Is every factual statement in the model output supported by the context?"
CONTRADICTS = "Does the model output state anything that contradicts the context?"
DETAILS = "Can every specific detail in the model output"
OUTSIDE = "Does the model output present outside knowledge"


def scripted_answer(request: RecordedRequest) -> str | Fault:
    """A judge of known behaviour. Outputs marked [ok] look faithful to it, [bad] unfaithful;
    the outside-knowledge question always answers "No", so it lets every bad output through
    and is the question that disagrees with people most. [down] rows get a 400 (a judge error
    that is not retried)."""
    prompt = request.prompt
    if "[down]" in prompt:
        return Fault.http(400, body='{"error": {"message": "bad request"}}')
    bad = "[bad]" in prompt
    if OUTSIDE in prompt:
        return "No"
    if CONTRADICTS in prompt:
        return "Yes" if bad else "No"
    return "No" if bad else "Yes"


def labelled_file(tmp_path: Path, rows: int = 24, down: int = 0, disagree: int = 2) -> Path:
    """Half pass, half fail; the judge sees the truth except on ``disagree`` failing rows that
    look fine to it, and ``down`` rows whose judge calls fail."""
    lines = []
    for i in range(rows):
        passed = i % 2 == 0
        marker = "[ok]" if passed or i < 2 * disagree else "[bad]"
        if i >= rows - down:
            marker = "[down]"
        lines.append(json.dumps({"id": f"row-{i:02d}", "input": f"Question {i}?",
                                 "context": f"Fact number {i}.", "output": f"{marker} answer {i}",
                                 "label": "pass" if passed else "fail"}))
    path = tmp_path / "labels.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def server(openai_judge_server):
    return openai_judge_server(scripted_answer)


def run_calibrate(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["calibrate", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def only_run_dir(runs: Path) -> Path:
    [run_dir] = [p for p in runs.iterdir() if p.is_dir()]
    return run_dir


def test_cli_calibration_makes_a_stored_run_and_a_calibration_file_that_an_evaluator_uses(
        tmp_path, capsys, server, monkeypatch):
    labels = labelled_file(tmp_path)
    calibration_file = tmp_path / "calibration.json"
    code, out, err = run_calibrate(
        capsys, str(labels), "--evaluator", "faithfulness", "--judge", "openai/gpt-4o-mini",
        "--folds", "3", "--resamples", "300", "--out", str(tmp_path / "runs"),
        "--calibration-file", str(calibration_file))
    assert code == 0, err
    # Every judge request went through the real SDK to the scripted server.
    assert server.request_count == 24 * 4
    assert {r.model for r in server.requests} == {"gpt-4o-mini"}

    run_dir = only_run_dir(tmp_path / "runs")
    for name in ("meta.json", "cases.jsonl", "report.json", "calibration.json",
                 "calibration.html"):
        assert (run_dir / name).is_file(), name
    report = json.loads((run_dir / "calibration.json").read_text())
    # 12 passes, 12 fails, 2 fails the judge lets through: tp 12, fp 2, fn 0, tn 10.
    agreement = report["agreement"]
    assert (agreement["tp"], agreement["fp"], agreement["fn"], agreement["tn"]) == (12, 2, 0, 10)
    assert agreement["n"] == 24 and agreement["base_rate"] == 0.5
    assert agreement["kappa"]["value"] == pytest.approx((22 / 24 - 0.5) / 0.5)
    assert agreement["kappa"]["low"] < agreement["kappa"]["value"] <= agreement["kappa"]["high"]
    # Rows that look fine score 1.0; the others 0.25 (the outside-knowledge question's "No"
    # still counts for them). Every threshold in (0.25, 1.0] agrees alike; the fit takes the
    # middle of that run.
    assert report["threshold"]["value"] == pytest.approx(0.63)
    assert report["cross_validation"]["folds"] == 3
    assert len(report["curve"]["kappa"]) == 101
    # Per question: the outside-knowledge one agrees with people least.
    questions = report["questions"]
    assert questions[0]["question"].startswith(OUTSIDE)
    assert questions[0]["judge_pass_human_fail"] == 12 and questions[0]["answered"] == 24
    assert questions[-1]["agreement"]["value"] == pytest.approx(22 / 24)
    # The console table.
    assert "Cohen's kappa" in out and "3-fold cross-validated" in out
    # Every resample fits the same 0.63 (the middle of the tied run): no interval to show.
    assert "fitted threshold (kappa): 0.63 (constant)" in out
    assert report["threshold"]["constant"] and report["threshold"]["low"] is None
    assert f"threshold recorded in {calibration_file}" in out

    [entry] = read_calibration_file(calibration_file).entries
    assert (entry.evaluator, entry.judge_provider, entry.judge_model) == (
        "faithfulness", "openai", "gpt-4o-mini")
    assert entry.n == 24 and entry.threshold == pytest.approx(0.63)
    assert entry.data_fingerprint == report["data_fingerprint"]
    assert entry.question_set == Faithfulness().question_set()

    # An evaluator that opts in uses the fitted threshold, and says where it came from.
    monkeypatch.setenv("REFEREE_CALIBRATION_FILE", str(calibration_file))
    judge = server.judge_config(provider="openai", model="gpt-4o-mini")
    evaluator = Faithfulness(threshold="calibrated", judge=judge)
    assert evaluator.threshold == pytest.approx(0.63)
    [case] = load_labels(labels)[:1]
    result = await_evaluate(evaluator, case)
    assert result.threshold == pytest.approx(0.63) and result.passed
    assert result.details["threshold_source"] == "calibration_file"
    assert result.details["calibration"]["n"] == 24
    # Without threshold="calibrated" the configured file still wins over the built-in table.
    assert Faithfulness(judge=judge).threshold == pytest.approx(0.63)
    monkeypatch.delenv("REFEREE_CALIBRATION_FILE")
    assert Faithfulness(judge=judge).threshold == 0.90  # the built-in gpt-4o-mini row again
    # threshold_table() lists the file's entry, with its provenance, beside the built-in rows.
    table = threshold_table(calibration_file)
    assert table[("faithfulness", "gpt-4o-mini")] == 0.90
    assert table.calibrated == [entry]
    assert "openai/gpt-4o-mini" in str(table) and "calibrated n=24" in str(table)
    assert "built-in table" in str(table)


def await_evaluate(evaluator, labelled):
    from referee.run.sync import run_sync

    return run_sync(evaluator.evaluate(ExecutionResult(actual_response=labelled.output),
                                       labelled.case))


def test_calibrated_threshold_without_a_matching_entry_says_how_to_make_one(
        tmp_path, isolated_judge, monkeypatch):
    monkeypatch.setenv("REFEREE_CALIBRATION_FILE", str(tmp_path / "none.json"))
    evaluator = Faithfulness(threshold="calibrated")
    with pytest.raises(ValueError, match=r"threshold='calibrated' but .*none.json \(no such "
                                         r"file\) has no entry .*run 'referee calibrate"):
        evaluator.threshold
    with pytest.raises((ValueError, TypeError), match="Faithfulness: threshold"):
        Faithfulness(threshold="calibrate")


def test_calibration_survives_judge_errors_rate_limits_and_a_resume(tmp_path, capsys, server):
    labels = labelled_file(tmp_path, rows=20, down=3, disagree=0)
    # The first requests meet 429s; the judge layer waits and retries, nothing is lost.
    server.enqueue_faults(*[Fault.rate_limit(retry_after=0) for _ in range(5)])
    runs = tmp_path / "runs"
    code, out, err = run_calibrate(
        capsys, str(labels), "--evaluator", "faithfulness", "--judge", "openai/gpt-4o-mini",
        "--resamples", "200", "--out", str(runs), "--no-write", "--json")
    assert code == 0, err
    first = json.loads(out)
    # 80 questions, plus one retry for each 429 (a 400 is not retried).
    assert server.request_count == 20 * 4 + 5
    assert first["rows"] == 20 and first["scored"] == 17
    assert first["judge_errors"] == 3 and first["excluded"] == {"JUDGE_ERROR": 3}
    assert {e["status"] for e in first["excluded_rows"]} == {"JUDGE_ERROR"}
    assert all(e["source"].endswith(f"labels.jsonl:{n}")
               for e, n in zip(first["excluded_rows"], (18, 19, 20)))
    assert first["agreement"]["n"] == 17
    assert not (tmp_path / ".referee").exists()  # --no-write

    # Interrupt it after 8 rows (as a kill would leave it) and resume: only the unfinished
    # rows are judged again, and the figures come out the same.
    run_dir = only_run_dir(runs)
    (run_dir / "report.json").unlink()
    kept = (run_dir / "cases.jsonl").read_text().splitlines()[:8]
    (run_dir / "cases.jsonl").write_text("\n".join(kept) + "\n")
    finished = {json.loads(line)["eval_id"] for line in kept}
    server.reset_record()
    code, out, err = run_calibrate(
        capsys, str(labels), "--evaluator", "faithfulness", "--judge", "openai/gpt-4o-mini",
        "--resamples", "200", "--resume", str(run_dir), "--no-write", "--json")
    assert code == 0, err
    resumed = json.loads(out)
    asked = {m.group(1) for r in server.requests
             for m in [re.search(r"answer (\d+)", r.prompt)] if m}
    assert asked and not asked & {str(int(f.split("-")[1])) for f in finished}
    for key in ("agreement", "threshold", "judge_errors", "scored", "questions"):
        assert resumed[key] == first[key], key
    assert list(runs.iterdir()) == [run_dir]


def test_python_api_and_html_in_chromium(tmp_path, server):
    from test_report_samples import chromium_dom

    rows = load_labels(labelled_file(tmp_path, rows=16))
    report = calibrate(Faithfulness(), rows, judge="openai/gpt-4o-mini", folds=2, resamples=200,
                       runs_dir=tmp_path / "runs")
    assert report.scored == 16 and report.judge == "openai/gpt-4o-mini"
    page = Path(report.run_dir) / "calibration.html"
    html = page.read_text()
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    dom = chromium_dom(page.as_uri(), tmp_path)
    for element in ('<svg id="curve"', 'class="curve-kappa"', 'class="curve-f1"',
                    'class="curve-youden"', 'class="fitted"', '<svg id="confusion"',
                    'id="agreement"', 'id="questions"'):
        assert element in dom, element
    # The four confusion cells carry the counts.
    counts = re.findall(r'font-weight="600"[^>]*>(\d+)<', dom)
    assert sorted(map(int, counts)) == sorted([report.agreement.tp, report.agreement.fp,
                                               report.agreement.fn, report.agreement.tn])


def test_the_offline_example_runs_through_the_cli(tmp_path, capsys, isolated_judge):
    example = Path(__file__).resolve().parents[2] / "examples" / "calibration"
    calibration_file = tmp_path / "calibration.json"
    code, out, err = run_calibrate(
        capsys, str(example / "support_faithfulness.jsonl"), "--evaluator",
        f"{example / 'offline_judge.py'}:evaluator", "--folds", "5", "--resamples", "200",
        "--out", str(tmp_path / "runs"), "--calibration-file", str(calibration_file))
    assert code == 0, err
    assert "calibration of faithfulness judged by openai/scripted-rule (40 of 40 rows scored)" in out
    assert "5-fold cross-validated" in out and "questions, most disagreement first" in out
    [entry] = read_calibration_file(calibration_file).entries
    assert entry.judge_model == "scripted-rule" and entry.n == 40


def test_calibrating_needs_an_evaluator_that_does_not_require_the_calibration(tmp_path,
                                                                              isolated_judge):
    rows = load_labels(labelled_file(tmp_path, rows=4))
    with pytest.raises(ValueError, match="threshold='calibrated', which needs the calibration"):
        calibrate(Faithfulness(threshold="calibrated"), rows, runs_dir=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


def test_command_line_mistakes_are_one_line_errors(tmp_path, capsys, isolated_judge):
    labels = labelled_file(tmp_path, rows=4)
    (tmp_path / "factory.py").write_text("def make():\n    raise RuntimeError('no key')\n")
    (tmp_path / "a_file").write_text("")
    cases = [
        (["--evaluator", f"{tmp_path / 'factory.py'}:make"],
         "factory.py:make': make() raised RuntimeError: no key"),
        (["--evaluator", "faithfulness", "--out", str(tmp_path / "a_file")],
         "cannot create the run directory: Not a directory"),
        (["--evaluator", "nosuch"], "unknown evaluator 'nosuch'; built-in judge evaluators:"),
        (["--evaluator", "faithfulness", "--judge", "gpt-4o"], "--judge: 'gpt-4o' is not PROVIDER/MODEL"),
        (["--evaluator", "faithfulness", "--folds", "1"], "at least 2 folds"),
        (["--evaluator", f"{tmp_path / 'missing.py'}:x"], "missing.py: no such file"),
        ([], "--evaluator is required"),
    ]
    for extra, message in cases:
        out_dir = [] if "--out" in extra else ["--out", str(tmp_path / "r")]
        code, out, err = run_calibrate(capsys, str(labels), *extra, *out_dir)
        assert code == 2, (extra, err)
        assert err.startswith("referee: error: ") and message in err, (extra, err)
        assert len(err.strip().splitlines()) == 1


def test_a_public_set_calibrates_its_evaluator_by_default(tmp_path, capsys, server):
    # HaluEval's QA file, in its own format (JSON Lines): each record gives two rows.
    records = [{"knowledge": f"Fact number {i}.", "question": f"Question {i}?",
                "right_answer": f"[ok] answer {i}", "hallucinated_answer": f"[bad] answer {i}"}
               for i in range(6)]
    path = tmp_path / "qa_data.json"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    code, out, err = run_calibrate(
        capsys, str(path), "--dataset", "halueval", "--judge", "openai/gpt-4o-mini",
        "--limit", "8", "--resamples", "200", "--out", str(tmp_path / "runs"), "--no-write",
        "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["evaluator"] == "hallucination" and report["rows"] == 8
    probe = EvalCase(input="-", context="-")
    asked = {q.text for q in Hallucination().questions(ExecutionResult(actual_response="-"), probe)}
    assert {q["question"] for q in report["questions"]} == asked


def test_a_second_calibration_is_answered_from_the_judge_cache(tmp_path, capsys, server,
                                                               monkeypatch):
    monkeypatch.setenv("REFEREE_CACHE", "1")
    monkeypatch.setenv("REFEREE_CACHE_DIR", str(tmp_path / "cache"))
    labels = labelled_file(tmp_path, rows=6)
    argv = [str(labels), "--evaluator", "faithfulness", "--judge", "openai/gpt-4o-mini",
            "--resamples", "100", "--out", str(tmp_path / "runs"), "--no-write", "--json"]
    code, out, err = run_calibrate(capsys, *argv)
    assert code == 0, err
    assert server.request_count == 6 * 4
    code, again, err = run_calibrate(capsys, *argv)
    assert code == 0, err
    assert server.request_count == 6 * 4  # a new stored run, no new judge request
    assert json.loads(again)["agreement"] == json.loads(out)["agreement"]


def test_calibrate_help_says_what_it_does(capsys):
    with pytest.raises(SystemExit) as done:
        main(["calibrate", "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    for words in ("agrees with people", "--metric", "--folds", "summedits", "halueval", "evouna",
                  'threshold="calibrated"', "--resume RUN_DIR"):
        assert words in out, words
    assert "document 00" not in out


def test_a_calibration_file_with_a_bom_reads_and_an_overlong_number_names_the_line(tmp_path):
    entry = {"evaluator": "faithfulness", "judge_provider": "openai", "judge_model": "m",
             "threshold": 0.6, "n": 10, "date": "2026-01-01", "data_fingerprint": "f"}
    edited = tmp_path / "bom.json"
    edited.write_bytes(b"\xef\xbb\xbf" + json.dumps(
        {"format": "referee-calibration", "version": 1, "entries": [entry]}).encode())
    assert read_calibration_file(edited).entries[0].threshold == 0.6
    long = tmp_path / "long.json"
    long.write_text('{"format": "referee-calibration",\n "version": ' + "1" * 5000 + "}",
                    encoding="utf-8")
    with pytest.raises(InputError, match=r"long.json:2: a number longer than 4300 digits"):
        read_calibration_file(long)


def test_the_judges_timeout_and_max_tokens_are_options(tmp_path, capsys, isolated_judge,
                                                       monkeypatch):
    def answer(request: RecordedRequest) -> str | Fault:
        # A row the judge cannot finish in time (a slow local model on a long output).
        return Fault.hang(5) if "answer 3" in request.prompt else scripted_answer(request)

    labels = labelled_file(tmp_path, rows=6)
    with ScriptedJudgeServer(reply=answer) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url("openai"))
        monkeypatch.setenv("OPENAI_API_KEY", DUMMY_API_KEY)
        code, out, err = run_calibrate(
            capsys, str(labels), "--evaluator", "faithfulness", "--judge",
            "openai/gpt-4o-mini", "--judge-timeout", "0.5", "--judge-max-tokens", "40",
            "--resamples", "100", "--out", str(tmp_path / "runs"), "--no-write", "--json")
        assert code == 0, err
        report = json.loads(out)
        assert {r.max_tokens for r in srv.requests} == {40}
        # The hanging row's four questions each timed out at 0.5 s and were retried once
        # (temperature 0): a judge error, while the other rows were scored.
        assert report["judge_errors"] == 1 and report["scored"] == 5
        assert sum("answer 3" in r.prompt for r in srv.requests) == 4 * 2
    for bad, message in ((["--judge-timeout", "0"], "expected a positive number of seconds"),
                         (["--judge-max-tokens", "0"], "--judge-max-tokens")):
        assert main(["calibrate", str(labels), "--evaluator", "faithfulness", *bad]) == 2
        assert message in capsys.readouterr().err


def contrary_file(tmp_path: Path, rows: int = 12) -> Path:
    """A judge that sides against the people on every row: the outputs it finds faithful were
    failed, the others passed, so no threshold above 0 agrees better than chance."""
    lines = [json.dumps({"id": f"row-{i:02d}", "input": f"Question {i}?",
                         "context": f"Fact number {i}.",
                         "output": f"{'[ok]' if i % 2 else '[bad]'} answer {i}",
                         "label": "fail" if i % 2 else "pass"}) for i in range(rows)]
    path = tmp_path / "contrary.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_judge_that_does_not_separate_the_labels_records_no_threshold(
        tmp_path, capsys, server, monkeypatch):
    labels = contrary_file(tmp_path)
    calibration_file = tmp_path / "calibration.json"
    argv = [str(labels), "--evaluator", "faithfulness", "--judge", "openai/gpt-4o-mini",
            "--resamples", "200", "--out", str(tmp_path / "runs"),
            "--calibration-file", str(calibration_file)]
    code, out, err = run_calibrate(capsys, *argv)
    assert code == 1, err
    # Every threshold above the low score (0.25) has kappa < 0: the fit lands below it, in
    # the middle of 0.00-0.25, which passes everything: kappa 0, in every resample.
    assert "fitted threshold (kappa): 0.12 (constant)" in out
    assert "this judge does not separate the labels: the best threshold by kappa, 0.12, " \
           "passes every one of the 12 scored rows" in out
    assert "Cohen's kappa" in out and "0.00 (constant)" in out.split("Cohen's kappa")[1]
    assert "[0.00, 0.00]" not in out
    assert err.strip().endswith("no threshold recorded (--force records it anyway)"), err
    assert not calibration_file.exists()
    run_dir = only_run_dir(tmp_path / "runs")
    report = json.loads((run_dir / "calibration.json").read_text())
    assert report["fit_problem"].startswith("the best threshold by kappa, 0.12, passes every")
    assert report["agreement"]["kappa"] == {"value": 0.0, "low": None, "high": None,
                                            "constant": True, "method": "bootstrap"}
    assert "does not separate the labels" in (run_dir / "calibration.html").read_text()

    # --force records it, and the entry (and every result that uses it) says what is wrong.
    code, out, err = run_calibrate(capsys, *argv, "--resume", str(run_dir), "--force")
    assert code == 0, err
    assert "recorded anyway (--force)" in err
    [entry] = read_calibration_file(calibration_file).entries
    assert entry.threshold == 0.12 and entry.fit_problem.startswith("the best threshold")
    assert "forced, does not separate the labels" in entry.provenance
    monkeypatch.setenv("REFEREE_CALIBRATION_FILE", str(calibration_file))
    judge = server.judge_config(provider="openai", model="gpt-4o-mini")
    [row] = load_labels(labels)[:1]
    result = await_evaluate(Faithfulness(judge=judge), row)
    assert result.details["calibration"]["fit_problem"] == entry.fit_problem


def test_the_python_api_refuses_to_write_a_fit_that_does_not_separate(tmp_path, server):
    rows = load_labels(contrary_file(tmp_path, rows=8))
    report = calibrate(Faithfulness(), rows, judge="openai/gpt-4o-mini", resamples=100,
                       runs_dir=tmp_path / "runs")
    assert not report.separates
    with pytest.raises(ValueError, match="this judge does not separate the labels: .* no "
                                         "threshold recorded"):
        report.write_calibration_file(tmp_path / "calibration.json")
    assert not (tmp_path / "calibration.json").exists()
    report.write_calibration_file(tmp_path / "calibration.json", force=True)
    assert read_calibration_file(tmp_path / "calibration.json").entries[0].fit_problem
