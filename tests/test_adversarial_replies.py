"""The adversarial reply corpus (tests/fixtures/adversarial_judge_replies.jsonl): replies that
real judges give or that try to pass for a verdict, each with what a careful reader takes from it.

Every entry is read by the parser its reader names; the entries marked ``e2e`` also go through
the scripted judge server and the official SDK, inside the evaluator that would read them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from referee import CustomRubric, EvalCase, ExecutionResult, JudgeUnavailable
from referee.config import CriterionConfig
from referee.criteria.llm import LLMJudgeCriterion
from referee.evaluators.geval import _run_score
from referee.evaluators.qag import _answer_verdict, question_verdict, read_batch_reply
from referee.judge import parse_json_object, parse_verdict, read_score
from referee.testing import ScriptedJudgeServer

CORPUS_PATH = Path(__file__).parent / "fixtures" / "adversarial_judge_replies.jsonl"
CORPUS = [json.loads(line) for line in CORPUS_PATH.read_text(encoding="utf-8").splitlines()
          if line.strip()]


def entries(*readers: str, e2e: bool = False) -> list[Any]:
    return [pytest.param(row, id=row["id"]) for row in CORPUS
            if row["reader"] in readers and (row.get("e2e", False) or not e2e)]


def test_corpus_covers_every_kind_of_adversarial_reply():
    ids = {row["id"] for row in CORPUS}
    assert len(ids) == len(CORPUS)  # ids are unique
    for prefix in ("fence-", "negation-", "hedge-", "code-block-", "json-", "batch-placeholders",
                   "batch-unasked", "batch-echoed", "score-nested", "score-out-of-range",
                   "truncated", "stringified"):
        assert any(prefix in row["id"] for row in CORPUS), prefix
    assert {row["reader"] for row in CORPUS} == {"verdict", "question", "batch", "score"}


@pytest.mark.parametrize("row", entries("verdict", "question"))
def test_verdict_replies_read_as_a_careful_reader_reads_them(row):
    if row["reader"] == "question":
        verdict = question_verdict(row["reply"], row["question"])
    else:
        verdict = parse_verdict(row["reply"])
    assert verdict.value == row["expected"], row["why"]


@pytest.mark.parametrize("row", entries("batch"))
def test_batched_replies_read_as_a_careful_reader_reads_them(row):
    reading = read_batch_reply(row["reply"], row["asked"])
    expected = row["expected"]
    if "rejected" in expected:
        assert reading.rejected is not None and expected["rejected"] in reading.rejected
        assert reading.answers == {}
    else:
        assert reading.rejected is None, reading.rejected
        verdicts = {str(ident): _answer_verdict(value).value
                    for ident, value in reading.answers.items()}
        assert verdicts == expected, row["why"]


def _criteria_score(text: str) -> float | None:
    try:
        return read_score(parse_json_object(text, ("score", "reasoning")).get("score"))
    except ValueError:
        return None


@pytest.mark.parametrize("row", entries("score"))
def test_score_replies_read_the_same_in_criteria_and_geval(row):
    assert _criteria_score(row["reply"]) == row["expected"], row["why"]
    assert _run_score(row["reply"])[0] == row["expected"], row["why"]


# Through the scripted judge server and the official SDK -------------------------------------

CASE = EvalCase(input="How much do children pay?", context="Children pay 20 euros.")
OUTPUT = ExecutionResult(actual_response="Yes, children pay 20 euros.")


@pytest.fixture
def server():
    with ScriptedJudgeServer(reply="Yes") as srv:
        yield srv


@pytest.mark.usefixtures("isolated_judge")
@pytest.mark.parametrize("row", entries("verdict", "question", e2e=True))
async def test_verdict_replies_end_to_end(server, row):
    question = row.get("question", "Does the model output answer the user input?")
    server.set_reply(row["reply"])
    rubric = CustomRubric([(question, True)], judge=server.judge_config())
    if row["expected"] == "unknown":
        with pytest.raises(JudgeUnavailable, match="1 of 1 question"):
            await rubric.evaluate(OUTPUT, CASE)
    else:
        result = await rubric.evaluate(OUTPUT, CASE)
        assert result.details["questions"][0]["verdict"] == row["expected"]
        assert result.score == (1.0 if row["expected"] == "yes" else 0.0)


@pytest.mark.usefixtures("isolated_judge")
@pytest.mark.parametrize("row", entries("batch", e2e=True))
async def test_batched_replies_end_to_end(server, row):
    server.set_reply(row["reply"])
    rubric = CustomRubric([(f"Question {i}?", True) for i in range(1, row["asked"] + 1)],
                          judge=server.judge_config(), batch=True)
    assert "rejected" in row["expected"]
    with pytest.raises(JudgeUnavailable, match=row["expected"]["rejected"]):
        await rubric.evaluate(OUTPUT, CASE)


@pytest.mark.parametrize("row", entries("score", e2e=True))
async def test_score_replies_end_to_end(server, row, monkeypatch):
    monkeypatch.setenv("REFEREE_CACHE", "0")
    server.set_reply(row["reply"])
    criterion = LLMJudgeCriterion(CriterionConfig(judge_model="openai/gpt-4o-mini",
                                                  base_url=server.base_url(), num_samples=1))
    monkeypatch.setenv("OPENAI_API_KEY", f"scripted-{server.port}")
    result = await criterion.evaluate(
        OUTPUT, EvalCase(input="How much do children pay?", expected_output="20 euros"))
    if row["expected"] is None:
        assert result.error == "All LLM samples failed" and result.error_kind == "judge"
    else:
        assert result.error is None and result.score == pytest.approx(row["expected"])
    assert result.details["sample_replies"][0]["raw_reply"] == row["reply"]
