"""Each document-000 judged criterion: prompts, skip rules, scores and details keys, through the
scripted judge server, plus the document's code examples with only the import line changed."""

from __future__ import annotations

import json

import pytest
from test_llm_criteria import case, cfg, cycling, reply, run, server  # noqa: F401

from referee.case import EvalCase, Invocation, ToolCall
from referee.config import Rubric
from referee.criteria.llm import (
    FactualAccuracyCriterion,
    HallucinationCriterion,
    LLMJudgeCriterion,
    ResponseMatchCriterion,
    RubricBasedCriterion,
    SafetyCriterion,
    SimulationGoalsCriterion,
)
from referee.execution import ExecutionResult, TurnResult
from referee.testing.server import ScriptedJudgeServer


def prompt_of(srv: ScriptedJudgeServer, index: int = 0) -> str:
    return srv.requests[index].prompt


# LLMJudgeCriterion / ResponseMatchCriterion -----------------------------------------------


async def test_llm_judge_details(server):
    server.set_reply(cycling(reply(0.8, "close"), reply(1.0, "same"), reply(0.9, "typical")))
    result = await LLMJudgeCriterion(cfg()).evaluate(run(), case())

    assert result.criterion == "final_response_match_v2"
    assert set(result.details) == {"samples", "individual_scores", "reasonings", "judge_model",
                                   "reason", "sample_replies"}
    assert result.details["samples"] == 3
    assert sorted(result.details["individual_scores"]) == [0.8, 0.9, 1.0]
    assert sorted(result.details["reasonings"]) == ["close", "same", "typical"]
    assert result.details["judge_model"] == "gpt-4o-mini"
    assert result.details["reason"] == "Mean judge score 0.90 over 3 samples: typical"
    assert result.score == pytest.approx(0.9)


@pytest.mark.parametrize("criterion_class", [LLMJudgeCriterion, ResponseMatchCriterion])
async def test_llm_judge_skips_without_expected_response(server, criterion_class):
    result = await criterion_class(cfg()).evaluate(run(), case(expected=None))
    assert (result.score, result.passed, result.skipped) == (1.0, True, True)
    assert "No expected final response" in result.details["note"]
    assert result.details["reason"] == result.details["note"]
    assert server.request_count == 0


async def test_llm_judge_skips_without_agent_response(server):
    result = await LLMJudgeCriterion(cfg()).evaluate(run("  "), case())
    assert result.score == 1.0
    assert result.details["note"] == "No response to evaluate"
    assert server.request_count == 0


async def test_llm_judge_compares_with_last_non_empty_expected_turn(server):
    multi = EvalCase.multi_turn([
        Invocation(user_content="Hi", expected_final_response="Hello! How can I help?"),
        Invocation(user_content="Refund order 7", expected_final_response="Refund issued."),
        Invocation(user_content="Thanks", expected_final_response=None),
    ])
    await LLMJudgeCriterion(cfg(num_samples=1)).evaluate(run("Done, refunded."), multi)
    prompt = prompt_of(server)
    assert "<expected_response>\nRefund issued.\n</expected_response>" in prompt
    assert "<user_request>\nThanks\n</user_request>" in prompt


async def test_response_match_is_llm_judge_with_the_same_prompt(server):
    assert issubclass(ResponseMatchCriterion, LLMJudgeCriterion)
    await LLMJudgeCriterion(cfg(num_samples=1)).evaluate(run(), case())
    result = await ResponseMatchCriterion(cfg(num_samples=1)).evaluate(run(), case())
    assert result.criterion == "response_match_score"
    assert prompt_of(server, 0) == prompt_of(server, 1)
    assert "reason" in result.details


# RubricBasedCriterion ----------------------------------------------------------------------

RUBRICS = [
    Rubric(rubric_id="concise", content="Under 100 words.", weight=1.0),
    Rubric(rubric_id="empathetic", content="Acknowledges the complaint.", weight=0.5),
]


async def test_rubric_renders_each_rubric_and_reports_details(server):
    server.set_reply(cycling(reply(0.5, "not empathetic"), reply(1.0, "fine")))
    criterion = RubricBasedCriterion(
        cfg(rubrics=RUBRICS, num_samples=2, threshold=0.7))
    result = await criterion.evaluate(run(), case())

    prompt = prompt_of(server)
    assert "- concise: Under 100 words.\n- empathetic: Acknowledges the complaint." in prompt
    assert "weight" not in prompt.lower()
    assert result.criterion == "rubric_based_final_response_quality_v1"
    assert set(result.details) == {"rubrics", "scores", "reasonings", "samples", "judge_model",
                                   "reason", "sample_replies"}
    assert result.details["rubrics"] == ["concise", "empathetic"]
    assert sorted(result.details["scores"]) == [0.5, 1.0]
    assert sorted(result.details["reasonings"]) == ["fine", "not empathetic"]
    assert result.score == pytest.approx(0.75) and result.passed


async def test_rubric_without_rubrics_is_one_without_a_call(server):
    result = await RubricBasedCriterion(cfg()).evaluate(run(), case())
    assert result.score == 1.0 and result.passed
    assert result.details["rubrics"] == []
    assert server.request_count == 0


async def test_rubric_weights_do_not_change_the_score(server):
    server.set_reply(reply(0.6))
    light = [Rubric(rubric_id=r.rubric_id, content=r.content, weight=0.01) for r in RUBRICS]
    heavy = await RubricBasedCriterion(cfg(rubrics=RUBRICS, num_samples=1)).evaluate(run(), case())
    small = await RubricBasedCriterion(cfg(rubrics=light, num_samples=1)).evaluate(run(), case())
    assert heavy.score == small.score == pytest.approx(0.6)
    assert prompt_of(server, 0) == prompt_of(server, 1)


# FactualAccuracyCriterion ------------------------------------------------------------------


async def test_factual_accuracy_reference_is_last_expected_response(server):
    server.set_reply(cycling(
        reply(0.4, "wrong year", errors=["Founded in 1999", "Based in Oslo"]),
        reply(0.6, "one error", errors=["founded in 1999"]),
    ))
    the_case = case(expected="Founded in 2004 in Berlin.", metadata={"reference_facts": "unused"})
    result = await FactualAccuracyCriterion(cfg(num_samples=2)).evaluate(
        run("Founded in 1999 in Oslo."), the_case)

    prompt = prompt_of(server)
    assert "<reference>\nFounded in 2004 in Berlin.\n</reference>" in prompt
    assert "unused" not in prompt
    assert result.criterion == "factual_accuracy_v1"
    assert set(result.details) == {"is_accurate", "samples", "reasonings", "errors",
                                   "judge_model", "reason", "sample_replies"}
    assert result.details["is_accurate"] is False
    assert result.details["samples"] == 2
    # De-duplicated across samples (case and spacing do not make a new error). The samples run
    # concurrently, so which spelling arrives first, and is kept, varies.
    assert sorted(e.lower() for e in result.details["errors"]) == ["based in oslo",
                                                                   "founded in 1999"]
    assert result.score == pytest.approx(0.5)


async def test_factual_accuracy_falls_back_to_reference_facts(server):
    server.set_reply(reply(0.9, "accurate", errors=[]))
    the_case = case(expected=None, metadata={"reference_facts": ["Water boils at 100 C",
                                                                 "at sea level"]})
    result = await FactualAccuracyCriterion(cfg(num_samples=1)).evaluate(run(), the_case)
    assert "<reference>\n- Water boils at 100 C\n- at sea level\n</reference>" in prompt_of(server)
    assert result.details["is_accurate"] is True
    assert result.details["errors"] == []


async def test_factual_accuracy_without_reference_judges_on_knowledge(server):
    await FactualAccuracyCriterion(cfg(num_samples=1)).evaluate(run(), case(expected=None))
    prompt = prompt_of(server)
    assert "<reference>" not in prompt
    assert "No reference material is available" in prompt


# HallucinationCriterion --------------------------------------------------------------------


async def test_hallucination_context_has_every_tool_result_and_metadata_context(server):
    server.set_reply(cycling(
        reply(0.5, "invented a date", is_grounded=False, hallucinations=["ships Monday"]),
        reply(0.7, "mostly fine", is_grounded=False, hallucinations=["ships Monday", "free"]),
    ))
    execution = run(
        "Your order ships Monday and shipping is free.",
        tool_calls=[
            ToolCall(name="lookup_order", args={"id": 7}, result={"status": "packed"}),
            ToolCall(name="shipping_quote", args={}, result="12.50 EUR"),
            ToolCall(name="log_event", args={}),  # no result: nothing to ground on
        ],
    )
    the_case = case(metadata={"context": "Orders ship within 5 business days."})
    result = await HallucinationCriterion(cfg(num_samples=2)).evaluate(execution, the_case)

    prompt = prompt_of(server)
    context = prompt[prompt.index("<context>"):prompt.index("</context>")]
    assert 'Tool lookup_order returned:\n{"status": "packed"}' in context
    assert "Tool shipping_quote returned:\n12.50 EUR" in context
    assert "log_event" not in context
    assert "Orders ship within 5 business days." in context
    assert result.criterion == "hallucinations_v1"
    assert set(result.details) == {"is_grounded", "samples", "reasonings", "hallucinations",
                                   "judge_model", "reason", "sample_replies"}
    assert result.details["is_grounded"] is False
    assert result.details["hallucinations"] == ["ships Monday", "free"]
    assert result.score == pytest.approx(0.6)


async def test_hallucination_reads_tool_calls_of_turns(server):
    execution = ExecutionResult(actual_response="It is 21 C.", turns=[
        TurnResult(user_content="weather?", response="It is 21 C.",
                   tool_calls=[ToolCall(name="weather", result="21 C, sunny")]),
    ])
    result = await HallucinationCriterion(cfg(num_samples=1)).evaluate(execution, case())
    assert "Tool weather returned:\n21 C, sunny" in prompt_of(server)
    assert result.details["is_grounded"] is True


# SafetyCriterion ---------------------------------------------------------------------------


async def test_safety_averages_overall_and_category_scores(server):
    server.set_reply(cycling(
        reply(1.0, "safe", is_safe=True, issues=[], categories={
            "harmful_content": 1.0, "hate_speech": 1.0, "privacy": 0.8,
            "misinformation": 1.0, "manipulation": 1.0}),
        reply(0.6, "shares an email", is_safe=False, issues=["reveals an email address"],
              categories={"harmful_content": 1.0, "hate_speech": 1.0, "privacy": 0.2,
                          "misinformation": 0.9, "manipulation": 1.0}),
    ))
    result = await SafetyCriterion(cfg(num_samples=2)).evaluate(run(), case())

    assert result.criterion == "safety_v1"
    assert set(result.details) == {"is_safe", "samples", "reasonings", "issues",
                                   "category_scores", "judge_model", "reason", "sample_replies"}
    assert result.score == pytest.approx(0.8)
    assert result.details["is_safe"] is True
    assert result.details["issues"] == ["reveals an email address"]
    assert result.details["category_scores"] == pytest.approx({
        "harmful_content": 1.0, "hate_speech": 1.0, "privacy": 0.5,
        "misinformation": 0.95, "manipulation": 1.0})


async def test_safety_category_no_sample_rated_is_none(server):
    server.set_reply(reply(0.3, "unsafe", issues=["weapon steps"],
                           categories={"harmful_content": 0.1}))
    result = await SafetyCriterion(cfg(num_samples=1)).evaluate(run(), case())
    assert result.details["category_scores"]["harmful_content"] == pytest.approx(0.1)
    assert result.details["category_scores"]["privacy"] is None
    assert result.details["is_safe"] is False
    assert "<response>" in prompt_of(server)


# SimulationGoalsCriterion ------------------------------------------------------------------

TRANSCRIPT = ("User: I need to change my flight.\nAgent: Done, moved to Friday.\n"
              "User: And a refund for the fee?\nAgent: I can't do that.")
GOALS = "Goals:\n- Change the flight\n- Refund the change fee\n- Confirm by email"


async def test_simulation_goals_makes_one_call_and_counts_goals(server):
    server.set_reply(json.dumps({"achieved": [1], "reasoning": "Only the flight moved."}))
    criterion = SimulationGoalsCriterion(cfg(num_samples=5))
    result = await criterion.evaluate(run(TRANSCRIPT), case(expected=GOALS))

    assert server.request_count == 1
    prompt = prompt_of(server)
    assert "1. Change the flight\n2. Refund the change fee\n3. Confirm by email" in prompt
    assert "<transcript>" in prompt
    assert result.criterion == "simulation_goals"
    assert set(result.details) == {"achieved_goals", "unachieved_goals", "reasoning", "reason",
                                   "judge_model", "sample_replies"}
    assert result.details["achieved_goals"] == ["Change the flight"]
    assert result.details["unachieved_goals"] == ["Refund the change fee", "Confirm by email"]
    assert result.details["reasoning"] == result.details["reason"] == "Only the flight moved."
    assert result.details["judge_model"] == "gpt-4o-mini"
    assert result.score == pytest.approx(1 / 3)
    assert result.token_usage is not None and result.token_usage.requests == 1


async def test_simulation_goals_reads_last_non_empty_expected_turn(server):
    server.set_reply(json.dumps({"achieved": ["1", 2, 9], "reasoning": "both"}))
    multi = EvalCase.multi_turn([
        Invocation(user_content="a", expected_final_response="Old goal"),
        Invocation(user_content="b", expected_final_response="1. Greet\n2. Book a table"),
        Invocation(user_content="c", expected_final_response=""),
    ])
    result = await SimulationGoalsCriterion(cfg()).evaluate(run(TRANSCRIPT), multi)
    assert result.details["achieved_goals"] == ["Greet", "Book a table"]
    assert result.score == 1.0
    assert "Old goal" not in prompt_of(server)


async def test_simulation_goals_without_goals_is_one_with_a_note(server):
    result = await SimulationGoalsCriterion(cfg()).evaluate(run(TRANSCRIPT), case(expected=None))
    assert result.score == 1.0 and result.passed
    assert "No goals" in result.details["note"]
    assert result.details["achieved_goals"] == [] and result.details["unachieved_goals"] == []
    assert server.request_count == 0


async def test_simulation_goals_without_goals_says_so_in_10xgraphs_words(server):
    result = await SimulationGoalsCriterion(cfg()).evaluate(run(TRANSCRIPT), case(expected=None))
    assert result.details["note"] == "No goals defined — skipping evaluation"


async def test_simulation_goals_error_names_the_judges_failure(server):
    """10xgraph puts the judge call's exception in ``result.error``; "All LLM samples failed"
    alone hid why (an outage, a refused request, a bad key)."""
    from referee.testing.script import Fault

    server.set_reply(Fault.http(400))
    result = await SimulationGoalsCriterion(cfg()).evaluate(run(TRANSCRIPT), case(expected=GOALS))
    assert not result.passed and result.error_kind == "judge"
    assert "JudgeUnavailable" in result.error and "HTTP 400" in result.error
    assert result.details["achieved_goals"] == [] and result.details["unachieved_goals"] == []


async def test_simulation_goals_error_names_any_exception_of_its_call(server, monkeypatch):
    async def broken(self, prompt):
        raise RuntimeError("API error")

    monkeypatch.setattr(SimulationGoalsCriterion, "_call_llm_json", broken)
    result = await SimulationGoalsCriterion(cfg()).evaluate(run(TRANSCRIPT), case(expected=GOALS))
    assert not result.passed and "API error" in result.error
    assert result.error_kind == "evaluator"


async def test_simulation_goals_reply_without_goal_list_fails(server):
    server.set_reply(reply(1.0, "all good"))
    result = await SimulationGoalsCriterion(cfg()).evaluate(run(TRANSCRIPT), case(expected=GOALS))
    # Issue 31: the cause follows, as 10xgraph puts the judge's exception in the error.
    assert result.error.startswith("All LLM samples failed: JudgeUnavailable: ")
    assert "'achieved'" in result.error
    assert result.error_kind == "judge"
    assert result.details["achieved_goals"] == []


async def test_simulation_goals_no_provider_fallback(server):
    result = await SimulationGoalsCriterion(cfg(judge_model="local-llm")).evaluate(
        run(TRANSCRIPT), case(expected=GOALS))
    assert result.score == 0.5
    assert result.details["reasoning"] == "No LLM provider available"
    assert result.details["judge_unavailable"] is True
    assert server.request_count == 0


async def test_simulation_goals_empty_transcript_achieves_nothing(server):
    result = await SimulationGoalsCriterion(cfg()).evaluate(run(""), case(expected=GOALS))
    assert result.score == 0.0
    assert len(result.details["unachieved_goals"]) == 3
    assert server.request_count == 0


# Document 000's examples, import line changed only -----------------------------------------


@pytest.fixture
def execution() -> ExecutionResult:
    return run()


@pytest.fixture(name="case")
def case_fixture() -> EvalCase:
    return case()


async def test_doc_example_response_match(server, execution, case, capsys):
    server.set_reply(reply(0.75, "Same answer."))
    from referee import CriterionConfig, ResponseMatchCriterion

    criterion = ResponseMatchCriterion(
        config=CriterionConfig.response_match(threshold=0.8, num_samples=3),
    )
    result = await criterion.evaluate(execution, case)
    print(result.score, result.details["reason"])

    assert capsys.readouterr().out == (
        "0.75 Mean judge score 0.75 over 3 samples: Same answer.\n")
    assert {r.provider for r in server.requests} == {"google"}  # default judge gemini-2.5-flash


async def test_doc_example_rubric_based(server, execution, case):
    server.set_reply(reply(0.85, "Concise and kind."))
    from referee import CriterionConfig, Rubric, RubricBasedCriterion

    criterion = RubricBasedCriterion(
        config=CriterionConfig.rubric_based(
            rubrics=[
                Rubric(rubric_id="concise", content="Under 100 words.", weight=1.0),
                Rubric(rubric_id="empathetic", content="Acknowledges the complaint.", weight=0.5),
            ],
            threshold=0.8,
        ),
    )

    result = await criterion.evaluate(execution, case)
    assert result.passed and result.details["rubrics"] == ["concise", "empathetic"]
    assert server.request_count == 3


async def test_doc_example_simulation_goals(server, case, capsys):
    server.set_reply(json.dumps({"achieved": [1, 2], "reasoning": "Both done."}))
    execution = run(TRANSCRIPT)
    case = EvalCase(input="change my flight", expected_output="Change the flight\nBe polite")
    from referee import CriterionConfig, SimulationGoalsCriterion

    criterion = SimulationGoalsCriterion(
        config=CriterionConfig(
            judge_model="gemini-2.5-flash",
            threshold=0.8,
        ),
    )
    result = await criterion.evaluate(execution, case)
    print(result.score, result.details["achieved_goals"], result.details["unachieved_goals"])

    assert capsys.readouterr().out == "1.0 ['Change the flight', 'Be polite'] []\n"
    assert server.request_count == 1


async def test_doc_import_paths():
    from referee import LLMCallerMixin as FromTop
    from referee.criteria import LLMCallerMixin, TemplatedLLMCriterion

    assert FromTop is LLMCallerMixin
    assert issubclass(TemplatedLLMCriterion, LLMCallerMixin)
