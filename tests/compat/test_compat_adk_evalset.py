"""Google ADK eval sets (``google.adk.evaluation`` EvalSet/EvalCase schema) load, run and
round-trip. Every file here is written by hand to ADK's schema: snake_case as ADK writes it,
the camelCase spellings its models accept, the null-filled dump of ``model_dump_json()``,
``intermediate_data`` as tool uses and as invocation events, and conversation scenarios."""

from __future__ import annotations

import copy
import json

import pytest

from referee import (
    AgentEvaluator,
    CriterionConfig,
    EvalConfig,
    ExecutionResult,
    MatchType,
    ToolCall,
)
from referee.config import CriteriaConfig
from referee.errors import InputError
from referee.evalset import EvalSet
from referee.report.model import CaseStatus


def user(text: str) -> dict:
    return {"parts": [{"text": text}], "role": "user"}


def model(text: str) -> dict:
    return {"parts": [{"text": text}], "role": "model"}


TOOL_USES_CASE = {
    "eval_id": "refund-1",
    "conversation": [{
        "invocation_id": "e-1",
        "user_content": user("Refund order 1001"),
        "final_response": model("Order 1001 is refunded."),
        "intermediate_data": {
            "tool_uses": [{"id": "c1", "args": {"order": "1001"}, "name": "lookup_order"},
                          {"id": "c2", "args": {"order": "1001", "amount": 20}, "name": "refund"}],
            "tool_responses": [{"id": "c1", "name": "lookup_order", "response": {"status": "paid"}}],
            "intermediate_responses": [["billing_agent", [{"text": "Checking the order"}]]],
        },
        "creation_timestamp": 1735689600.5,
        "rubrics": [{"rubric_id": "polite", "rubric_content": {"text_property": "Is polite"}}],
        "app_details": {"agent_details": {"root": {"name": "root", "instructions": "help"}}},
    }],
    "session_input": {"app_name": "shop", "user_id": "u-7", "state": {"tier": "gold"}},
    "creation_timestamp": 1735689600.0,
    "rubrics": [{"rubric_id": "complete", "rubric_content": {"text_property": "Answers fully"}}],
    "final_session_state": {"refunded": True},
}

EVENTS_CASE = {
    "eval_id": "weather-events",
    "conversation": [{
        "invocation_id": "e-2",
        "user_content": user("Weather in Paris?"),
        "final_response": model("Sunny, 21 C."),
        "intermediate_data": {"invocation_events": [
            {"author": "weather_agent", "content": {"parts": [
                {"function_call": {"id": "w1", "args": {"city": "Paris"}, "name": "get_weather"}}],
                "role": "model"}},
            {"author": "weather_agent", "content": {"parts": [
                {"function_response": {"id": "w1", "name": "get_weather",
                                       "response": {"sky": "sunny", "c": 21}}}], "role": "user"}},
            {"author": "weather_agent", "content": {"parts": [{"text": "Let me summarise"}],
                                                    "role": "model"}},
        ]},
        "creation_timestamp": 0.0,
    }],
    "session_input": {"app_name": "weather", "user_id": "u-1", "session_id": "fixed-1",
                      "state": {}},
    "creation_timestamp": 0.0,
}

SCENARIO_CASE = {
    "eval_id": "simulated-booking",
    "conversation_scenario": {
        "starting_prompt": "I need to book a flight.",
        "conversation_plan": "Book SFO to LAX next Tuesday under $150, then confirm.",
        "user_persona": "NOVICE",
    },
    "session_input": {"app_name": "travel", "user_id": "u-2", "state": {}},
    "creation_timestamp": 1735000000.0,
}

# What ADK's model_dump_json() writes: every optional key present, many of them null.
NULL_FILLED_CASE = {
    "eval_id": "dumped",
    "conversation": [{
        "invocation_id": "e-9",
        "user_content": {"parts": [{"video_metadata": None, "thought": None, "inline_data": None,
                                    "file_data": None, "thought_signature": None,
                                    "code_execution_result": None, "executable_code": None,
                                    "function_call": None, "function_response": None,
                                    "text": "hello"}], "role": "user"},
        "final_response": None,
        "intermediate_data": None,
        "creation_timestamp": 0.0,
        "rubrics": None,
        "app_details": None,
    }],
    "conversation_scenario": None,
    "session_input": None,
    "creation_timestamp": 0.0,
    "rubrics": None,
    "final_session_state": {},
}


def adk_set(*cases: dict, **header: object) -> dict:
    return {"eval_set_id": "shop_evals", "name": "Shop", "description": "ADK cases",
            "eval_cases": [copy.deepcopy(c) for c in cases], "creation_timestamp": 1735689000.0,
            **header}


def write(tmp_path, document: dict, name: str = "shop.evalset.json"):
    path = tmp_path / name
    path.write_text(json.dumps(document, indent=2))
    return path


def test_every_adk_field_maps_to_the_case_model(tmp_path):
    loaded = EvalSet.load(write(tmp_path, adk_set(TOOL_USES_CASE, EVENTS_CASE, SCENARIO_CASE)))
    assert (loaded.eval_set_id, loaded.name, loaded.description) == ("shop_evals", "Shop", "ADK cases")
    refund, weather, scenario = loaded.eval_cases

    assert refund.eval_id == "refund-1"
    assert refund.input == "Refund order 1001"
    assert refund.expected_output == "Order 1001 is refunded."
    assert refund.expected_tool_trajectory == [
        ToolCall(name="lookup_order", args={"order": "1001"}, call_id="c1", result={"status": "paid"}),
        ToolCall(name="refund", args={"order": "1001", "amount": 20}, call_id="c2"),
    ]
    assert refund.conversation[0].invocation_id == "e-1"
    assert (refund.session_input.app_name, refund.session_input.user_id) == ("shop", "u-7")
    assert refund.session_input.state == {"tier": "gold"}
    assert refund.metadata["adk"]["final_session_state"] == {"refunded": True}
    assert refund.metadata["adk"]["rubrics"][0]["rubric_id"] == "complete"
    turn_kept = refund.conversation[0].metadata["adk"]
    assert turn_kept["creation_timestamp"] == 1735689600.5
    assert turn_kept["rubrics"][0]["rubric_id"] == "polite"
    assert turn_kept["intermediate_data"]["intermediate_responses"][0][0] == "billing_agent"

    assert weather.expected_tool_trajectory == [
        ToolCall(name="get_weather", args={"city": "Paris"}, call_id="w1",
                 result={"sky": "sunny", "c": 21})]
    assert weather.session_input.session_id == "fixed-1"

    # No turn is made up from the starting prompt: the user simulator holds the conversation.
    assert (scenario.input, scenario.conversation) == (None, [])
    assert scenario.metadata["adk"]["conversation_scenario"]["user_persona"] == "NOVICE"
    assert loaded.metadata["adk"] == {"creation_timestamp": 1735689000.0}


@pytest.mark.parametrize("cases", [
    [TOOL_USES_CASE], [EVENTS_CASE], [SCENARIO_CASE], [NULL_FILLED_CASE],
    [TOOL_USES_CASE, EVENTS_CASE, SCENARIO_CASE, NULL_FILLED_CASE],
], ids=["tool-uses", "invocation-events", "scenario", "null-filled", "all"])
def test_an_adk_file_read_and_written_back_is_unchanged(tmp_path, cases):
    original = adk_set(*cases)
    loaded = EvalSet.load(write(tmp_path, original))
    out = tmp_path / "again.evalset.json"
    loaded.save(out, format="adk")
    assert json.loads(out.read_text()) == original
    # And referee's own format keeps all of it, so ADK can be written from there later.
    own = tmp_path / "own.json"
    loaded.save(own)
    assert EvalSet.load(own).to_adk() == original


def test_null_names_and_a_case_without_an_expected_response(tmp_path):
    loaded = EvalSet.load(write(tmp_path, adk_set(NULL_FILLED_CASE, name=None, description=None)))
    case = loaded.eval_cases[0]
    assert loaded.name == "shop_evals" and loaded.description == ""
    assert case.input == "hello" and case.expected_output is None
    assert case.expected_tool_trajectory == [] and case.session_input is None


def test_camel_case_spellings_adk_accepts(tmp_path):
    camel = {
        "evalId": "camel-1",
        "conversation": [{
            "invocationId": "i-1",
            "userContent": user("Track parcel 9"),
            "finalResponse": model("Parcel 9 is in Oslo."),
            "intermediateData": {"toolUses": [{"id": "t1", "args": {"parcel": 9}, "name": "track"}],
                                 "toolResponses": [{"id": "t1", "name": "track",
                                                    "response": {"city": "Oslo"}}]},
            "creationTimestamp": 3.5,
        }],
        "sessionInput": {"appName": "post", "userId": "u-3", "state": {"lang": "en"}},
        "creationTimestamp": 2.0,
        "finalSessionState": {"done": True},
    }
    loaded = EvalSet.load(write(tmp_path, adk_set(camel)))
    case = loaded.eval_cases[0]
    assert case.eval_id == "camel-1" and case.input == "Track parcel 9"
    assert case.expected_output == "Parcel 9 is in Oslo."
    assert case.expected_tool_trajectory == [
        ToolCall(name="track", args={"parcel": 9}, call_id="t1", result={"city": "Oslo"})]
    assert (case.session_input.app_name, case.session_input.user_id) == ("post", "u-3")
    assert case.metadata["adk"] == {"creation_timestamp": 2.0, "final_session_state": {"done": True}}
    out = tmp_path / "again.evalset.json"
    loaded.save(out, format="adk")
    assert EvalSet.load(out) == loaded


def test_edited_expectations_are_written_from_referee_fields(tmp_path):
    loaded = EvalSet.load(write(tmp_path, adk_set(TOOL_USES_CASE)))
    turn = loaded.eval_cases[0].conversation[0]
    turn.expected_final_response = "Refunded."
    turn.expected_tool_trajectory = [ToolCall(name="refund", args={"order": "1001"})]
    written = loaded.to_adk()["eval_cases"][0]["conversation"][0]
    assert written["final_response"] == model("Refunded.")
    assert written["intermediate_data"]["tool_uses"] == [
        {"id": None, "args": {"order": "1001"}, "name": "refund"}]
    assert written["creation_timestamp"] == 1735689600.5  # untouched ADK-only fields stay


def test_a_referee_set_written_as_adk_reads_back_equal(tmp_path):
    from referee import EvalCase, Invocation
    original = EvalSet(eval_set_id="own", name="Own", eval_cases=[
        EvalCase(input="Where is order 7?", expected_output="Shipped.", eval_id="a",
                 expected_tool_trajectory=[ToolCall(name="lookup", args={"id": 7})],
                 expected_node_order=["router"], tags=["smoke"], context="Orders ship in 2 days",
                 metadata={"owner": "ops"}, name="order seven"),
        EvalCase.multi_turn([Invocation(user_content="hi"),
                             Invocation(user_content="bye", expected_final_response="ciao")],
                            eval_id="b"),
    ])
    path = tmp_path / "own.evalset.json"
    original.save(path, format="adk")
    document = json.loads(path.read_text())
    assert document["eval_cases"][0]["conversation"][0]["user_content"] == user("Where is order 7?")
    assert EvalSet.load(path) == original


def test_an_adk_case_with_both_conversation_and_scenario_is_refused(tmp_path):
    both = dict(TOOL_USES_CASE, conversation_scenario=SCENARIO_CASE["conversation_scenario"])
    with pytest.raises(InputError, match="conversation or a conversation_scenario, not both"):
        EvalSet.load(write(tmp_path, adk_set(both)))


def test_adk_cases_run_and_score_their_tool_trajectory(tmp_path):
    loaded = EvalSet.load(write(tmp_path, adk_set(TOOL_USES_CASE, EVENTS_CASE)))
    config = EvalConfig(criteria=CriteriaConfig(
        trajectory=CriterionConfig.trajectory(threshold=1.0, match_type=MatchType.EXACT,
                                              check_args=True),
        rouge_match=CriterionConfig(threshold=0.9)))

    def agent(message: str) -> ExecutionResult:
        if "Refund" in message:
            return ExecutionResult(actual_response="Order 1001 is refunded.", tool_calls=[
                ToolCall(name="lookup_order", args={"order": "1001"}),
                ToolCall(name="refund", args={"order": "1001", "amount": 20})])
        return ExecutionResult(actual_response="Sunny, 21 C.",
                               tool_calls=[ToolCall(name="get_weather", args={"city": "Rome"})])

    report = AgentEvaluator(agent, config=config, save=False).evaluate_sync(loaded)
    statuses = {c.eval_id: c.status for c in report.cases}
    assert statuses == {"refund-1": CaseStatus.PASSED, "weather-events": CaseStatus.FAILED}


def test_files_written_by_10xgraph_to_file_load(tmp_path):
    # The shape 10xgraph's EvalSet.to_file writes (model_dump of its EvalSet).
    document = {
        "eval_set_id": "tests", "name": "Weather", "description": "", "metadata": {"team": "qa"},
        "eval_cases": [{
            "eval_id": "test_001", "name": "Weather Query", "description": "asks for weather",
            "conversation": [{
                "invocation_id": "8d0c6f7e-2c1f-4a3b-9d55-0b8f1b9d7a10",
                "user_content": {"role": "user", "content": "Weather in NYC?", "metadata": {}},
                "expected_tool_trajectory": [{"name": "get_weather", "args": {"city": "NYC"},
                                              "call_id": None, "result": None}],
                "expected_node_order": ["router", "weather"],
                "expected_intermediate_responses": [],
                "expected_final_response": {"role": "assistant", "content": "Sunny in NYC.",
                                            "metadata": {}},
            }],
            "session_input": {"app_name": "", "user_id": "test_user", "state": {}, "config": {}},
            "tags": ["weather"], "metadata": {},
        }],
    }
    loaded = EvalSet.load(write(tmp_path, document, "tenx.json"))
    case = loaded.get_case("test_001")
    assert case.input == "Weather in NYC?" and case.expected_output == "Sunny in NYC."
    assert case.conversation[0].user_content.get_text() == "Weather in NYC?"
    assert case.expected_tool_trajectory == [ToolCall(name="get_weather", args={"city": "NYC"})]
    assert case.expected_node_order == ["router", "weather"]
    assert case.description == "asks for weather" and case.session_input.user_id == "test_user"
    assert loaded.metadata == {"team": "qa"}


def test_invocation_event_authors_are_the_expected_node_order(tmp_path):
    routed = json.loads(json.dumps(EVENTS_CASE))
    events = routed["conversation"][0]["intermediate_data"]["invocation_events"]
    events.insert(0, {"author": "root_agent", "content": {"parts": [{"function_call": {
        "id": "t0", "name": "transfer_to_agent", "args": {"agent_name": "weather_agent"}}}]}})
    loaded = EvalSet.load(write(tmp_path, adk_set(routed)))

    (turn,) = loaded.eval_cases[0].conversation
    assert turn.expected_node_order == ["root_agent", "weather_agent"]
    out = tmp_path / "again.evalset.json"
    loaded.save(out, format="adk")
    # Read from the events, so nothing extra is written back.
    assert json.loads(out.read_text(encoding="utf-8")) == adk_set(routed)


def test_adk_legacy_named_lists_load_as_adk_converts_them(tmp_path):
    legacy = [{
        "name": "roll_twice",
        "data": [
            {"query": "What can you do?", "expected_tool_use": [],
             "expected_intermediate_agent_responses": [], "reference": "I roll dice."},
            {"query": "Roll a 17 sided die twice",
             "expected_tool_use": [{"tool_name": "roll_die", "tool_input": {"sides": 17}},
                                   {"tool_name": "roll_die", "tool_input": {"sides": 17}}],
             "reference": "13 and 4."},
        ],
        "initial_session": {"state": {}, "app_name": "hello_world", "user_id": "user"},
    }]
    path = tmp_path / "dice.test.json"
    path.write_text(json.dumps(legacy), encoding="utf-8")

    (case,) = EvalSet.load(path).eval_cases

    assert case.eval_id == "roll_twice"
    assert [t.user_text for t in case.conversation] == ["What can you do?",
                                                        "Roll a 17 sided die twice"]
    assert [t.expected_final_response for t in case.conversation] == ["I roll dice.",
                                                                      "13 and 4."]
    assert case.conversation[1].expected_tool_trajectory == [
        ToolCall(name="roll_die", args={"sides": 17})] * 2
    assert case.session_input.app_name == "hello_world"
    legacy[0]["data"][1]["expected_tool_use"] = [{"tool": "roll_die"}]
    path.write_text(json.dumps(legacy), encoding="utf-8")
    with pytest.raises(InputError, match=r"\[0\]\.data\[1\]\.expected_tool_use"):
        EvalSet.load(path)


async def test_a_scenario_case_runs_through_the_user_simulator(tmp_path, monkeypatch):
    from referee.config import UserSimulatorConfig
    from referee.testing import ScriptedJudgeServer

    def simulated_user(request) -> str:  # the simulator's model: one follow-up, then done
        return "[CONVERSATION COMPLETE]" if "Booked" in request.prompt else "Tuesday, please."

    said: list[str] = []

    def agent(message: str) -> str:
        said.append(message)
        return "Booked SFO to LAX on Tuesday." if "Tuesday" in message else "Which day?"

    loaded = EvalSet.load(write(tmp_path, adk_set(SCENARIO_CASE)))
    with ScriptedJudgeServer(simulated_user) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url())
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("REFEREE_CACHE", "0")
        config = EvalConfig(criteria=CriteriaConfig(), user_simulator_config=UserSimulatorConfig(
            model="gpt-4o-mini", api_style="chat", max_turns=4))
        report = await AgentEvaluator(agent, config=config, save=False).evaluate(
            loaded, verbose=False)

    # The starting prompt, then what the simulated user said: no turn made up beforehand.
    assert said == ["I need to book a flight.", "Tuesday, please."]
    (case,) = report.cases
    assert [t.user_content for t in case.execution.turns] == said
    assert "Booked SFO to LAX" in case.execution.actual_response
