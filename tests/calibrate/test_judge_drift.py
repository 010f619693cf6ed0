"""Judge drift: the model version a provider says served each judge reply, recorded by
`referee calibrate`, compared by every run, and `referee calibrate --recheck` of the stored
canary. Through the real SDKs against the scripted judge server, which can be told to serve a
new snapshot behind the same model name."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from test_calibrate_end_to_end import labelled_file
from test_report_samples import chromium_dom

pytest.importorskip("numpy")

from referee.case import EvalCase  # noqa: E402
from referee.cli import main  # noqa: E402
from referee.evaluators import Faithfulness  # noqa: E402
from referee.evaluators.calibration import read_calibration_file  # noqa: E402
from referee.judge import JudgeConfig, get_judge  # noqa: E402
from referee.judge.served import SERVED_KEY, recording_served  # noqa: E402
from referee.report.model import EvalReport  # noqa: E402
from referee.run.suite import EvalSuite  # noqa: E402
from referee.testing import RecordedRequest, ScriptedJudgeServer  # noqa: E402

CONTRADICTS = "Does the model output state anything that contradicts the context?"
OUTSIDE = "Does the model output present outside knowledge"


class Judge:
    """Faithfulness's questions answered by the output's marker: [ok] looks faithful, [bad]
    does not. ``flipped``: the judge now sees every output the other way."""

    def __init__(self) -> None:
        self.flipped = False

    def __call__(self, request: RecordedRequest) -> str:
        prompt = request.prompt
        bad = ("[bad]" in prompt) != self.flipped
        if OUTSIDE in prompt:
            return "Yes" if bad else "No"
        if CONTRADICTS in prompt:
            return "Yes" if bad else "No"
        return "No" if bad else "Yes"


@pytest.fixture
def judge():
    return Judge()


@pytest.fixture
def server(openai_judge_server, judge):
    return openai_judge_server(judge, served_model="a-2024-01")


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def calibrated(server, tmp_path, capsys):
    """Faithfulness judged by openai/a, calibrated while the provider served a-2024-01."""
    calibration = tmp_path / "calibration.json"
    code, out, err = cli(capsys, "calibrate", str(labelled_file(tmp_path, rows=30)), "--evaluator",
                         "faithfulness", "--judge", "openai/a", "--out", str(tmp_path / "cal"),
                         "--calibration-file", str(calibration), "--resamples", "100")
    assert code == 0, err
    return calibration


# The judge layer ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("provider", "api_style", "fingerprint"), [
    ("openai", "chat", "fp_44709d6fcb"), ("openai", "responses", None),
    ("anthropic", "chat", None), ("google", "chat", None)])
def test_each_sdk_reply_names_the_model_version_that_served_it(
        isolated_judge, provider, api_style, fingerprint, tmp_path):
    async def ask(cfg: JudgeConfig):
        with recording_served() as log:
            reply = await get_judge(cfg).complete("Is the sky blue?")
            again = await get_judge(cfg).complete("Is the sky blue?")  # from the cache
        return reply, again, log.as_details()

    with ScriptedJudgeServer(reply="Yes", served_model="a-2024-01") as srv:
        srv.system_fingerprint = "fp_44709d6fcb"
        cfg = srv.judge_config(provider=provider, api_style=api_style, model="a", cache=True,
                               cache_path=str(tmp_path / "judge_cache.sqlite3"))
        reply, again, seen = asyncio.run(ask(cfg))
    assert reply.model == "a" and reply.served_model == "a-2024-01"
    assert reply.system_fingerprint == fingerprint
    # A reply replayed from the cache names no version: nothing was served.
    assert again.cached and again.served_model is None
    expected = {"models": {"a-2024-01": 1}}
    if fingerprint:
        expected["fingerprints"] = {fingerprint: 1}
    assert seen == {f"{provider}/a": expected}


# Calibration records the served version; a run warns when it changed ----------------------------

def run_suite(calibration: Path, monkeypatch, **options) -> EvalReport:
    monkeypatch.setenv("REFEREE_CALIBRATION_FILE", str(calibration))
    suite = EvalSuite(name="support answers")
    suite.add_evaluator(Faithfulness(judge=JudgeConfig(provider="openai", model="a"),
                                     threshold="calibrated"))
    cases = [(EvalCase(eval_id=f"q{i}", input=f"Q{i}?", context=f"Fact {i}."),
              f"{'[ok]' if i % 3 else '[bad]'} answer {i}") for i in range(9)]
    return suite.run_on_cases(cases, **({"save": False} | options))


def test_a_calibration_entry_records_the_served_version_and_a_canary(calibrated):
    [entry] = read_calibration_file(calibrated).entries
    assert entry.judge_model == "a" and entry.served_model == "a-2024-01"
    # The canary: 20 of the 30 rows, both labels alike, with the scores the judge gave them.
    assert len(entry.canary) == 20
    assert sum(row.passed for row in entry.canary) == 10
    assert {row.source.rsplit(":", 1)[0] for row in entry.canary} == {
        str(calibrated.parent / "labels.jsonl")}
    by_output = {row.output: row.score for row in entry.canary}
    assert all(score == 1.0 for output, score in by_output.items() if "[ok]" in output)
    assert all(score < 1.0 for output, score in by_output.items() if "[bad]" in output)


def test_a_run_warns_when_the_provider_serves_another_version_than_calibrated(
        calibrated, server, monkeypatch, capsys, tmp_path):
    same = run_suite(calibrated, monkeypatch)
    _, err = capsys.readouterr()
    assert "judge drift" not in err
    assert same.judge_calibration["faithfulness"].served_models == ["a-2024-01"]
    assert same.judge_calibration["faithfulness"].drift is None

    server.served_model = "a-2025-06"  # the provider moved the alias to a new snapshot
    run = run_suite(calibrated, monkeypatch, save=True, runs_dir=tmp_path / "runs",
                    formats=("console", "html"))
    out, err = capsys.readouterr()
    [line] = [ln for ln in err.splitlines() if "judge drift" in ln]
    assert "faithfulness (openai/a)" in line
    assert "calibrated against a-2024-01" in line and "now serves a-2025-06" in line
    record = run.judge_calibration["faithfulness"]
    assert record.matched and record.calibrated_served_model == "a-2024-01"
    assert record.served_models == ["a-2025-06"]
    # In the console's corrected section and in report.json too.
    assert "a-2025-06" in out
    data = json.loads(json.dumps(run.to_dict(with_cases=True)))
    assert "now serves a-2025-06" in data["judge_calibration"]["faithfulness"]["drift"]
    details = data["cases"][0]["criterion_results"][0]["details"]
    assert details[SERVED_KEY]["openai/a"]["models"] == {"a-2025-06": 4}  # one per question
    assert EvalReport.from_dict(data).judge_calibration["faithfulness"].drift == record.drift
    # The HTML report's corrected section says it beside the criterion.
    [page] = (tmp_path / "runs").glob("*/report.html")
    dom = chromium_dom(page.as_uri(), tmp_path)
    row = re.search(r'<tr data-criterion="faithfulness".*?</tr>', dom, re.DOTALL)
    assert row is not None
    assert re.search(r'<p class="judge-drift">Judge drift: calibrated against a-2024-01, but '
                     r'the provider now serves a-2025-06', row.group(0))


def test_an_entry_written_before_served_versions_were_recorded_never_warns(
        calibrated, server, monkeypatch, capsys):
    data = json.loads(calibrated.read_text())
    for entry in data["entries"]:
        del entry["served_model"], entry["canary"]
    calibrated.write_text(json.dumps(data))
    server.served_model = "a-2025-06"
    run = run_suite(calibrated, monkeypatch)
    assert "judge drift" not in capsys.readouterr().err
    assert run.judge_calibration["faithfulness"].matched
    assert run.judge_calibration["faithfulness"].drift is None


# referee calibrate --recheck ------------------------------------------------------------------

def recheck(capsys, calibration: Path, tmp_path: Path, *extra: str) -> tuple[int, str, str]:
    return cli(capsys, "calibrate", "--recheck", "--calibration-file", str(calibration),
               "--out", str(tmp_path / "rechecks"), *extra)


def canary_agreement(calibration: Path) -> float:
    """How often the judge's verdicts on the canary, when calibrated, matched the labels."""
    [entry] = read_calibration_file(calibration).entries
    return sum((row.score >= entry.threshold) is row.passed
               for row in entry.canary) / len(entry.canary)


def test_recheck_of_an_unchanged_judge_exits_0(calibrated, tmp_path, capsys):
    then = canary_agreement(calibrated)
    assert 0.85 <= then < 1.0  # the canary holds some of the rows the judge got wrong
    code, out, err = recheck(capsys, calibrated, tmp_path)
    assert code == 0, out + err
    assert "recheck faithfulness by openai/a (calibrated" in out
    assert "against a-2024-01" in out and "served now: a-2024-01" in out
    assert f"then {then:.1%}, now {then:.1%} (+0.0 points; tolerance 10)" in out
    assert "no verdict flipped" in out and "unchanged" in out


def test_recheck_of_a_judge_that_flipped_reports_the_drop_and_the_rows_and_exits_1(
        calibrated, judge, tmp_path, capsys, monkeypatch):
    # The calibration's replies are in the reply cache: a recheck that replayed them would
    # see the old verdicts.
    monkeypatch.setenv("REFEREE_CACHE", "1")
    monkeypatch.setenv("REFEREE_CACHE_DIR", str(tmp_path / "cache"))
    code, out, err = recheck(capsys, calibrated, tmp_path)
    assert code == 0, out + err
    judge.flipped = True
    code, out, err = recheck(capsys, calibrated, tmp_path, "--json")
    assert code == 1, out + err
    [result] = json.loads(out)
    then = canary_agreement(calibrated)
    assert result["agreement_then"] == pytest.approx(then)
    assert result["agreement_now"] == pytest.approx(1 - then)  # every verdict flipped
    assert result["flips"] == 20 and result["drift"] is None
    assert result["problems"] == [f"agreement with people fell from {then:.1%} to "
                                  f"{1 - then:.1%}, more than the tolerance of 10 points"]
    code, out, _ = recheck(capsys, calibrated, tmp_path)
    assert code == 1
    assert "20 verdict(s) flipped" in out and "DRIFT: agreement" in out
    assert re.search(r"labels\.jsonl:\d+ \(labelled pass\): pass -> fail", out)
    assert re.search(r"labels\.jsonl:\d+ \(labelled fail\): fail -> pass", out)
    # A tolerance wide enough lets the same drop through.
    assert recheck(capsys, calibrated, tmp_path, "--tolerance", "0.9")[0] == 0


def test_recheck_fails_when_the_served_version_changed_even_with_the_same_answers(
        calibrated, server, tmp_path, capsys):
    server.served_model = "a-2025-06"
    code, out, _ = recheck(capsys, calibrated, tmp_path)
    assert code == 1
    assert "served now: a-2025-06" in out and "no verdict flipped" in out
    assert "DRIFT: the provider serves another version: calibrated against a-2024-01" in out


def test_recheck_mistakes_are_one_line_errors(calibrated, tmp_path, capsys):
    code, _, err = cli(capsys, "calibrate", "--recheck", str(tmp_path / "labels.jsonl"),
                       "--calibration-file", str(calibrated))
    assert code == 2 and "LABELS does not go with --recheck" in err
    code, _, err = recheck(capsys, tmp_path / "none.json", tmp_path)
    assert code == 2 and "no such calibration file to recheck" in err
    code, _, err = recheck(capsys, calibrated, tmp_path, "--evaluator", "relevance")
    assert code == 2 and "has no entry for relevance" in err
    code, _, err = cli(capsys, "calibrate", str(tmp_path / "labels.jsonl"), "--evaluator",
                       "faithfulness", "--tolerance", "0.2")
    assert code == 2 and "--tolerance goes with --recheck" in err
    data = json.loads(calibrated.read_text())
    del data["entries"][0]["canary"]
    calibrated.write_text(json.dumps(data))
    code, _, err = recheck(capsys, calibrated, tmp_path)
    assert code == 2 and "no canary rows kept" in err and "keeps canary rows" in err
