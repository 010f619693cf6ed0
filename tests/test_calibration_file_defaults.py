"""$REFEREE_CALIBRATION_FILE reaches every judge evaluator built without a threshold, and only
those: an omitted threshold is not an explicit 0.7 (issue 22)."""

from __future__ import annotations

import pytest

from referee import CheckEvaluator, CustomRubric, EvalCase, GEval
from referee.evaluators.calibration import CalibrationEntry, CalibrationFile
from referee.execution import ExecutionResult
from referee.run.sync import run_sync
from referee.testing import ScriptedJudgeServer

RUBRIC = [("Is the answer polite?", True), ("Does the answer blame the user?", False)]


def evaluators(judge):
    """Each kind of judge evaluator whose signature used to default threshold to 0.7."""
    return [
        CustomRubric(RUBRIC, name="tone", judge=judge),
        CheckEvaluator("Answers politely", questions=["Is it polite?", "Is it calm?"],
                       name="polite", judge=judge),
        GEval("Is the answer polite?", name="politeness", runs=1, judge=judge),
    ]


@pytest.fixture
def server(isolated_judge):
    with ScriptedJudgeServer(reply=lambda r: '{"score": 0.6, "reason": "fine"}'
                             if "score" in r.prompt.lower() else "Yes") as srv:
        yield srv


def write_file(tmp_path, judge, built) -> str:
    entries = [CalibrationEntry(evaluator=e.name, judge_provider=judge.provider,
                                judge_model=judge.model, question_set=e.question_set(),
                                threshold=0.55, n=40, date="2026-12-04",
                                data_fingerprint="abc123")
               for e in built]
    path = tmp_path / "calibration.json"
    path.write_text(CalibrationFile(entries=entries).model_dump_json(), encoding="utf-8")
    return str(path)


def test_the_calibration_file_sets_the_threshold_of_evaluators_built_without_one(
        tmp_path, server, monkeypatch):
    judge = server.judge_config(provider="openai", model="gpt-4o-mini")
    built = evaluators(judge)
    assert [e.threshold for e in built] == [0.7, 0.7, 0.7]  # the documented default, no file
    monkeypatch.setenv("REFEREE_CALIBRATION_FILE", write_file(tmp_path, judge, built))

    case = EvalCase(input="Where is my order?", context="Order 1 shipped.")
    for evaluator in evaluators(judge):
        assert evaluator.threshold == 0.55, evaluator.name
        result = run_sync(evaluator.evaluate(ExecutionResult(actual_response="It shipped."),
                                             case))
        assert result.threshold == 0.55, evaluator.name
        assert result.details["threshold_source"] == "calibration_file"


def test_an_explicit_threshold_equal_to_the_default_still_wins_over_the_file(
        tmp_path, server, monkeypatch):
    judge = server.judge_config(provider="openai", model="gpt-4o-mini")
    monkeypatch.setenv("REFEREE_CALIBRATION_FILE",
                       write_file(tmp_path, judge, evaluators(judge)))
    explicit = [CustomRubric(RUBRIC, name="tone", threshold=0.7, judge=judge),
                CheckEvaluator("Answers politely", threshold=0.7, name="polite", judge=judge,
                               questions=["Is it polite?", "Is it calm?"]),
                GEval("Is the answer polite?", name="politeness", threshold=0.7, judge=judge)]
    assert [e.threshold for e in explicit] == [0.7, 0.7, 0.7]


def test_threshold_source_tells_a_calibrated_row_from_the_uncalibrated_fallback(server):
    from referee import Faithfulness

    case = EvalCase(input="Where is my order?", context="Order 1 shipped.")
    output = ExecutionResult(actual_response="It shipped.")
    measured = run_sync(Faithfulness(judge=server.judge_config(
        provider="openai", model="gpt-4o-mini")).evaluate(output, case))
    assert (measured.threshold, measured.details["threshold_source"]) == (0.9, "calibrated")
    # No row was ever measured for this judge: 0.70 is the table's "Other models" fallback.
    fallback = run_sync(Faithfulness(judge=server.judge_config(
        provider="openai", model="llama3")).evaluate(output, case))
    assert (fallback.threshold, fallback.details["threshold_source"]) == (
        0.7, "uncalibrated_default")
    explicit = run_sync(Faithfulness(threshold=0.7, judge=server.judge_config(
        provider="openai", model="llama3")).evaluate(output, case))
    assert explicit.details["threshold_source"] == "explicit"
