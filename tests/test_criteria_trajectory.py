"""Trajectory, node-order and tool-name criteria, and the match modes they share (document 000)."""

from operator import eq

import pytest

from referee import (
    CriterionConfig,
    EvalCase,
    ExecutionResult,
    Invocation,
    MatchType,
    NodeOrderMatchCriterion,
    ToolCall,
    ToolNameMatchCriterion,
    TrajectoryMatchCriterion,
)
from referee.criteria.matching import (
    args_equal,
    match_any_order,
    match_exact,
    match_in_order,
    tool_call_matches,
)


def calls(*names: str) -> list[ToolCall]:
    return [ToolCall(name=n) for n in names]


def case_expecting(trajectory=(), nodes=()) -> EvalCase:
    return EvalCase.single_turn("q", expected_tool_trajectory=list(trajectory),
                                expected_node_order=list(nodes))


def trajectory(match_type=MatchType.EXACT, check_args=False, threshold=1.0):
    return TrajectoryMatchCriterion(config=CriterionConfig.trajectory(
        threshold=threshold, match_type=match_type, check_args=check_args))


# match modes --------------------------------------------------------------------------------


def test_exact_counts_positions_over_the_longer_sequence():
    assert match_exact(list("abc"), list("abc"), eq).score == 1.0
    assert match_exact(list("axc"), list("abc"), eq).score == pytest.approx(2 / 3)
    assert match_exact(list("ab"), list("abc"), eq).score == pytest.approx(2 / 3)
    outcome = match_exact(list("abcd"), list("abc"), eq)
    assert outcome.score == pytest.approx(3 / 4)
    assert outcome.unmatched_actual == [3]
    assert match_exact([], [], eq).score == 1.0
    assert match_exact(list("a"), [], eq).score == 0.0


def test_in_order_finds_longest_ordered_pairing_not_greedy_prefix():
    assert match_in_order(list("xaybzc"), list("abc"), eq).score == 1.0
    outcome = match_in_order(list("ac"), list("abc"), eq)
    assert outcome.score == pytest.approx(2 / 3)
    assert outcome.missing == [1]
    assert match_in_order(list("cba"), list("abc"), eq).score == pytest.approx(1 / 3)
    assert match_in_order(list("abc"), [], eq).score == 1.0


def test_any_order_is_one_to_one():
    assert match_any_order(list("cab"), list("abc"), eq).score == 1.0
    assert match_any_order(list("a"), list("aa"), eq).score == 0.5
    assert match_any_order(list("xyz"), [], eq).score == 1.0


def test_any_order_pairs_wildcards_optimally():
    expected = [ToolCall(name="search"), ToolCall(name="search", args={"q": "x"})]
    actual = [ToolCall(name="search", args={"q": "x"}), ToolCall(name="search", args={"q": "y"})]
    outcome = match_any_order(actual, expected, lambda a, e: tool_call_matches(a, e, True))
    assert outcome.score == 1.0  # first-fit would give the wildcard the only {"q": "x"} call


def test_args_equal_handles_nesting_and_json_types():
    assert args_equal({"a": [1, {"b": (2, 3)}]}, {"a": [1, {"b": [2, 3]}]})
    assert args_equal({"n": 1}, {"n": 1.0})
    assert not args_equal({"flag": True}, {"flag": 1})
    assert not args_equal({"a": [1, 2]}, {"a": [2, 1]})
    assert not args_equal({"a": {"b": 1}}, {"a": {"b": 1, "c": 2}})
    assert not args_equal({"a": "1"}, {"a": 1})
    assert args_equal({"a": None}, {"a": None})


# TrajectoryMatchCriterion -------------------------------------------------------------------


async def test_trajectory_defaults_and_name():
    criterion = TrajectoryMatchCriterion()
    assert criterion.name == "tool_trajectory_avg_score"
    assert criterion.config.match_type is MatchType.EXACT
    assert criterion.config.check_args is False
    assert criterion.threshold == 0.8


async def test_exact_full_match_passes():
    result = await trajectory().evaluate(
        ExecutionResult(tool_calls=calls("search", "book")), case_expecting(calls("search", "book")))
    assert result.score == 1.0 and result.passed
    assert result.details["match_type"] == "exact"
    assert result.details["expected_trajectory"][0]["name"] == "search"


async def test_exact_rejects_extra_calls():
    result = await trajectory().evaluate(
        ExecutionResult(tool_calls=calls("search", "book", "email")),
        case_expecting(calls("search", "book")))
    assert result.score == pytest.approx(2 / 3) and not result.passed
    assert result.details["unmatched_actual"] == ["email"]
    assert "extra" in result.reason


async def test_exact_partial_match_is_fraction_of_expected():
    result = await trajectory().evaluate(
        ExecutionResult(tool_calls=calls("search", "cancel", "email", "log")),
        case_expecting(calls("search", "book", "email", "log")))
    assert result.score == 0.75
    assert result.details["missing"] == ["book"]


async def test_exact_with_nothing_expected_requires_no_calls():
    assert (await trajectory().evaluate(ExecutionResult(), case_expecting())).score == 1.0
    result = await trajectory().evaluate(ExecutionResult(tool_calls=calls("x")), case_expecting())
    assert result.score == 0.0 and not result.passed


@pytest.mark.parametrize("mode", [MatchType.IN_ORDER, MatchType.ANY_ORDER])
async def test_in_order_and_any_order_with_nothing_expected_score_one(mode):
    result = await trajectory(mode).evaluate(
        ExecutionResult(tool_calls=calls("x", "y")), case_expecting())
    assert result.score == 1.0 and result.passed


async def test_in_order_allows_extras_but_not_reordering():
    expected = case_expecting(calls("search", "book"))
    extras = ExecutionResult(tool_calls=calls("auth", "search", "log", "book"))
    assert (await trajectory(MatchType.IN_ORDER).evaluate(extras, expected)).score == 1.0
    swapped = ExecutionResult(tool_calls=calls("book", "search"))
    assert (await trajectory(MatchType.IN_ORDER).evaluate(swapped, expected)).score == 0.5


async def test_any_order_ignores_order():
    expected = case_expecting(calls("search", "book"))
    swapped = ExecutionResult(tool_calls=calls("book", "x", "search"))
    assert (await trajectory(MatchType.ANY_ORDER).evaluate(swapped, expected)).score == 1.0


async def test_check_args_requires_equal_args():
    expected = case_expecting([ToolCall(name="search", args={"q": "paris"})])
    wrong = ExecutionResult(tool_calls=[ToolCall(name="search", args={"q": "london"})])
    assert (await trajectory(check_args=False).evaluate(wrong, expected)).score == 1.0
    result = await trajectory(check_args=True).evaluate(wrong, expected)
    assert result.score == 0.0
    assert result.details["check_args"] is True


async def test_check_args_with_empty_expected_args_accepts_any_args():
    expected = case_expecting([ToolCall(name="search"), ToolCall(name="book", args={"id": 7})])
    actual = ExecutionResult(tool_calls=[
        ToolCall(name="search", args={"q": "anything", "page": 2}),
        ToolCall(name="book", args={"id": 7}),
    ])
    assert (await trajectory(check_args=True).evaluate(actual, expected)).score == 1.0


async def test_arguments_the_recording_left_out_are_accepted_only_by_any_arguments():
    actual = ExecutionResult(tool_calls=[ToolCall(name="search", args=None),
                                         ToolCall(name="book", args={"id": 7})])
    any_search = case_expecting([ToolCall(name="search"), ToolCall(name="book", args={"id": 7})])
    result = await trajectory(check_args=True).evaluate(actual, any_search)
    assert (result.score, result.passed, result.skipped) == (1.0, True, False)

    # Specific arguments against unrecorded ones cannot be checked: skipped, never failed.
    paris = case_expecting([ToolCall(name="search", args={"q": "paris"}),
                            ToolCall(name="book", args={"id": 7})])
    result = await trajectory(check_args=True).evaluate(actual, paris)
    assert result.skipped and result.details["unrecorded"] == ["tool_args"]
    assert "the expected calls of search name arguments" in result.details["reason"]
    # Without check_args, or where no call of that tool lacks its arguments, it is scored.
    assert (await trajectory(check_args=False).evaluate(actual, paris)).score == 1.0
    wrong_book = case_expecting([ToolCall(name="search"), ToolCall(name="book", args={"id": 8})])
    result = await trajectory(check_args=True).evaluate(actual, wrong_book)
    assert (result.skipped, result.score) == (False, 0.5)


async def test_a_run_stored_with_unrecorded_arguments_as_empty_ones_still_says_so():
    stored = ExecutionResult(tool_calls=[ToolCall(name="search", args={})], metadata={
        "unrecorded": {"tool_args": "trace t: some tool arguments are not recorded"}})
    paris = case_expecting([ToolCall(name="search", args={"q": "paris"})])
    result = await trajectory(check_args=True).evaluate(stored, paris)
    assert result.skipped
    assert result.details["reason"].startswith(
        "not scored: trace t: some tool arguments are not recorded")
    assert (await trajectory(check_args=True).evaluate(
        stored, case_expecting([ToolCall(name="search")]))).passed


async def test_check_args_compares_nested_args():
    nested = {"filters": [{"field": "city", "in": ["Paris", "Lyon"]}], "opts": {"limit": 5}}
    expected = case_expecting([ToolCall(name="search", arguments=nested)])
    same = ExecutionResult(tool_calls=[ToolCall(name="search", args={
        "opts": {"limit": 5}, "filters": [{"in": ["Paris", "Lyon"], "field": "city"}]})])
    assert (await trajectory(check_args=True).evaluate(same, expected)).score == 1.0
    changed = ExecutionResult(tool_calls=[ToolCall(name="search", args={
        "opts": {"limit": 5}, "filters": [{"field": "city", "in": ["Lyon", "Paris"]}]})])
    assert (await trajectory(check_args=True).evaluate(changed, expected)).score == 0.0


async def test_expected_trajectory_concatenates_turns():
    case = EvalCase.multi_turn([
        Invocation(user_content="a", expected_tool_trajectory=calls("search")),
        Invocation(user_content="b", expected_tool_trajectory=calls("book")),
    ])
    actual = ExecutionResult(tool_calls=calls("search", "book"))
    assert (await trajectory().evaluate(actual, case)).score == 1.0


async def test_trajectory_score_compares_to_threshold():
    criterion = trajectory(MatchType.ANY_ORDER, threshold=0.5)
    result = await criterion.evaluate(ExecutionResult(tool_calls=calls("a")),
                                      case_expecting(calls("a", "b")))
    assert result.score == 0.5 and result.passed and result.threshold == 0.5


# NodeOrderMatchCriterion --------------------------------------------------------------------


def node_order(mode=MatchType.EXACT):
    return NodeOrderMatchCriterion(config=CriterionConfig.node_order(threshold=1.0, match_type=mode))


async def test_node_order_modes():
    case = case_expecting(nodes=["router", "search", "answer"])
    visits = ExecutionResult(node_visits=["router", "guard", "search", "answer"])
    exact = await node_order().evaluate(visits, case)
    assert exact.criterion == "node_order_score"
    assert exact.score == 0.25 and not exact.passed  # positions 0 match; extras count against
    assert (await node_order(MatchType.IN_ORDER).evaluate(visits, case)).score == 1.0
    shuffled = ExecutionResult(node_visits=["answer", "search", "router"])
    assert (await node_order(MatchType.IN_ORDER).evaluate(shuffled, case)).score == pytest.approx(1 / 3)
    assert (await node_order(MatchType.ANY_ORDER).evaluate(shuffled, case)).score == 1.0


async def test_node_order_exact_match_and_details():
    case = case_expecting(nodes=["a", "b"])
    result = await node_order().evaluate(ExecutionResult(node_visits=["a", "b"]), case)
    assert result.score == 1.0
    assert result.details["expected_node_order"] == ["a", "b"]
    assert result.details["actual_node_order"] == ["a", "b"]
    assert result.details["match_type"] == "exact"


async def test_node_order_without_expectation_follows_the_documented_mode_rule():
    # "Same three match modes": with nothing expected EXACT scores 1.0 only if nothing was
    # visited; IN_ORDER and ANY_ORDER score 1.0 unconditionally. check_args is not used.
    visited = ExecutionResult(node_visits=["a"])
    exact = NodeOrderMatchCriterion(config=CriterionConfig(check_args=True))
    result = await exact.evaluate(visited, case_expecting())
    assert result.score == 0.0 and not result.passed
    assert result.details["note"] == "No expected node order defined"
    assert (await exact.evaluate(ExecutionResult(), case_expecting())).score == 1.0
    for mode in (MatchType.IN_ORDER, MatchType.ANY_ORDER):
        lenient = NodeOrderMatchCriterion(config=CriterionConfig(match_type=mode))
        assert (await lenient.evaluate(visited, case_expecting())).score == 1.0


# ToolNameMatchCriterion ---------------------------------------------------------------------


async def test_tool_name_is_a_multiset_comparison():
    case = case_expecting([ToolCall(name="search", args={"q": 1}), ToolCall(name="search"),
                           ToolCall(name="book")])
    actual = ExecutionResult(tool_calls=[ToolCall(name="book", args={"x": 9}),
                                         ToolCall(name="search"), ToolCall(name="email")])
    result = await ToolNameMatchCriterion().evaluate(actual, case)
    assert result.criterion == "tool_name_match_score"
    assert result.score == pytest.approx(2 / 3)
    assert result.details["missing"] == ["search"]
    assert result.details["extra"] == ["email"]
    assert result.details["expected_names"] == ["search", "search", "book"]


async def test_tool_name_ignores_order_and_args():
    case = case_expecting([ToolCall(name="a", args={"x": 1}), ToolCall(name="b")])
    actual = ExecutionResult(tool_calls=[ToolCall(name="b"), ToolCall(name="a", args={"x": 2})])
    assert (await ToolNameMatchCriterion().evaluate(actual, case)).score == 1.0


async def test_tool_name_with_nothing_expected():
    none_called = await ToolNameMatchCriterion().evaluate(ExecutionResult(), case_expecting())
    assert none_called.score == 1.0
    some_called = await ToolNameMatchCriterion().evaluate(
        ExecutionResult(tool_calls=calls("x")), case_expecting())
    assert some_called.score == 0.5 and not some_called.passed


# Agents used as tools: their calls are nested under the call that ran them -------------------

def orchestrated_run() -> ExecutionResult:
    """An orchestrator that asked a researcher agent (as a tool), which searched twice, the
    second time through a fact-checker agent of its own; then the orchestrator wrote."""
    checker = ToolCall(name="ask_checker", args={"claim": "42"}, nested_node_visits=["checker"],
                       nested_calls=[ToolCall(name="verify", args={"claim": "42"})])
    research = ToolCall(name="ask_researcher", args={"input": "42?"},
                        nested_node_visits=["researcher"],
                        nested_calls=[ToolCall(name="search", args={"q": "42"}), checker])
    return ExecutionResult(actual_response="42", node_visits=["orchestrator"],
                           tool_calls=[research, ToolCall(name="write", args={})])


async def test_a_call_to_an_agent_used_as_a_tool_counts_once_by_default():
    run = orchestrated_run()
    as_recorded = case_expecting([ToolCall(name="ask_researcher"), ToolCall(name="write")])

    result = await trajectory().evaluate(run, as_recorded)
    names = await ToolNameMatchCriterion().evaluate(run, as_recorded)

    assert (result.score, result.passed) == (1.0, True)
    assert "include_nested" not in result.details
    assert (names.score, names.details["actual_names"]) == (1.0, ["ask_researcher", "write"])


async def test_include_nested_reads_the_inner_calls_right_after_their_agent_call():
    run = orchestrated_run()
    everything = case_expecting([ToolCall(name=n) for n in (
        "ask_researcher", "search", "ask_checker", "verify", "write")])
    nested = TrajectoryMatchCriterion(config=CriterionConfig.trajectory(include_nested=True))

    result = await nested.evaluate(run, everything)
    flat_names = await ToolNameMatchCriterion(config=CriterionConfig.tool_name_match(
        include_nested=True)).evaluate(run, everything)
    outer_only = await trajectory().evaluate(run, everything)

    assert (result.score, result.passed, result.details["include_nested"]) == (1.0, True, True)
    assert [c["name"] for c in result.details["actual_trajectory"]] == [
        "ask_researcher", "search", "ask_checker", "verify", "write"]
    assert flat_names.score == 1.0
    assert outer_only.passed is False  # EXACT: three of the expected calls were never made


def test_nested_calls_round_trip_and_stay_out_of_plain_dumps():
    run = orchestrated_run()

    stored = run.model_dump(mode="json")
    plain = ToolCall(name="write").model_dump()

    assert ExecutionResult.model_validate(stored) == run
    assert stored["tool_calls"][0]["nested_calls"][1]["nested_node_visits"] == ["checker"]
    assert plain == {"name": "write", "args": {}, "result": None, "call_id": None}
    assert ExecutionResult.model_validate({"tool_calls": [plain]}).tool_calls[0].nested_calls == []
