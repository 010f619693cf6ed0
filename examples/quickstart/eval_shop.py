"""Quickstart: evaluate the shop agent on ten cases with deterministic criteria.

    referee run examples/quickstart/eval_shop.py

`referee run` picks up the module-level `suite` (what to check) and `model` (what to run).
"""

from __future__ import annotations

from shop_agent import shop_agent

from referee import (
    CriterionConfig,
    EvalCase,
    EvalSuite,
    MatchType,
    SyncCriterion,
    ToolCall,
    ToolNameMatchCriterion,
    TrajectoryMatchCriterion,
)
from referee.evaluators.deterministic import NotEmpty


class MentionsExpected(SyncCriterion):
    """A criterion of your own: the answer must mention the case's expected_output."""

    name = "mentions_expected"

    def evaluate_sync(self, actual, expected):
        if not expected.expected_output:
            return self._skipped("the case has no expected_output")
        found = expected.expected_output.lower() in actual.actual_response.lower()
        return self._result(1.0 if found else 0.0, {
            "reason": f"{expected.expected_output!r} {'found' if found else 'missing'} in the answer"})


def case(name: str, text: str, expected: str, *calls: ToolCall) -> EvalCase:
    return EvalCase.single_turn(text, expected, expected_tool_trajectory=list(calls), name=name)


order = lambda order_id: ToolCall(name="lookup_order", args={"order_id": order_id})  # noqa: E731
search = lambda query: ToolCall(name="search_products", args={"query": query})  # noqa: E731
convert = lambda usd, currency: ToolCall(  # noqa: E731
    name="convert_price", args={"amount_usd": usd, "currency": currency})
policy = ToolCall(name="get_return_policy")

suite = EvalSuite("shop-agent quickstart", model_id="shop_agent (rules, offline)")
suite.add_cases([
    case("order shipped", "Where is my order 1001?", "shipped", order("1001")),
    case("order processing", "What's the status of order #1002?", "processing", order("1002")),
    case("unknown order", "Where is order 9999?", "couldn't find", order("9999")),
    case("product search", "Do you sell headphones?", "Aurora headphones", search("headphones")),
    case("price in EUR", "How much is the keyboard in EUR?", "EUR", search("keyboard"),
         convert(89.0, "EUR")),
    case("price in GBP", "Price of the mouse in GBP please", "30.81 GBP", search("mouse"),
         convert(39.0, "GBP")),
    case("return policy", "What is your return policy?", "30 days", policy),
    case("return allowed", "Can I return order 1001?", "Yes", order("1001"), policy),
    case("return too late", "I'd like to return order 1003", "window has closed", order("1003"),
         policy),
    case("greeting", "hello there", "I can help"),
])
suite.add_evaluators(
    NotEmpty(),
    MentionsExpected(),
    # check_args=True: arguments must match exactly; an expected call with args={} accepts any.
    TrajectoryMatchCriterion(config=CriterionConfig.trajectory(
        threshold=1.0, match_type=MatchType.EXACT, check_args=True)),
    ToolNameMatchCriterion(),
)

model = shop_agent
