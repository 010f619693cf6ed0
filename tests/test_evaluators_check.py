"""CheckEvaluator: question generation once per run, pinned questions, fallback, discrete scores."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import warnings

import pytest

from referee import CheckEvaluator, EvalCase, EvalSuite, ExecutionResult, configure
from referee.testing import ScriptedJudgeServer

CRITERION = "Response should mention the return policy"
GENERATED = [
    "Does the response name the return window?",
    "Does the response say how to start a return?",
    "Does the response mention any condition for a refund?",
]


pytestmark = pytest.mark.usefixtures("isolated_judge")


@pytest.fixture
def server():
    with ScriptedJudgeServer(reply="Yes") as srv:
        yield srv


def is_generation(request) -> bool:
    return "yes/no question(s) for this criterion" in request.prompt


def generation_requests(server) -> list:
    return [r for r in server.requests if is_generation(r)]


def answer_no_to(server, questions: set[str]) -> None:
    def responder(request):
        match = re.search(r"^Question: (.*)$", request.prompt, re.MULTILINE)
        return "No" if match and match.group(1) in questions else "Yes"
    server.set_reply(responder)


def out(text: str) -> ExecutionResult:
    return ExecutionResult(actual_response=text)


CASE = EvalCase(input="What is your return policy?")


async def test_questions_are_generated_once_and_reused_for_every_case(server, caplog):
    server.add_rule(is_generation, json.dumps({"questions": GENERATED}))
    check = CheckEvaluator(CRITERION, judge=server.judge_config())
    assert check.resolved_questions is None

    with caplog.at_level(logging.INFO, logger="referee.evaluators.check"):
        await check.prepare()
        await check.prepare()  # idempotent
    assert len(generation_requests(server)) == 1
    assert check.resolved_questions == GENERATED
    assert check._used_fallback is False
    assert all(q in caplog.text for q in GENERATED)
    generation = generation_requests(server)[0]
    assert "Write exactly 3 yes/no question(s)" in generation.prompt
    assert json.dumps(CRITERION) in generation.prompt

    for _ in range(3):
        result = await check.evaluate(out("Returns within 30 days; start one online; receipt needed."), CASE)
        assert result.score == 1.0 and result.passed
    assert len(generation_requests(server)) == 1
    assert server.request_count == 1 + 3 * 3  # one generation, then one call per question per case
    assert check.name == "response_should_mention_the_return_policy"
    assert result.details["criterion"] == CRITERION


async def test_concurrent_prepare_generates_once(server):
    server.add_rule(is_generation, json.dumps({"questions": GENERATED}))
    check = CheckEvaluator(CRITERION, judge=server.judge_config())
    await asyncio.gather(*(check.prepare() for _ in range(5)),
                         *(check.evaluate(out("x"), CASE) for _ in range(3)))
    assert len(generation_requests(server)) == 1


async def test_pinned_questions_make_no_generation_call(server):
    pinned = [
        "Does the response mention a return window?",
        "Does the response name the return policy by name?",
        "Does the response provide a link or next step?",
    ]
    check = CheckEvaluator(CRITERION, questions=pinned, judge=server.judge_config())
    assert check.resolved_questions == pinned
    await check.prepare()
    assert server.request_count == 0

    await check.evaluate(out("30 days."), CASE)
    assert server.request_count == 3 and not generation_requests(server)
    assert [r["question"] for r in (await check.evaluate(out("x"), CASE)).details["questions"]] == pinned


@pytest.mark.parametrize("total,failing,passes", [
    (3, 0, True), (3, 1, False), (3, 3, False),           # 3 questions at 0.7 needs 3/3
    (5, 1, True), (5, 2, False),                          # 4/5
    (10, 3, True), (10, 4, False),                        # 7/10
])
async def test_discrete_scores_for_n_questions(server, total, failing, passes):
    questions = [f"Does the response satisfy point {i}?" for i in range(1, total + 1)]
    answer_no_to(server, set(questions[:failing]))
    check = CheckEvaluator(CRITERION, questions=questions, judge=server.judge_config())
    result = await check.evaluate(out("answer"), CASE)

    assert server.request_count == total
    assert result.score == pytest.approx((total - failing) / total)
    assert result.passed is passes and result.threshold == 0.7


async def test_generation_failing_twice_falls_back_to_the_criterion(server):
    server.add_rule(is_generation, "Sorry, I can't help with that.")
    check = CheckEvaluator(CRITERION, judge=server.judge_config())
    with pytest.warns(UserWarning, match="question generation failed after 2 attempts"):
        await check.prepare()

    gens = generation_requests(server)
    assert len(gens) == 2
    assert check._used_fallback is True
    assert check.resolved_questions == [CRITERION]

    result = await check.evaluate(out("Returns are accepted within 30 days."), CASE)
    assert result.reason.startswith("[⚠ question generation failed — using fallback]")
    assert result.details["used_fallback"] is True
    assert len(result.details["questions"]) == 1
    assert result.details["questions"][0]["question"] == CRITERION


async def test_second_attempt_success_is_not_a_fallback(server):
    replies = iter(["not json at all", json.dumps({"questions": GENERATED})])
    server.add_rule(is_generation, lambda request: next(replies))
    check = CheckEvaluator(CRITERION, judge=server.judge_config())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        await check.prepare()
    assert len(generation_requests(server)) == 2
    assert check.resolved_questions == GENERATED and check._used_fallback is False


async def test_num_questions_is_clamped_and_extra_questions_are_dropped(server):
    many = [f"Is point {i} covered?" for i in range(1, 16)]
    server.add_rule(is_generation, json.dumps({"questions": many}))
    check = CheckEvaluator(CRITERION, num_questions=25, judge=server.judge_config())
    assert check.num_questions == 10
    await check.prepare()
    assert "Write exactly 10 yes/no question(s)" in generation_requests(server)[0].prompt
    assert check.resolved_questions == many[:10]
    assert CheckEvaluator(CRITERION, num_questions=0).num_questions == 1


async def test_a_bare_json_array_reply_is_accepted(server):
    server.add_rule(is_generation, json.dumps(GENERATED))
    check = CheckEvaluator(CRITERION, judge=server.judge_config())
    await check.prepare()
    assert check.resolved_questions == GENERATED


def test_criterion_over_300_characters_is_a_clear_error():
    CheckEvaluator("x" * 300)
    with pytest.raises(ValueError, match="301 characters long; the limit is 300"):
        CheckEvaluator("x" * 301)


@pytest.mark.parametrize("kwargs,message", [
    ({"criterion": "  "}, "criterion must be a non-empty string"),
    ({"criterion": "ok", "questions": []}, "questions list must not be empty"),
    ({"criterion": "ok", "questions": ["fine", " "]}, "entry 1"),
    ({"criterion": "ok", "num_questions": "3"}, "num_questions must be an integer"),
])
def test_bad_arguments_are_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CheckEvaluator(**kwargs)


def test_name_threshold_and_judge_are_kept():
    check = CheckEvaluator("Tone should be professional and not defensive", threshold=0.8,
                           name="tone")
    assert (check.name, check.threshold) == ("tone", 0.8)
    assert CheckEvaluator("Tone should be professional").name == "tone_should_be_professional"


def test_document_example_through_the_suite(server, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    server.add_rule(is_generation, json.dumps({"questions": GENERATED}))
    configure(server.judge_config())

    def my_model(prompt: str) -> str:
        return "You can return any item within 30 days; start online; a receipt is required."

    # Document 001's example, unchanged but for the import line.
    suite = EvalSuite("return policy eval")
    suite.add_check("Response should mention the return policy")
    suite.add_check("Tone should be professional and not defensive", threshold=0.8)
    suite.add_cases([EvalCase(input="What is your return policy?")])
    report = suite.run(my_model)

    assert len(generation_requests(server)) == 2  # one per check, before the case loop
    first_case_call = next(i for i, r in enumerate(server.requests) if not is_generation(r))
    assert all(is_generation(r) for r in server.requests[:first_case_call])
    assert len(server.requests) == 2 + 2 * 3
    ev = suite._evaluators[0]
    assert ev.resolved_questions == GENERATED
    assert report.pass_rate == 1.0


def test_document_pinned_example_through_the_suite(server, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    configure(server.judge_config())
    suite = EvalSuite("return policy eval")
    suite.add_check(
        "Response should mention the return policy",
        questions=[
            "Does the response mention a return window?",
            "Does the response name the return policy by name?",
            "Does the response provide a link or next step?",
        ],
    )
    suite.add_cases([EvalCase(input="What is your return policy?")])
    suite.run(lambda prompt: "30-day return policy; see example.com/returns", verbose=False)
    assert not generation_requests(server) and server.request_count == 3


def test_meta_json_records_the_judge_configure_chose_not_the_config_default(server, tmp_path):
    server.add_rule(is_generation, json.dumps({"questions": GENERATED}))
    configure(server.judge_config(provider="openai", model="gpt-4o-mini"))
    suite = EvalSuite("return policy eval")
    suite.add_check("Response should mention the return policy")
    suite.add_cases([EvalCase(input="What is your return policy?")])
    report = suite.run(lambda prompt: "30 days, start online", verbose=False, runs_dir=tmp_path)

    meta_text = (tmp_path / report.run_id / "meta.json").read_text()
    assert "gemini" not in meta_text  # CriterionConfig's default judge_model judges nothing here
    [criterion] = json.loads(meta_text)["criteria"]
    judge = criterion["settings"]["resolved_judge"]
    assert (judge["provider"], judge["model"]) == ("openai", "gpt-4o-mini")
    assert criterion["settings"]["config"] == {"threshold": 0.7}
    assert json.loads(meta_text)["judge"]["model"] == "gpt-4o-mini"
    # A run stored before the resolved judge was recorded (its whole config, no resolved_judge)
    # compares equal to these criteria, so it resumes as before.
    from referee.run.session import criteria_difference, describe_criteria

    earlier = json.loads(json.dumps(json.loads(meta_text)["criteria"]))
    earlier[0]["settings"].pop("resolved_judge")
    earlier[0]["settings"]["config"].update(judge_model="gemini-2.5-flash", num_samples=3)
    assert criteria_difference(earlier, describe_criteria(suite._evaluators)) is None


def test_question_generation_is_charged_to_the_judge_spend(server, tmp_path):
    server.add_rule(is_generation, json.dumps({"questions": GENERATED}))
    configure(server.judge_config())
    suite = EvalSuite("return policy eval")
    suite.add_check("Response should mention the return policy")
    suite.add_check("Tone should be professional and not defensive", threshold=0.8)
    suite.add_cases([EvalCase(input="What is your return policy?"), EvalCase(input="Refunds?")])
    report = suite.run(lambda prompt: "30 days, start online", verbose=False, runs_dir=tmp_path)

    # One generation per check, then 3 questions x 2 checks x 2 cases.
    assert server.request_count == 2 + 2 * 2 * 3
    assert report.token_usage.requests == server.request_count
    stored = json.loads((tmp_path / report.run_id / "report.json").read_text())
    assert stored["spend"]["judge"]["requests"] == server.request_count
    assert stored["summary"]["total_token_usage"]["requests"] == server.request_count
    check = report.summary.criterion_stats["response_should_mention_the_return_policy"]
    assert check.token_usage.requests == 1 + 2 * 3
    assert report.preparation_token_usage["response_should_mention_the_return_policy"].requests == 1
    # A second run of the same suite asks nothing new before its cases and charges nothing.
    again = suite.run(lambda prompt: "30 days, start online", verbose=False, save=False)
    assert again.preparation_token_usage == {}
