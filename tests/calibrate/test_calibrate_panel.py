"""`referee calibrate` with a judge panel: three scripted judges that each misread different
rows, through the CLI, the real OpenAI SDK and the scripted judge server. The panel's majority
corrects every member's mistakes, and the report sets each member beside it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_calibrate_end_to_end import CONTRADICTS, OUTSIDE
from test_calibrate_end_to_end import labelled_file as labels_with_markers

pytest.importorskip("numpy")

from referee.calibrate import calibrate, load_labels  # noqa: E402
from referee.cli import main  # noqa: E402
from referee.evaluators import Faithfulness  # noqa: E402
from referee.judge import JudgeConfig, JudgePanel  # noqa: E402
from referee.testing import Fault, RecordedRequest  # noqa: E402

JUDGES = ("judge-a", "judge-b", "judge-c")
ROWS = 24


def labelled_file(tmp_path: Path) -> Path:
    """Even rows pass ([ok]), odd rows fail ([bad])."""
    return labels_with_markers(tmp_path, rows=ROWS, disagree=0)


def misreads(judge: str, row: int) -> bool:
    """Each judge misreads a different sixth of the rows (two passes, two fails): no row is
    misread by two of them."""
    return judge in JUDGES and row % 12 // 2 == JUDGES.index(judge)


def scripted_answer(request: RecordedRequest) -> str | Fault:
    """Faithfulness's four questions, answered as a judge who sees the output as faithful
    ([ok]) or not ([bad]); a judge that misreads the row sees the other one."""
    prompt = request.prompt
    row = int(re.search(r"answer (\d+)", prompt).group(1))
    if request.model == "judge-down":
        return Fault.http(400, body='{"error": {"message": "bad request"}}')
    bad = ("[bad]" in prompt) != misreads(request.model, row)
    if OUTSIDE in prompt:
        return "No"
    if CONTRADICTS in prompt:
        return "Yes" if bad else "No"
    return "No" if bad else "Yes"


@pytest.fixture
def server(openai_judge_server):
    return openai_judge_server(scripted_answer)


def test_cli_calibrates_a_panel_beside_each_member_asking_each_member_once(
        tmp_path, capsys, server):
    calibration_file = tmp_path / "calibration.json"
    runs = tmp_path / "runs"
    code = main(["calibrate", str(labelled_file(tmp_path)), "--evaluator", "faithfulness",
                 *(arg for judge in JUDGES for arg in ("--judge", f"openai/{judge}")),
                 "--resamples", "200", "--out", str(runs),
                 "--calibration-file", str(calibration_file)])
    out, err = capsys.readouterr()
    assert code == 0, err
    # One pass: every member asked each of the four questions of each row once, no more.
    assert server.request_count == ROWS * 4 * len(JUDGES)
    assert {m: sum(1 for r in server.requests if r.model == m) for m in JUDGES} == dict.fromkeys(
        JUDGES, ROWS * 4)

    [run_dir] = [p for p in runs.iterdir() if p.is_dir()]
    report = json.loads((run_dir / "calibration.json").read_text())
    assert report["judge_provider"] == "panel"
    assert report["judge_model"] == "openai/judge-a, openai/judge-b, openai/judge-c"
    # The majority outvotes each misreading: the panel agrees with people on every row.
    agreement = report["agreement"]
    assert (agreement["tp"], agreement["fp"], agreement["fn"], agreement["tn"]) == (12, 0, 0, 12)
    assert agreement["kappa"]["value"] == pytest.approx(1.0)
    # Each member alone misreads 4 of the 24 rows (2 passes, 2 fails).
    members = {m["judge"]: m for m in report["members"]}
    assert list(members) == [f"openai/{judge}" for judge in JUDGES]
    for member in members.values():
        assert member["scored"] == ROWS and member["no_score"] == 0
        a = member["agreement"]
        assert (a["tp"], a["fp"], a["fn"], a["tn"]) == (10, 2, 2, 10)
        assert a["accuracy"]["value"] == pytest.approx(20 / 24)
        assert a["kappa"]["value"] == pytest.approx((20 / 24 - 0.5) / 0.5)
        assert a["tpr"]["value"] == pytest.approx(10 / 12)
        assert a["tnr"]["value"] == pytest.approx(10 / 12)
    assert report["best_member"] == "openai/judge-a"

    assert "the panel and each member on the same labels" in out
    assert re.search(r"openai/judge-b\s+24\s+\S+\s+0\.83\s+0\.67", out)
    assert "the panel (kappa 1.00) beats its best member openai/judge-a (kappa 0.67)" in out
    # A panel's threshold is not recorded: calibrated thresholds are per judge model.
    assert not calibration_file.exists()
    assert "judge panel's threshold is not recorded" in err


def test_python_api_panel_with_a_member_down_and_html_in_chromium(tmp_path, server):
    from test_report_samples import chromium_dom

    rows = load_labels(labelled_file(tmp_path))
    judges = [JudgeConfig(provider="openai", model=m)
              for m in ("judge-a", "judge-b", "judge-down")]
    # The evaluator's own panel; the judge settings given go to each member.
    report = calibrate(Faithfulness(judge=judges), rows, judge_max_tokens=300, resamples=100,
                       runs_dir=tmp_path / "runs")
    meta = json.loads((Path(report.run_dir) / "meta.json").read_text())
    assert [m["max_tokens"] for m in meta["judge"]["members"]] == [300, 300, 300]
    # Two of three answer, the quorum of two is met; where those two disagree (the 8 rows one
    # of them misreads) their votes tie, too few questions have a verdict and the row is a
    # judge error. The member that was down has no score and no agreement figures.
    assert (report.scored, report.excluded) == (16, {"JUDGE_ERROR": 8})
    down = next(m for m in report.members if m.judge == "openai/judge-down")
    assert (down.scored, down.no_score) == (0, 16) and down.agreement.kappa.value is None
    assert report.best_member in ("openai/judge-a", "openai/judge-b")
    with pytest.raises(ValueError, match="judge panel's threshold is not recorded"):
        report.write_calibration_file(tmp_path / "calibration.json")

    page = Path(report.run_dir) / "calibration.html"
    dom = chromium_dom(page.as_uri(), tmp_path)
    table = re.search(r'<table id="panel-members">(.*?)</table>', dom, re.S).group(1)
    assert [re.sub(r"<[^>]+>", "", cell) for cell in
            re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:][0].split("</td>")][:2] == [
        "panel", "16"]
    assert "openai/judge-down" in table and "openai/judge-b" in table
    assert re.search(r'id="panel-versus-best">The panel \(kappa [\d.]+\) (beats|ties with|does '
                     r'not beat) its best member openai/judge-[ab]', dom)


def test_a_judge_list_of_provider_model_texts_is_a_panel():
    from referee.calibrate._run import parse_judge

    panel = parse_judge(["openai/judge-a", "anthropic/claude-haiku-4-5"])
    assert isinstance(panel, JudgePanel)
    assert [(m.provider, m.model) for m in panel.members] == [
        ("openai", "judge-a"), ("anthropic", "claude-haiku-4-5")]


def test_cli_panel_options_are_checked(tmp_path, capsys, server):
    labels = str(labelled_file(tmp_path))
    code = main(["calibrate", labels, "--evaluator", "faithfulness", "--judge", "openai/a",
                 "--judge-quorum", "2"])
    assert code == 2
    assert "--judge-quorum need a panel: give --judge two or more times" in capsys.readouterr().err
    code = main(["calibrate", labels, "--evaluator", "faithfulness", "--judge", "openai/a",
                 "--judge", "openai/b", "--judge-quorum", "3"])
    assert code == 2
    err = capsys.readouterr().err
    assert "--judge: quorum must be between 1 and the number of members (2), got 3" in err
    assert server.request_count == 0


def test_cli_a_panel_that_does_not_separate_the_labels_exits_1_as_one_judge_does(
        tmp_path, capsys, openai_judge_server):
    def same_reading_for_every_row(request: RecordedRequest) -> str:
        return "No" if OUTSIDE in request.prompt or CONTRADICTS in request.prompt else "Yes"

    openai_judge_server(same_reading_for_every_row)
    labels = str(labelled_file(tmp_path))
    panel = [arg for judge in JUDGES for arg in ("--judge", f"openai/{judge}")]
    common = ["--resamples", "50", "--out", str(tmp_path / "runs"),
              "--calibration-file", str(tmp_path / "calibration.json")]
    code = main(["calibrate", labels, "--evaluator", "faithfulness", "--judge", "openai/judge-a",
                 *common])
    err = capsys.readouterr().err
    assert code == 1 and "does not separate the labels" in err
    code = main(["calibrate", labels, "--evaluator", "faithfulness", *panel, *common])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "does not separate the labels" in err
    # Only a report was asked for: nothing was to be recorded, and that is no failure.
    assert main(["calibrate", labels, "--evaluator", "faithfulness", *panel, *common,
                 "--no-write"]) == 0


def test_the_console_table_lines_up_rows_with_and_without_the_w_flag(tmp_path, server):
    from referee.calibrate._render import console_text

    rows = load_labels(labelled_file(tmp_path))
    judges = [JudgeConfig(provider="openai", model=m) for m in JUDGES]
    report = calibrate(Faithfulness(judge=judges), rows, resamples=100,
                       runs_dir=tmp_path / "runs")
    lines = console_text(report).splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("metric"))
    end = next(i for i, line in enumerate(lines) if line.strip().startswith("confusion"))
    table = lines[start + 1:end]
    # The perfect panel: proportions get Wilson's interval (W), kappa none (constant).
    assert any(line.endswith(" W") for line in table) and any(
        not line.endswith(" W") for line in table), table
    # Every estimate ends at the same column, and the flag, or its blank, follows it.
    assert len({len(line) for line in table}) == 1, table
    assert all(line[-2:] in (" W", "  ") and line[-3] != " " for line in table), table
