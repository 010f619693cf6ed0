"""Replies a real model gave to referee's prompts, read by referee as a careful reader reads them.

Each row of tests/fixtures/real_judge_replies.jsonl holds a prompt referee sent to a real small
model (tests/fixtures/record_real_replies.py recorded them), the model's reply, and the verdict a
careful human reader takes from that reply (``careful``). Rows with ``source: constructed`` are
written by hand: the adversarial shapes the issue names that the small model did not happen to
produce. Each row is replayed here through the scripted judge server and the real evaluator or
criterion; referee's reading must equal the careful one:

- ``qag_question``: ``careful`` is "yes", "no" or "unknown" for the one question asked;
  ``prose: true`` marks an answer given in words without a verdict word ("The model output
  does not contradict the context."), which referee may leave UNKNOWN but must not reverse;
- ``qag_batch`` / ``qag_case_batch``: ``careful`` maps each asked question id ("1", "2", ...) to
  "yes", "no" or "unknown" (a copied format example or an echoed prompt answers nothing);
- ``geval`` / ``agent_criterion``: ``careful`` is the score the reply gives, or null when it
  gives no usable one (missing, nested, not a number, outside 0.0-1.0);
- ``question_generation``: ``careful`` is the list of usable questions, or null.

A case whose questions the careful reader finds unanswered is a JUDGE_ERROR; a score is read
only from answered questions. referee may refuse a score for too few answered questions (a
coverage rule) as long as its error says how many were answered.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import math
import re
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from referee import EvalCase, EvalSuite
from referee.config import CriterionConfig
from referee.evaluators import CheckEvaluator, GEval
from referee.execution import ExecutionResult
from referee.testing import Reply, ScriptedJudgeServer

pytestmark = pytest.mark.usefixtures("isolated_judge")

FIXTURES = Path(__file__).with_name("fixtures")
CORPUS = FIXTURES / "real_judge_replies.jsonl"


def _recorder() -> Any:
    spec = importlib.util.spec_from_file_location("record_real_replies",
                                                  FIXTURES / "record_real_replies.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RECORDER = _recorder()
ROWS: list[dict[str, Any]] = [json.loads(line) for line in
                              CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
_QUESTION = re.compile(r"Question: (.*)\nAnswer in exactly one word", re.DOTALL)


def _rows(*kinds: str) -> list[dict[str, Any]]:
    return [row for row in ROWS if row["kind"] in kinds]


def _reply(row: dict[str, Any]) -> Reply:
    return Reply(row["reply"], cut_off=row.get("finish_reason") == "length")


def _case(row: dict[str, Any]) -> tuple[EvalCase, str]:
    return RECORDER.eval_case(row["case"]), RECORDER.CASES[row["case"]]["output"]


def test_every_row_is_annotated():
    missing = [row["id"] for row in ROWS if "careful" not in row or (
        row["careful"] is None and row["kind"] not in ("geval", "agent_criterion",
                                                        "question_generation"))]
    assert not missing, f"rows without a careful reading: {missing}"
    assert len({row["id"] for row in ROWS}) == len(ROWS), "row ids must be unique"
    kinds = {row["kind"] for row in ROWS if row["source"] == "recorded"}
    assert kinds == {"qag_question", "qag_batch", "qag_case_batch", "geval", "agent_criterion",
                     "question_generation"}
    assert {row["api_style"] for row in ROWS if row["source"] == "recorded"} == {"chat",
                                                                                 "responses"}


def _check_qag(results: list[Any], evaluators: list[Any], pair: tuple[EvalCase, str],
               careful: dict[str, str], prose: frozenset[str] = frozenset()) -> None:
    """Each evaluator's questions read as the careful reader reads them (an answer only in
    prose may be left UNKNOWN); no score for an evaluator none of whose questions is answered."""
    case, output = pair
    by_name = {result.criterion: result for result in results}
    for evaluator in evaluators:
        result = by_name[evaluator.name]
        asked = [q.text for q in evaluator.questions(ExecutionResult(actual_response=output),
                                                     case)]
        answered = [q for q in asked if careful[q] != "unknown" and q not in prose]
        if not answered:
            assert result.error is not None and result.error_kind == "judge", (
                evaluator.name, result.score, result.details.get("reason"))
            continue
        if result.error is not None:
            # No score is never a wrong score, but it must say why: how many questions were
            # answered (coverage), why the reply was rejected (an echo, an omission), or that
            # nothing in it was readable (a batched reply in prose, not the JSON asked for).
            assert result.error_kind == "judge" and any(
                word in result.error for word in ("answered", "rejected", "unparseable")
            ), result.error
            continue
        for record in result.details["questions"]:
            allowed = {careful[record["question"]]}
            if record["question"] in prose:
                allowed.add("unknown")
            assert record["verdict"] in allowed, (
                record["question"], record["raw_reply"], record["verdict"], allowed)


def _qag_groups() -> dict[tuple[str, str, str, str], list[dict[str, Any]]]:
    """Per-question rows by (source, wire, evaluator, case): one evaluation each."""
    groups: dict[tuple[str, str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in _rows("qag_question"):
        groups[(row["source"], row["api_style"], row["evaluator"], row["case"])].append(row)
    return groups


QAG_GROUPS = _qag_groups()


@pytest.mark.parametrize("key", sorted(QAG_GROUPS), ids="/".join)
def test_per_question_replies(key):
    _, api_style, evaluator_name, _ = key
    rows = QAG_GROUPS[key]
    by_question = {row["questions"][0]: row for row in rows}

    def answer(request: Any) -> Reply:
        return _reply(by_question[_QUESTION.search(request.prompt).group(1)])

    with ScriptedJudgeServer(answer) as server:
        evaluator = RECORDER.QAG_EVALUATORS[evaluator_name](
            judge=server.judge_config(api_style=api_style))
        suite = EvalSuite("corpus replay")
        suite.add_evaluators(evaluator)
        report = suite.run_on_cases([_case(rows[0])], verbose=False, save=False)
    _check_qag(report.cases[0].criterion_results, [evaluator], _case(rows[0]),
               {row["questions"][0]: row["careful"] for row in rows},
               frozenset(row["questions"][0] for row in rows if row.get("prose")))


def _batch_careful(row: dict[str, Any]) -> dict[str, str]:
    return {question: row["careful"][str(i)] for i, question in
            enumerate(row["questions"], start=1)}


@pytest.mark.parametrize("row", _rows("qag_batch"), ids=lambda row: row["id"])
def test_batched_replies(row):
    with ScriptedJudgeServer(_reply(row)) as server:
        evaluator = RECORDER.QAG_EVALUATORS[row["evaluator"]](
            judge=server.judge_config(api_style=row["api_style"]), batch=True)
        suite = EvalSuite("corpus replay")
        suite.add_evaluators(evaluator)
        report = suite.run_on_cases([_case(row)], verbose=False, save=False)
    _check_qag(report.cases[0].criterion_results, [evaluator], _case(row), _batch_careful(row))


@pytest.mark.parametrize("row", _rows("qag_case_batch"), ids=lambda row: row["id"])
def test_case_batched_replies(row):
    with ScriptedJudgeServer(_reply(row)) as server:
        cfg = server.judge_config(api_style=row["api_style"])
        evaluators = [RECORDER.QAG_EVALUATORS[name](judge=cfg, batch="case")
                      for name in row["evaluator"].split("+")]
        suite = EvalSuite("corpus replay")
        suite.add_evaluators(*evaluators)
        report = suite.run_on_cases([_case(row)], verbose=False, save=False)
        assert server.request_count == 1
    _check_qag(report.cases[0].criterion_results, evaluators, _case(row), _batch_careful(row))


def _check_score(result: Any, careful: float | None) -> None:
    if careful is None:
        assert result.error is not None and result.error_kind == "judge", (
            result.score, result.details)
        return
    assert result.error is None, result.error
    assert math.isclose(result.score, careful, abs_tol=1e-9), (result.score, careful)


@pytest.mark.parametrize("row", _rows("geval"), ids=lambda row: row["id"])
def test_geval_replies(row):
    with ScriptedJudgeServer(_reply(row)) as server:
        suite = EvalSuite("corpus replay")
        suite.add_evaluators(GEval(row["criteria"], runs=1,
                                   judge=server.judge_config(api_style=row["api_style"])))
        report = suite.run_on_cases([_case(row)], verbose=False, save=False)
    [result] = report.cases[0].criterion_results
    _check_score(result, row["careful"])


@pytest.mark.parametrize("row", _rows("agent_criterion"), ids=lambda row: row["id"])
def test_agent_criterion_replies(row):
    case, output = _case(row)
    with ScriptedJudgeServer(_reply(row)) as server:
        config = CriterionConfig(judge_model="openai/scripted-judge", base_url=server.base_url(),
                                 api_style=row["api_style"], num_samples=1)
        criterion = RECORDER.AGENT_CRITERIA[row["evaluator"]](config)
        result = asyncio.run(criterion.evaluate(ExecutionResult(actual_response=output), case))
    _check_score(result, row["careful"])
    if row["careful"] is None:
        assert result.error == "All LLM samples failed"


@pytest.mark.parametrize("row", _rows("question_generation"), ids=lambda row: row["id"])
def test_question_generation_replies(row):
    with ScriptedJudgeServer(_reply(row)) as server:
        check = CheckEvaluator(row["criteria"], num_questions=3,
                               judge=server.judge_config(api_style=row["api_style"]))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            asyncio.run(check.prepare())
    fell_back = any("question generation failed" in str(w.message) for w in caught)
    if row["careful"] is None:
        assert fell_back and check.resolved_questions == [row["criteria"]]
    else:
        assert not fell_back and check.resolved_questions == row["careful"][:3]
