"""Verdicts a judge did not really give are never a score: coverage, batched-reply rejection and
structured output, through the real SDKs against the scripted judge server."""

from __future__ import annotations

import json
import re

import pytest

from referee import (
    CaseStatus,
    CheckEvaluator,
    EvalCase,
    EvalSuite,
    ExecutionResult,
    Faithfulness,
    Hallucination,
    JudgeUnavailable,
    TaskCompletion,
    configure,
)
from referee.testing import ScriptedJudgeServer

pytestmark = pytest.mark.usefixtures("isolated_judge")

HEDGE = "I cannot say yes or no with certainty."
RAG_CASE = EvalCase(input="How tall is the Eiffel Tower?",
                    context="The Eiffel Tower is 330 metres tall.",
                    expected_output="330 metres")
WRONG = ExecutionResult(actual_response="The Eiffel Tower is 450 metres tall.")


@pytest.fixture
def server():
    with ScriptedJudgeServer(reply="Yes") as srv:
        yield srv


def question_of(prompt: str) -> str:
    return re.search(r"^Question: (.*)$", prompt, re.MULTILINE).group(1)


def answer_first_only(server, first_reply: str = "No") -> None:
    """Per question: the first question asked (by text order) gets a verdict, the rest hedge."""
    def responder(request):
        question = question_of(request.prompt)
        return first_reply if "state anything that contradicts" in question else HEDGE
    server.set_reply(responder)


@pytest.mark.parametrize(("asked", "needed"), [(1, 1), (2, 1), (3, 2), (4, 2), (5, 3), (10, 5)])
def test_a_score_needs_verdicts_on_at_least_half_of_the_questions(asked, needed):
    from referee.evaluators.qag import answers_needed

    assert answers_needed(asked) == needed


async def test_one_answered_question_of_four_is_not_a_faithfulness_score(server):
    answer_first_only(server)
    with pytest.raises(JudgeUnavailable) as caught:
        await Faithfulness(judge=server.judge_config()).evaluate(WRONG, RAG_CASE)
    message = str(caught.value)
    assert "insufficient verdict coverage: only 1 of 4 question(s) answered (3 UNKNOWN)" in message
    assert "at least 2" in message
    assert caught.value.details["answered"] == 1 and caught.value.details["asked"] == 4
    assert caught.value.token_usage.requests == 4  # the four replies were paid for


async def test_a_cut_off_reply_below_coverage_names_both_the_cut_and_the_count(server):
    from referee.testing import Reply

    def responder(request):
        if "state anything that contradicts" in question_of(request.prompt):
            return "No"
        return Reply("The context gives 330 metres, while the output", cut_off=True)
    server.set_reply(responder)
    with pytest.raises(JudgeUnavailable) as caught:
        await Faithfulness(judge=server.judge_config()).evaluate(WRONG, RAG_CASE)
    assert "judge reply truncated at max_tokens=" in str(caught.value)
    assert str(caught.value).endswith("; 1 of 4 question(s) answered")


async def test_exactly_half_answered_still_scores_and_discloses_the_rest(server):
    def responder(request):
        question = question_of(request.prompt)
        if "contradicts" in question or "outside knowledge" in question:
            return "No"
        return HEDGE
    server.set_reply(responder)
    result = await Faithfulness(judge=server.judge_config()).evaluate(WRONG, RAG_CASE)
    assert result.score == 1.0
    assert "2 of 4 question(s) UNKNOWN — excluded from score denominator" in result.reason


async def test_batched_reply_answering_one_of_four_is_a_judge_error(server):
    server.set_reply('{"answers": {"1": "yes"}}')
    with pytest.raises(JudgeUnavailable, match=r"leaves out question id\(s\) 2, 3, 4 of the 4 "
                       r"asked \(1-4\): it answers 1 of 4"):
        await Faithfulness(judge=server.judge_config(), batch=True).evaluate(WRONG, RAG_CASE)


def test_case_batch_omitting_one_evaluators_ids_is_a_judge_error_for_it_only(server, tmp_path,
                                                                             monkeypatch):
    # Faithfulness asks 4 questions (ids 1-4), Hallucination 4 (ids 5-8): the reply answers
    # one of Faithfulness' and all of Hallucination's.
    monkeypatch.chdir(tmp_path)
    server.set_reply('{"answers": {"1": "yes", "5": "no", "6": "no", "7": "no", "8": "no"}}')
    configure(server.judge_config())
    suite = EvalSuite("case batch coverage")
    suite.add_cases([RAG_CASE])
    suite.add_evaluators(Faithfulness(threshold=0.0, batch="case"),
                         Hallucination(threshold=0.0, batch="case"))
    report = suite.run(lambda prompt: WRONG.actual_response, verbose=False)

    assert server.request_count == 1
    (case,) = report.cases
    assert case.status is CaseStatus.JUDGE_ERROR
    results = {r.criterion: r for r in case.results}
    assert results["faithfulness"].error_kind == "judge"
    assert "it answers 1 of 4, not each question" in results["faithfulness"].error
    assert results["hallucination"].error is None
    assert results["hallucination"].details["answered"] == 4


def test_suite_marks_a_one_of_four_case_judge_error_in_per_question_mode(server, tmp_path,
                                                                         monkeypatch):
    monkeypatch.chdir(tmp_path)
    answer_first_only(server)
    configure(server.judge_config())
    suite = EvalSuite("coverage")
    suite.add_cases([RAG_CASE])
    suite.add_evaluators(Faithfulness(threshold=0.0))
    report = suite.run(lambda prompt: WRONG.actual_response, verbose=False)
    assert [c.status for c in report.cases] == [CaseStatus.JUDGE_ERROR]
    assert report.errors == 1


async def test_check_evaluator_and_agent_evaluators_apply_the_same_rule(server):
    check = CheckEvaluator("mentions the height", questions=["Q one?", "Q two?", "Q three?"],
                           judge=server.judge_config())
    server.set_reply(lambda request: "Yes" if "Q one?" in request.prompt else HEDGE)
    with pytest.raises(JudgeUnavailable, match="only 1 of 3 question"):
        await check.evaluate(WRONG, RAG_CASE)

    server.set_reply(lambda request: "Yes" if "complete the task in" in request.prompt else HEDGE)
    with pytest.raises(JudgeUnavailable, match="only 1 of 4 question"):
        await TaskCompletion(judge=server.judge_config()).evaluate(WRONG, RAG_CASE)


# Batched replies that show the judge did not answer the questions asked.
REJECTED_BATCH_REPLIES = [
    ('{"answers": {"<question id>": "<yes or no>", ...}}', "copies the placeholders"),
    ('{"answers": {"<question id>": "<yes or no>"}}', "copies the placeholders"),
    ('{"answers": {"1": "<yes or no>", "2": "<yes or no>", "3": "<yes or no>", '
     '"4": "<yes or no>"}}', "copies the placeholders"),
    ('{"answers": {"1": "yes", "2": "yes", "3": "no", "4": "no", "5": "yes"}}',
     'question id(s) "5" that were not asked (asked: 1-4)'),
    ('{"answers": {"0": "no", "1": "yes", "2": "yes", "3": "no"}}', 'id(s) "0" that were not'),
    ('{"answers": {"Does the model output contradict the context?": "no"}}',
     "that were not asked"),
    ('{"answers": [{"id": 7, "answer": "yes"}, {"id": 1, "answer": "yes"}]}',
     "id(s) 7 that were not asked"),
    ('Questions:\n1. Is every claim supported?\n{"answers": {"1": "yes", "2": "yes", "3": "no", '
     '"4": "no"}}', "repeats the prompt"),
    ('<<<BEGIN MODEL OUTPUT 0123456789ab>>>\nThe Eiffel Tower is 450 metres tall.\n'
     '<<<END MODEL OUTPUT 0123456789ab>>>\n{"answers": {"1": "yes", "2": "yes", "3": "no", '
     '"4": "no"}}', "repeats the prompt"),
]


@pytest.mark.parametrize(("reply", "why"), REJECTED_BATCH_REPLIES)
async def test_batched_reply_that_did_not_answer_the_questions_is_rejected(server, reply, why):
    server.set_reply(reply)
    with pytest.raises(JudgeUnavailable) as caught:
        await Faithfulness(judge=server.judge_config(), batch=True).evaluate(WRONG, RAG_CASE)
    assert "batched judge reply rejected" in str(caught.value)
    assert why in str(caught.value)
    assert caught.value.details["answered"] == 0


async def test_a_rejected_batched_reply_is_not_cached(server, tmp_path):
    cfg = server.judge_config(cache=True, cache_path=str(tmp_path / "cache.db"))
    server.set_reply('{"answers": {"<question id>": "<yes or no>"}}')
    with pytest.raises(JudgeUnavailable):
        await Faithfulness(judge=cfg, batch=True).evaluate(WRONG, RAG_CASE)
    server.set_reply('{"answers": {"1": "yes", "2": "no", "3": "yes", "4": "no"}}')
    result = await Faithfulness(judge=cfg, batch=True).evaluate(WRONG, RAG_CASE)
    assert server.request_count == 2 and result.score == 1.0


BATCH_SCHEMA_IDS = ["1", "2", "3", "4"]


def assert_batch_schema(schema: dict) -> None:
    answers = schema["properties"]["answers"]
    assert schema["required"] == ["answers"] and schema["additionalProperties"] is False
    assert answers["required"] == BATCH_SCHEMA_IDS and answers["additionalProperties"] is False
    assert all(answers["properties"][i]["enum"] == ["yes", "no"] for i in BATCH_SCHEMA_IDS)


@pytest.mark.parametrize("api_style", ["chat", "responses"])
async def test_openai_wires_ask_for_the_batched_reply_schema(server, api_style):
    server.set_reply('{"answers": {"1": "yes", "2": "no", "3": "yes", "4": "no"}}')
    result = await Faithfulness(judge=server.judge_config(api_style=api_style),
                                batch=True).evaluate(WRONG, RAG_CASE)
    (request,) = server.requests
    assert_batch_schema(request.reply_schema)
    if api_style == "chat":
        form = request.body["response_format"]
        assert form["type"] == "json_schema" and form["json_schema"]["strict"] is True
    else:
        form = request.body["text"]["format"]
        assert form["type"] == "json_schema" and form["strict"] is True
    assert result.score == 1.0


async def test_gemini_asks_for_the_batched_reply_schema_when_told_to(server):
    pytest.importorskip("google.genai")
    server.set_reply('{"answers": {"1": "yes", "2": "no", "3": "yes", "4": "no"}}')
    for structured in (None, True):
        server.reset_record()
        cfg = server.judge_config(provider="google", structured_output=structured)
        await Faithfulness(judge=cfg, batch=True).evaluate(WRONG, RAG_CASE)
        (request,) = server.requests
        assert request.body["generationConfig"]["responseMimeType"] == "application/json"
        if structured:
            assert_batch_schema(request.reply_schema)
        else:  # Gemini bills the schema as input: not sent unless asked for
            assert request.reply_schema is None


async def test_structured_output_false_sends_no_schema_to_a_compatible_server(server):
    server.set_reply('{"answers": {"1": "yes", "2": "no", "3": "yes", "4": "no"}}')
    cfg = server.judge_config(structured_output=False)
    result = await Faithfulness(judge=cfg, batch=True).evaluate(WRONG, RAG_CASE)
    (request,) = server.requests
    assert request.reply_schema is None
    assert request.body["response_format"] == {"type": "json_object"}
    assert result.score == 1.0


@pytest.mark.parametrize(("provider", "base_url", "structured", "sent"), [
    ("openai", "http://127.0.0.1:8080/v1", None, True),      # llama.cpp, vLLM, Ollama ...
    ("openai", "https://gateway.example.com/v1", None, True),
    ("openai", "", None, False),                             # OpenAI's own API
    ("openai", "https://api.openai.com/v1", None, False),
    ("openai", "https://me.openai.azure.com/openai", None, False),
    ("openai", "https://api.openai.com/v1", True, True),
    ("openai", "http://127.0.0.1:8080/v1", False, False),
    ("google", "", None, False),
    ("google", "", True, True),
    ("anthropic", "", True, False),                          # never: see docs/judge.md
])
def test_which_endpoints_get_the_reply_schema(provider, base_url, structured, sent):
    from referee import JudgeConfig
    from referee.judge.providers import sends_reply_schema

    cfg = JudgeConfig(provider=provider, structured_output=structured)
    assert sends_reply_schema(cfg, base_url) is sent


async def test_anthropic_gets_no_forced_tool_for_the_batched_schema(server):
    # A forced tool would add Anthropic's tool-use system prompt (some 300 tokens) and the
    # schema to every batched request: the instruction and the reply checks stand in.
    server.set_reply('{"answers": {"1": "yes", "2": "no", "3": "yes", "4": "no"}}')
    result = await Faithfulness(judge=server.judge_config(provider="anthropic"),
                                batch=True).evaluate(WRONG, RAG_CASE)
    (request,) = server.requests
    assert "tools" not in request.body and request.reply_schema is None
    assert "single JSON object" in request.prompt + (request.system or "")
    assert result.score == 1.0


async def test_a_judge_that_ignores_the_schema_is_still_read_by_the_fallback(server):
    # A server that takes the schema but answers in prose with a JSON object in it.
    server.set_reply('Sure: {"answers": {"1": "yes", "2": "no", "3": "yes", "4": "no"}}')
    for provider in ("openai", "anthropic"):
        server.reset_record()
        result = await Faithfulness(judge=server.judge_config(provider=provider),
                                    batch=True).evaluate(WRONG, RAG_CASE)
        assert result.score == 1.0 and server.request_count == 1


async def test_per_question_and_plain_json_requests_carry_no_schema(server):
    await Faithfulness(judge=server.judge_config()).evaluate(WRONG, RAG_CASE)
    assert all(r.reply_schema is None for r in server.requests)
    assert all("response_format" not in r.body for r in server.requests)


def test_scripted_server_refuses_a_malformed_strict_schema_as_openai_does(server):
    import openai

    client = openai.OpenAI(base_url=server.base_url(), api_key="k", max_retries=0)
    loose = {"type": "object", "properties": {"answers": {"type": "object"}},
             "required": ["answers"], "additionalProperties": False}
    with pytest.raises(openai.BadRequestError, match="additionalProperties"):
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}],
            response_format={"type": "json_schema", "json_schema": {
                "name": "referee_reply", "strict": True, "schema": loose}})
    with pytest.raises(openai.BadRequestError, match="name"):
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}],
            response_format={"type": "json_schema", "json_schema": {"name": "bad name!",
                                                                    "schema": loose}})
    assert server.request_count == 0  # refused before any scripted reply
    client.close()


async def test_echoed_data_block_is_not_read_as_the_verdict(server):
    # The judge echoes the model's own "Yes ..." from the fenced block and gives no verdict.
    def responder(request):
        block = re.search(r"<<<BEGIN MODEL OUTPUT \w+>>>.*?<<<END MODEL OUTPUT \w+>>>",
                          request.prompt, re.DOTALL).group(0)
        return block
    server.set_reply(responder)
    output = ExecutionResult(actual_response="Yes, children pay 20 euros.")
    with pytest.raises(JudgeUnavailable, match="4 of 4 question"):
        await Faithfulness(judge=server.judge_config()).evaluate(output, RAG_CASE)


async def test_negated_verdict_words_are_not_a_no(server):
    # "no" meaning "none" does not answer "Does the output stay within the context?" with NO.
    server.set_reply("It is a short factual answer with no invented details.")
    with pytest.raises(JudgeUnavailable, match="4 of 4 question"):
        await Faithfulness(judge=server.judge_config()).evaluate(WRONG, RAG_CASE)


async def test_an_echoed_question_task_does_not_hide_the_verdict(server):
    def responder(request):
        task = request.prompt[request.prompt.index("Question: "):]
        return f"{task}\nNo"
    server.set_reply(responder)
    result = await Hallucination(judge=server.judge_config()).evaluate(WRONG, RAG_CASE)
    assert [r["verdict"] for r in result.details["questions"]] == ["no"] * 4


def test_batched_reply_schema_is_json_serialisable():
    from referee.evaluators.prompts import batch_schema

    assert json.loads(json.dumps(batch_schema(3)))["properties"]["answers"]["required"] == [
        "1", "2", "3"]


def test_a_reply_schema_is_part_of_the_cached_prefix_as_at_the_provider():
    """OpenAI puts the schema before the system message: batched requests share cached
    material only with those asking as many questions, and the schema is billed as input."""
    import asyncio

    from referee import CustomRubric

    material = "Refund policy: " + "Refunds are issued within ten business days. " * 150
    case = EvalCase(input="How long do refunds take?", context=material)
    output = ExecutionResult(actual_response="Ten business days.")

    def rubric(count: int, tag: str, cfg) -> CustomRubric:
        return CustomRubric([(f"{tag} question {i}?", True) for i in range(count)], judge=cfg,
                            batch=True)

    def answers(request):
        count = int(re.search(r"Answer all (\d+) question", request.prompt).group(1))
        return json.dumps({"answers": {str(i): "yes" for i in range(1, count + 1)}})

    with ScriptedJudgeServer(answers) as server:
        cfg = server.judge_config(provider="openai")
        for count, tag in ((4, "first"), (4, "second"), (5, "third")):
            asyncio.run(rubric(count, tag, cfg).evaluate(output, case))
        first, same_schema, other_schema = server.requests
    assert first.cached_input_tokens == 0
    assert same_schema.cached_input_tokens > 1000
    assert other_schema.cached_input_tokens == 0
    schema_tokens = len(json.dumps(first.reply_schema, sort_keys=True)) // 4
    assert first.input_tokens >= schema_tokens + len(first.prompt) // 4


async def test_judged_results_keep_the_judges_replies_redacted_and_bounded(server):
    from referee import GEval

    secret = "sk-proj-" + "Zx9Yw8Vu" * 6
    padding = " filler" * 400
    server.set_reply(f"Yes. (key {secret}){padding}")
    qag = await Faithfulness(judge=server.judge_config()).evaluate(WRONG, RAG_CASE)
    server.set_reply(json.dumps({"score": 0.9, "reason": f"key {secret}{padding}"}))
    geval = await GEval("states the height", runs=1, judge=server.judge_config()).evaluate(
        WRONG, RAG_CASE)
    server.set_reply(json.dumps({"answers": {"1": "yes", "2": "no", "3": "yes", "4": "no"},
                                 "note": f"key {secret}{padding}"}))
    batched = await Faithfulness(judge=server.judge_config(), batch=True).evaluate(
        WRONG, RAG_CASE)

    kept = ([r["raw_reply"] for r in qag.details["questions"]]
            + [r["raw_reply"] for r in geval.details["runs"]] + [batched.details["batch_reply"]])
    assert len(kept) == 6
    for text in kept:
        assert secret not in text and len(text) <= 1000
    assert qag.details["questions"][0]["raw_reply"].startswith("Yes. (key ")
