"""Judge panels: several scripted judges (one per model name) through the official SDKs."""

from __future__ import annotations

import html
import json
import pickle
import re

import pytest
from test_report_samples import chromium_dom

from referee import (
    AgentEvaluator,
    Coherence,
    CriterionConfig,
    EvalCase,
    EvalSuite,
    ExecutionResult,
    GEval,
    Invocation,
    JudgeConfig,
    JudgePanel,
    JudgeUnavailable,
    configure,
)
from referee.config import CriteriaConfig, EvalConfig
from referee.criteria.llm import ResponseMatchCriterion, SimulationGoalsCriterion
from referee.report.agreement import fleiss_kappa
from referee.report.console import render_text
from referee.report.html import render_html
from referee.testing.script import Fault
from referee.testing.server import ScriptedJudgeServer

pytestmark = pytest.mark.usefixtures("isolated_judge")

CASE = EvalCase(input="Explain photosynthesis in one paragraph.")
OUTPUT = ExecutionResult(actual_response="Plants turn light, water and CO2 into sugar.")

# Coherence asks four questions; the good answers are Yes, No, No, Yes.
COHERENCE_GOOD = {"logical order": "Yes", "contradict itself": "No", "abrupt jumps": "No",
                  "understandable": "Yes"}


def _question(prompt: str) -> str:
    return re.search(r"^Question: (.*)$", prompt, re.MULTILINE).group(1)


def script_judges(server: ScriptedJudgeServer, answers: dict[str, dict[str, str] | Fault]) -> None:
    """Per model name: the reply to each question fragment (unlisted: the good answer), or a
    fault for every request of that model (a member that is down)."""
    def responder(request):
        script = answers[request.model]
        if isinstance(script, Fault):
            return script
        question = _question(request.prompt)
        for fragment, good in COHERENCE_GOOD.items():
            if fragment in question:
                return script.get(fragment, good)
        raise AssertionError(f"unscripted question {question!r}")
    server.set_reply(responder)


@pytest.fixture
def server():
    with ScriptedJudgeServer(reply="Yes") as srv:
        yield srv


def members(server, *names: str) -> list[JudgeConfig]:
    return [server.judge_config(model=name) for name in names]


def verdicts(result) -> dict[str, tuple[str, dict[str, str | None], int]]:
    return {next(f for f in COHERENCE_GOOD if f in q["question"]):
            (q["verdict"], q["judges"], q["judges_answered"])
            for q in result.details["questions"]}


async def test_majority_per_question_outvotes_a_dissenting_judge(server):
    script_judges(server, {"judge-a": {}, "judge-b": {"abrupt jumps": "Yes"},
                           "judge-c": {"abrupt jumps": "Yes", "logical order": "No"}})
    result = await Coherence(judge=members(server, "judge-a", "judge-b", "judge-c")).evaluate(
        OUTPUT, CASE)

    by_question = verdicts(result)
    # Two of three say the output jumps abruptly: the panel's verdict is the majority's.
    assert by_question["abrupt jumps"] == (
        "yes", {"openai/judge-a": "no", "openai/judge-b": "yes", "openai/judge-c": "yes"}, 3)
    assert by_question["logical order"][0] == "yes"
    assert result.score == pytest.approx(3 / 4)
    assert server.request_count == 3 * 4
    panel = result.details["panel"]
    assert (panel["size"], panel["answered"], panel["quorum"]) == (3, 3, 2)
    assert [m["token_usage"]["requests"] for m in panel["members"]] == [4, 4, 4]
    assert result.token_usage.requests == 12
    assert result.details["judge_provider"] == "panel"


async def test_a_tie_is_unknown_and_leaves_the_denominator(server):
    script_judges(server, {"judge-a": {}, "judge-b": {"contradict itself": "Yes"}})
    panel = JudgePanel(members=members(server, "judge-a", "judge-b"), quorum=1)
    result = await Coherence(judge=panel).evaluate(OUTPUT, CASE)

    assert verdicts(result)["contradict itself"][0] == "unknown"
    assert result.details["unknown"] == 1
    assert result.score == 1.0  # the three agreed questions, all answered as expected


async def test_weighted_vote_breaks_the_tie_toward_the_heavier_judge(server):
    script_judges(server, {"judge-a": {}, "judge-b": {"contradict itself": "Yes"}})
    panel = JudgePanel(members=members(server, "judge-a", "judge-b"), aggregate="weighted",
                       weights=[1.0, 2.0], quorum=1)
    result = await Coherence(judge=panel).evaluate(OUTPUT, CASE)

    assert verdicts(result)["contradict itself"][0] == "yes"
    assert result.score == pytest.approx(3 / 4)


async def test_a_member_down_is_counted_not_dropped(server):
    script_judges(server, {"judge-a": {}, "judge-b": {}, "judge-down": Fault.http(400)})
    result = await Coherence(judge=members(server, "judge-a", "judge-b", "judge-down")).evaluate(
        OUTPUT, CASE)

    panel = result.details["panel"]
    assert (panel["size"], panel["answered"]) == (3, 2)
    down = panel["members"][2]
    assert down["judge"] == "openai/judge-down" and not down["answered"] and down["error"]
    assert all(q["judges_answered"] == 2 and q["judges"]["openai/judge-down"] is None
               for q in result.details["questions"])
    assert result.score == 1.0


async def test_below_the_quorum_is_a_judge_error(server):
    script_judges(server, {"judge-a": {}, "down-1": Fault.http(400), "down-2": Fault.http(400)})
    with pytest.raises(JudgeUnavailable, match=r"below its quorum — 1 of 3 .* 2 needed"
                       ) as caught:
        await Coherence(judge=members(server, "judge-a", "down-1", "down-2")).evaluate(
            OUTPUT, CASE)
    assert caught.value.details["panel"]["answered"] == 1
    assert caught.value.token_usage.requests >= 4  # the member that answered was paid for


async def test_a_configured_panel_scores_evaluators_without_their_own_judge(server):
    script_judges(server, {"judge-a": {}, "judge-b": {}, "judge-c": {"logical order": "No"}})
    configure(JudgePanel(members=members(server, "judge-a", "judge-b", "judge-c")))
    result = await Coherence().evaluate(OUTPUT, CASE)
    assert result.details["panel"]["size"] == 3 and result.score == 1.0
    configure(None)


async def test_a_panel_from_the_environment(server, monkeypatch):
    script_judges(server, {"judge-a": {}, "judge-b": {"logical order": "No"},
                           "judge-c": {"logical order": "No"}})
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url())
    monkeypatch.setenv("OPENAI_API_KEY", "referee-scripted-judge-key")
    monkeypatch.setenv("JUDGE_PANEL", "openai/judge-a, openai/judge-b,openai/judge-c")
    monkeypatch.setenv("JUDGE_PANEL_QUORUM", "3")
    result = await Coherence().evaluate(OUTPUT, CASE)
    assert verdicts(result)["logical order"][0] == "no" and result.score == 0.75
    assert (result.details["panel"]["size"], result.details["panel"]["quorum"]) == (3, 3)
    # configure() and judge= come before the environment, as for a single judge.
    configure(server.judge_config(model="judge-a"))
    assert "panel" not in (await Coherence().evaluate(OUTPUT, CASE)).details
    configure(None)
    monkeypatch.setenv("JUDGE_PANEL", "openai/judge-a,judge-b")
    with pytest.raises(ValueError, match="JUDGE_PANEL: 'judge-b' is not PROVIDER/MODEL"):
        await Coherence().evaluate(OUTPUT, CASE)


async def test_a_configured_panel_travels_in_the_binding_to_a_worker(server):
    """What a Ray worker receives: the criterion with its bound panel, pickled; the worker's
    own configure() (none here) does not choose its judge."""
    script_judges(server, {"judge-a": {}, "judge-b": {}, "judge-c": {}})
    configure(members(server, "judge-a", "judge-b", "judge-c"))
    coherence = Coherence()
    coherence.bind_looked_up_judge()
    coherence.ship_judge()
    shipped = pickle.loads(pickle.dumps(coherence))
    configure(None)
    result = await shipped.evaluate(OUTPUT, CASE)
    assert result.details["panel"]["size"] == 3
    assert Coherence().judge_panel() is None  # a criterion bound nothing else


def test_bad_panels_are_refused_with_the_field_named(server):
    with pytest.raises(TypeError, match="Coherence: .*list of JudgeConfig, got str"):
        Coherence(judge=[server.judge_config(), "openai/gpt-4o"])
    with pytest.raises(ValueError, match="weights"):
        JudgePanel(members=members(server, "a", "b"), aggregate="weighted")
    with pytest.raises(ValueError, match="quorum"):
        JudgePanel(members=members(server, "a", "b"), quorum=3)
    with pytest.raises(ValueError, match="members"):
        JudgePanel(members=members(server, "a"))


def scores_by_model(server, scores: dict[str, str | Fault]) -> None:
    def responder(request):
        value = scores[request.model]
        return value if isinstance(value, Fault) else f'{{"score": {value}, "reason": "r"}}'
    server.set_reply(responder)


@pytest.mark.parametrize("aggregate,weights,expected", [
    ("mean", None, (0.2 + 0.6 + 0.7) / 3),
    ("median", None, 0.6),
    ("majority", None, 0.6),
    ("weighted", [1.0, 1.0, 2.0], (0.2 + 0.6 + 1.4) / 4),
])
async def test_geval_panel_combines_member_scores(server, aggregate, weights, expected):
    scores_by_model(server, {"judge-a": "0.2", "judge-b": "0.6", "judge-c": "0.7"})
    panel = JudgePanel(members=members(server, "judge-a", "judge-b", "judge-c"),
                       aggregate=aggregate, weights=weights)
    result = await GEval(criteria="concise", runs=1, judge=panel).evaluate(OUTPUT, CASE)
    assert result.score == pytest.approx(expected)
    assert [m["score"] for m in result.details["panel"]["members"]] == [0.2, 0.6, 0.7]


async def test_geval_panel_below_quorum_is_a_judge_error(server):
    scores_by_model(server, {"judge-a": "0.9", "judge-b": "not a score", "down": Fault.http(400)})
    panel = JudgePanel(members=members(server, "judge-a", "judge-b", "down"))
    with pytest.raises(JudgeUnavailable, match="1 of 3 judge"):
        await GEval(criteria="concise", runs=1, judge=panel).evaluate(OUTPUT, CASE)


# Fleiss' kappa ------------------------------------------------------------------------------

def test_fleiss_kappa_matches_the_hand_computed_value():
    # Four subjects, three raters, (yes, no) counts. P_i: 1, 1/3, 1/3, 1 -> P_bar = 2/3.
    # p_yes = 6/12, p_no = 6/12 -> P_e = 1/2; kappa = (2/3 - 1/2) / (1 - 1/2) = 1/3.
    assert fleiss_kappa([[3, 0], [2, 1], [1, 2], [0, 3]]) == pytest.approx(1 / 3)
    # Every rating in one category: chance agreement is 1, kappa is undefined.
    assert fleiss_kappa([[3, 0], [3, 0]]) is None


def test_run_reports_judge_agreement_per_criterion(server, tmp_path, monkeypatch):
    """Two cases x four Coherence questions, three judges; judge-b dissents on one question of
    the first case, judge-c on "logical order" of both.

    Subjects (yes, no): case 1 (2,1) (0,3) (3,0) (1,2); case 2 (2,1) (0,3) (3,0) (0,3).
    P_i sum = 3 x 1/3 + 5 x 1 = 6 -> P_bar = 6/8; p_yes = 11/24, p_no = 13/24 -> P_e = 290/576;
    kappa = (432 - 290) / (576 - 290) = 142/286.
    """
    def responder(request):
        question = _question(request.prompt)
        fragment = next(f for f in COHERENCE_GOOD if f in question)
        first_case = "first question" in request.prompt
        if request.model == "judge-b" and first_case and fragment == "abrupt jumps":
            return "Yes"
        if request.model == "judge-c" and fragment == "logical order":
            return "No"
        return COHERENCE_GOOD[fragment]
    server.set_reply(responder)
    monkeypatch.chdir(tmp_path)
    suite = EvalSuite("panel-agreement").add_cases(
        [EvalCase(input="first question"), EvalCase(input="second question")])
    suite.add_evaluators(Coherence(judge=members(server, "judge-a", "judge-b", "judge-c")))
    report = suite.run(lambda prompt: f"An answer to the {prompt}.", verbose=False)

    agreement = report.summary.criterion_stats["coherence"].judge_agreement
    assert agreement.fleiss_kappa == pytest.approx(142 / 286)
    assert (agreement.subjects, agreement.judges, agreement.left_out) == (8, 3, 0)
    stored = json.loads((tmp_path / ".referee" / "runs" / report.run_id / "report.json")
                        .read_text())
    stored_agreement = stored["summary"]["criterion_stats"]["coherence"]["judge_agreement"]
    assert stored_agreement["fleiss_kappa"] == pytest.approx(142 / 286)
    text = render_text(report)
    assert "Judge agreement, coherence: Fleiss' kappa 0.50 over 8 item(s) by 3 judges" in text
    assert "judge: panel of 3 (majority, quorum 2): openai/judge-a at " in text
    meta = json.loads((tmp_path / ".referee" / "runs" / report.run_id / "meta.json").read_text())
    assert [m["model"] for m in meta["judge"]["members"]] == ["judge-a", "judge-b", "judge-c"]


def test_html_case_detail_shows_each_judges_vote_and_reply(server, tmp_path):
    script_judges(server, {"judge-a": {}, "judge-b": {"abrupt jumps": "Yes"},
                           "judge-down": Fault.http(400)})
    suite = EvalSuite("panel-html").add_cases([EvalCase(input="a question")])
    suite.add_evaluators(Coherence(judge=JudgePanel(
        members=members(server, "judge-a", "judge-b", "judge-down"), quorum=2)))
    report = suite.run(lambda prompt: "An answer.", verbose=False, save=False)
    page = tmp_path / "report.html"
    page.write_text(render_html(report), encoding="utf-8")
    dom = html.unescape(chromium_dom(page.as_uri(), tmp_path))

    assert ("openai/judge-a: no, openai/judge-b: yes, openai/judge-down: no answer "
            "(2 answered)") in dom
    assert "openai/judge-b: Yes" in dom  # the member's own reply, named
    assert '"answered": 2' in dom and '"judge": "openai/judge-down"' in dom


async def test_benchmark_panel_costs_members_times_requests():
    from benchmarks.panels import measure

    rows = await measure(3, 20)
    one = rows["one judge: Coherence (4 questions) + GEval (runs=2)"]
    panel = rows["panel of 3: Coherence (4 questions) + GEval (runs=2)"]
    assert (one["requests"], panel["requests"]) == (6.0, 18.0)
    assert panel["input_tokens"] == pytest.approx(3 * one["input_tokens"], rel=0.01)
    assert rows["panel of 3: Coherence, rerun from the reply cache"]["cached_requests"] == 12.0
    assert rows["panel of 3: Coherence, batch=True"]["requests"] == 3.0
    # batch="case": one request per case per member, for both evaluators.
    assert rows["panel of 3: Coherence + Relevance, batch='case'"]["requests"] == 3.0
    assert rows["panel of 3: Coherence + Relevance, batch=True"]["requests"] == 6.0
    # Pairwise: both orders for each member.
    assert (rows["one judge: pairwise A vs B, both orders"]["requests"],
            rows["panel of 3: pairwise A vs B, both orders"]["requests"]) == (2.0, 6.0)


async def test_a_member_whose_every_reply_is_unreadable_has_not_answered(server):
    script_judges(server, {"judge-a": {}, "judge-b": {f: "Maybe" for f in COHERENCE_GOOD},
                           "judge-c": {}})
    result = await Coherence(judge=members(server, "judge-a", "judge-b", "judge-c")).evaluate(
        OUTPUT, CASE)
    panel = result.details["panel"]
    assert panel["answered"] == 2 and not panel["members"][1]["answered"]
    assert "unparseable" in panel["members"][1]["error"]
    assert panel["members"][1]["token_usage"]["requests"] == 4  # paid for all the same
    assert result.score == 1.0


# The AgentEvaluator-style API: the same judge= spelling on its judged criteria -------------

def agent_case(eval_id: str, city: str = "Oslo") -> EvalCase:
    return EvalCase.multi_turn([Invocation(user_content=f"find flights to {city}",
                                           expected_final_response="SK1 or SK2")],
                               eval_id=eval_id)


async def test_agent_evaluator_criterion_judged_by_a_panel(server):
    """Each member sampled num_samples times; the panel's median of member means; one member
    down is counted; two down of three is a JUDGE_ERROR."""
    judged_scores = {"judge-a": 0.9, "judge-b": 0.5, "judge-c": 0.7}

    def responder(request):
        if request.model == "judge-c" and "Bergen" in request.prompt:
            return Fault.http(400)
        return json.dumps({"score": judged_scores[request.model], "reasoning": request.model})
    server.set_reply(responder)
    criterion = ResponseMatchCriterion(CriterionConfig(threshold=0.6, num_samples=2),
                                       judge=members(server, "judge-a", "judge-b", "judge-c"))

    def agent(message: str, history: list) -> ExecutionResult:
        return ExecutionResult(actual_response="SK1 or SK2")

    only_keywords = EvalConfig(criteria=CriteriaConfig(
        contains_keywords=CriterionConfig.contains_keywords(keywords=["SK1"])))
    evaluator = AgentEvaluator(agent, config=only_keywords, criteria=[criterion], save=False)
    report = await evaluator.evaluate([agent_case("case-all"), agent_case("case-down", "Bergen")])
    by_id = {c.eval_id: c.get_criterion_result("response_match_score") for c in report.cases}

    full = by_id["case-all"]
    assert full.score == pytest.approx(0.7) and full.passed
    assert [m["score"] for m in full.details["panel"]["members"]] == [0.9, 0.5, 0.7]
    assert full.token_usage.requests == 3 * 2
    assert all(m["token_usage"]["requests"] == 2 for m in full.details["panel"]["members"])
    part = by_id["case-down"]
    assert part.details["panel"]["answered"] == 2
    assert part.score == pytest.approx(0.7)  # median of the two that answered: (0.9 + 0.5) / 2
    assert report.summary.criterion_stats["response_match_score"].judge_agreement.subjects == 1
    recorded = report.judge  # the one judged criterion: its panel is the run's judge
    assert [m["model"] for m in recorded["members"]] == ["judge-a", "judge-b", "judge-c"]


async def test_agent_criterion_panel_below_quorum_is_a_judge_error(server):
    def responder(request):
        if request.model != "judge-a":
            return Fault.http(400)
        return json.dumps({"score": 0.9, "reasoning": "fine"})
    server.set_reply(responder)
    criterion = ResponseMatchCriterion(CriterionConfig(num_samples=1), judge=JudgePanel(
        members=members(server, "judge-a", "judge-b", "judge-c")))
    result = await criterion.evaluate(ExecutionResult(actual_response="SK1"),
                                      agent_case("any"))
    assert result.error_kind == "judge" and "below its quorum" in result.error
    assert result.details["panel"]["answered"] == 1 and result.token_usage.requests >= 1
    with pytest.raises(TypeError, match="does not take a judge panel"):
        SimulationGoalsCriterion(judge=members(server, "judge-a", "judge-b"))


async def test_a_member_whose_batched_reply_copies_the_placeholders_has_not_answered(server):
    """The batched-reply checks hold per member: a member that copies the reply's shape (or
    echoes the prompt) is counted as not answering, never as a vote."""
    good = '{"answers": {"1": "yes", "2": "no", "3": "no", "4": "yes"}}'
    copied = '{"answers": {"<question id>": "<yes or no>", ...}}'
    server.set_reply(lambda request: copied if request.model == "judge-copies" else good)
    result = await Coherence(judge=members(server, "judge-a", "judge-b", "judge-copies"),
                             batch=True).evaluate(OUTPUT, CASE)

    panel = result.details["panel"]
    assert (panel["size"], panel["answered"]) == (3, 2)
    copier = panel["members"][2]
    assert not copier["answered"] and "rejected" in copier["error"]
    assert all(q["judges"]["openai/judge-copies"] is None and q["judges_answered"] == 2
               for q in result.details["questions"])


async def test_each_member_keeps_the_score_its_own_verdicts_give(server):
    script_judges(server, {"judge-a": {}, "judge-b": {"abrupt jumps": "Yes"},
                           "judge-c": {"abrupt jumps": "Yes", "logical order": "No"}})
    result = await Coherence(judge=members(server, "judge-a", "judge-b", "judge-c")).evaluate(
        OUTPUT, CASE)

    # What each judge alone would have scored, from the answers it gave the panel.
    assert [m["score"] for m in result.details["panel"]["members"]] == [1.0, 0.75, 0.5]
    assert server.request_count == 3 * 4


async def test_a_members_own_score_takes_the_recovery_penalty_it_voted_for(server):
    from referee import ToolCall
    from referee.evaluators import TrajectoryEfficiency

    def responder(request):
        if "recover" in _question(request.prompt):  # judge-b says the agent did not recover
            return "No" if request.model == "judge-b" else "Yes"
        if "same tool called more than once" in request.prompt:
            return "No"
        return "Yes"
    server.set_reply(responder)
    run = ExecutionResult(actual_response="Booked.", tool_calls=[
        ToolCall(name="book", args={"flight": "SK1"}, result="error: sold out"),
        ToolCall(name="book", args={"flight": "SK2"}, result="ok")])
    result = await TrajectoryEfficiency(
        judge=members(server, "judge-a", "judge-b", "judge-c")).evaluate(run, CASE)

    assert result.score == 1.0  # two of three say it recovered: no penalty for the panel
    assert [m["score"] for m in result.details["panel"]["members"]] == pytest.approx(
        [1.0, 0.8, 1.0])


# judge_panel in an AgentEvaluator-style criteria file ---------------------------------------

def criteria_file(tmp_path, criteria: dict) -> str:
    path = tmp_path / "criteria.json"
    path.write_text(json.dumps({"criteria": criteria}), encoding="utf-8")
    return str(path)


async def test_a_criteria_file_names_a_judge_panel(server, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url("openai"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy")
    judged_scores = {"judge-a": 0.9, "judge-b": 0.5, "judge-c": 0.8}

    def responder(request):
        if request.model == "judge-down":
            return Fault.http(400)
        return json.dumps({"score": judged_scores[request.model], "reasoning": request.model})
    server.set_reply(responder)
    config = EvalConfig.from_file(criteria_file(tmp_path, {
        "response_match": {"threshold": 0.6, "num_samples": 1, "judge_panel": [
            "openai/judge-a", "openai/judge-b", "openai/judge-c"]},
        "llm_judge": {"threshold": 0.6, "num_samples": 2, "judge_panel": {
            "models": ["openai/judge-a", "openai/judge-b", "openai/judge-down"],
            "aggregate": "mean", "quorum": 2}}}))

    def agent(message: str, history: list) -> ExecutionResult:
        return ExecutionResult(actual_response="SK1 or SK2")

    report = await AgentEvaluator(agent, config=config, save=False).evaluate([agent_case("c1")])
    [case] = report.cases
    listed = case.get_criterion_result("response_match_score")
    assert listed.score == pytest.approx(0.8)  # the median of 0.9, 0.5, 0.8
    assert [m["model"] for m in listed.details["panel"]["members"]] == [
        "judge-a", "judge-b", "judge-c"]
    assert listed.details["panel"]["aggregate"] == "majority"
    mean = next(r for r in case.criterion_results if r.criterion != "response_match_score")
    assert mean.score == pytest.approx(0.7)  # the mean of the two that answered
    assert (mean.details["panel"]["answered"], mean.details["panel"]["quorum"]) == (2, 2)
    assert mean.details["panel"]["members"][2]["error"]
    # Each member sampled num_samples times: 3 x 1 and 2 x 2 answered (+ the member down).
    assert {m: sum(1 for r in server.requests if r.model == m)
            for m in ("judge-a", "judge-b", "judge-c")} == {"judge-a": 3, "judge-b": 3,
                                                            "judge-c": 1}


@pytest.mark.parametrize(("panel", "criterion", "message"), [
    (["gpt-4o-mini"], "response_match",
     "field 'criteria.response_match.judge_panel.models': List should have at least 2 items"),
    (["gpt-4o-mini", "llama3"], "safety",
     "field 'criteria.safety.judge_panel': models[1]: 'llama3' names no provider"),
    ({"models": ["gpt-4o-mini", "gpt-4o"], "quorum": 3}, "llm_judge",
     "field 'criteria.llm_judge.judge_panel': quorum must be between 1 and the number of "
     "members (2), got 3"),
    ({"models": ["gpt-4o-mini", "gpt-4o"], "aggregate": "weighted"}, "llm_judge",
     "aggregate='weighted' needs weights=[...], one per member"),
    ({"models": ["gpt-4o-mini", "gpt-4o"], "aggregate": "vote"}, "llm_judge",
     "field 'criteria.llm_judge.judge_panel.aggregate'"),
    (["gpt-4o-mini", "gpt-4o"], "trajectory",
     "trajectory.judge_panel: trajectory takes no judge panel"),
    (["gpt-4o-mini", "gpt-4o"], "simulation_goals",
     "simulation_goals.judge_panel: simulation_goals takes no judge panel"),
])
def test_a_bad_judge_panel_in_a_criteria_file_is_a_one_line_error(tmp_path, panel, criterion,
                                                                  message):
    from referee.errors import InputError

    path = criteria_file(tmp_path, {criterion: {"judge_panel": panel}})
    with pytest.raises(InputError) as caught:
        EvalConfig.from_file(path)
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert str(caught.value).startswith(path)


def batch_answers(prompt: str, overrides: dict[str, str]) -> str:
    """A batched reply: each numbered question answered (Coherence's good answer unless the
    judge's override says otherwise; any other question "yes")."""
    asked = re.findall(r"^(\d+)\. (.*)$", prompt.split("Questions:\n", 1)[1], re.MULTILINE)
    answers = {}
    for ident, question in asked:
        fragment = next((f for f in COHERENCE_GOOD if f in question), None)
        answers[ident] = (overrides.get(fragment, COHERENCE_GOOD[fragment]) if fragment
                          else "Yes").lower()
    return json.dumps({"answers": answers})


def test_case_batch_with_a_panel_asks_each_member_once_per_case(server):
    from referee import Relevance

    dissent = {"judge-a": {}, "judge-b": {"abrupt jumps": "Yes"},
               "judge-c": {"abrupt jumps": "Yes", "logical order": "No"}}
    server.set_reply(lambda request: batch_answers(request.prompt, dissent[request.model]))
    judges = members(server, "judge-a", "judge-b", "judge-c")
    suite = EvalSuite("panel-case-batch").add_case(CASE).add_evaluators(
        Coherence(judge=judges, batch="case"), Relevance(judge=judges, batch="case"))
    report = suite.run(lambda prompt: OUTPUT.actual_response, verbose=False, save=False)

    # One request per member for the case, holding both evaluators' questions.
    assert server.request_count == 3
    assert sorted(r.model for r in server.requests) == ["judge-a", "judge-b", "judge-c"]
    assert all(f"Answer all {4 + len(Relevance().questions(OUTPUT, CASE))} question(s)"
               in r.prompt
               for r in server.requests)
    [case] = report.cases
    coherence = case.get_criterion_result("coherence")
    relevance = case.get_criterion_result("relevance")
    assert coherence.details["mode"] == relevance.details["mode"] == "panel_case_batched"
    # The votes are as when each evaluator asks on its own: two of three outvote judge-a.
    assert verdicts(coherence)["abrupt jumps"][0] == "yes"
    assert coherence.score == pytest.approx(3 / 4)
    assert [m["score"] for m in coherence.details["panel"]["members"]] == [1.0, 0.75, 0.5]
    asked = Relevance().questions(OUTPUT, CASE)  # every member said "yes" to each of them
    assert relevance.score == pytest.approx(sum(q.expect_yes for q in asked) / len(asked))
    # Each member's request is counted once, on the first evaluator it served.
    assert case.token_usage.requests == 3
    assert [m["token_usage"]["requests"] for m in coherence.details["panel"]["members"]] == [
        1, 1, 1]
    assert [m["token_usage"]["requests"] for m in relevance.details["panel"]["members"]] == [
        0, 0, 0]


def test_each_members_spend_is_summed_over_the_run(server, tmp_path, monkeypatch):
    """Two cases; Coherence judged by judge-a and judge-b, GEval by judge-a, judge-c and a
    member that is down: each member's spend is summed across cases and criteria."""
    from referee.report.store import load_run

    def responder(request):
        if request.model == "judge-down":
            return Fault.http(400)
        if "Question: " in request.prompt:
            question = _question(request.prompt)
            return COHERENCE_GOOD[next(f for f in COHERENCE_GOOD if f in question)]
        return '{"score": 0.8, "reason": "concise enough"}'
    server.set_reply(responder)
    monkeypatch.chdir(tmp_path)
    suite = EvalSuite("panel-spend").add_cases(
        [EvalCase(input="first question"), EvalCase(input="second question")])
    suite.add_evaluators(
        Coherence(judge=members(server, "judge-a", "judge-b")),
        GEval(criteria="concise", runs=1,
              judge=members(server, "judge-a", "judge-c", "judge-down")))
    report = suite.run(lambda prompt: f"An answer to the {prompt}.", verbose=False)

    spent = report.summary.judge_member_token_usage
    # judge-a: 2 cases x (4 Coherence questions + 1 GEval run); judge-b: 2 x 4; judge-c: 2 x 1.
    assert {name: usage.requests for name, usage in spent.items()
            if name != "openai/judge-down"} == {"openai/judge-a": 10, "openai/judge-b": 8,
                                                "openai/judge-c": 2}
    assert "openai/judge-down" in spent
    assert sum(u.requests for u in spent.values()) == report.token_usage.requests
    assert sum(u.input_tokens for u in spent.values()) == report.token_usage.input_tokens
    assert all(u.input_tokens > 0 for name, u in spent.items() if name != "openai/judge-down")

    run_dir = tmp_path / ".referee" / "runs" / report.run_id
    stored = json.loads((run_dir / "report.json").read_text())
    assert stored["summary"]["judge_member_token_usage"]["openai/judge-b"]["requests"] == 8
    reloaded = load_run(run_dir).summary.judge_member_token_usage
    assert {k: u.requests for k, u in reloaded.items()} == {k: u.requests
                                                            for k, u in spent.items()}
    a = spent["openai/judge-a"]
    text = render_text(report)
    assert f"Judge spend by panel member: openai/judge-a: {a.describe()}; openai/judge-b: " \
        in " ".join(text.split())
    page = tmp_path / "report.html"
    page.write_text(render_html(report), encoding="utf-8")
    dom = html.unescape(chromium_dom(page.as_uri(), tmp_path))
    assert f"by panel member: openai/judge-a: {a.describe()}; openai/judge-b: " in dom


def _attempts_per_question(server: ScriptedJudgeServer, model: str) -> set[int]:
    """How many times each distinct prompt was sent to ``model``."""
    sent: dict[str, int] = {}
    for request in server.requests:
        if request.model == model:
            sent[request.prompt] = sent.get(request.prompt, 0) + 1
    return set(sent.values())


async def test_a_member_down_costs_its_own_max_retries_plus_one_attempts(server):
    """Not the default five: a panel member's own max_retries holds, as for a single judge."""
    script_judges(server, {"judge-a": {}, "judge-b": {}, "judge-down": Fault.http(503)})
    down = server.judge_config(model="judge-down", max_retries=1)
    result = await Coherence(judge=[*members(server, "judge-a", "judge-b"), down]).evaluate(
        OUTPUT, CASE)
    assert result.details["panel"]["answered"] == 2
    assert _attempts_per_question(server, "judge-down") == {2}


async def test_referee_judge_max_retries_sets_the_attempts_of_judges_that_leave_it_unset(
        server, monkeypatch):
    monkeypatch.setenv("REFEREE_JUDGE_MAX_RETRIES", "0")
    script_judges(server, {"judge-a": {}, "judge-b": {}, "judge-down": Fault.http(503)})
    result = await Coherence(judge=members(server, "judge-a", "judge-b", "judge-down")).evaluate(
        OUTPUT, CASE)
    assert result.details["panel"]["answered"] == 2
    assert _attempts_per_question(server, "judge-down") == {1}
    # An explicit max_retries still wins over the environment.
    assert JudgeConfig(max_retries=3).effective_max_retries == 3


@pytest.mark.parametrize(("value", "problem"), [("-1", "at least 0"), ("two", "not an integer")])
def test_a_bad_referee_judge_max_retries_is_one_clear_error(monkeypatch, value, problem):
    monkeypatch.setenv("REFEREE_JUDGE_MAX_RETRIES", value)
    with pytest.raises(ValueError, match=f"REFEREE_JUDGE_MAX_RETRIES.*{problem}"):
        JudgeConfig().effective_max_retries  # noqa: B018
