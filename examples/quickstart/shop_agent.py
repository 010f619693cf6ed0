"""A small, deterministic tool-using support agent for an online shop.

No model behind it: a keyword router picks tools and a template writes the answer, so the
quickstart runs offline, in milliseconds, with the same result every time. It returns an
ExecutionResult with the tool calls it made and the graph nodes it visited — the same shape a
real agent would hand to referee.
"""

from __future__ import annotations

import re

from referee import ExecutionResult, ToolCall

ORDERS = {
    "1001": {"status": "shipped", "delivered": False, "days_since_purchase": 3},
    "1002": {"status": "processing", "delivered": False, "days_since_purchase": 1},
    "1003": {"status": "delivered", "delivered": True, "days_since_purchase": 45},
}
CATALOG = {
    "headphones": {"name": "Aurora headphones", "price_usd": 199.0},
    "keyboard": {"name": "Nimbus keyboard", "price_usd": 89.0},
    "mouse": {"name": "Comet mouse", "price_usd": 39.0},
}
USD_RATES = {"EUR": 0.92, "GBP": 0.79, "JPY": 151.0}
RETURN_WINDOW_DAYS = 30


# Tools --------------------------------------------------------------------------------------

def lookup_order(order_id: str) -> dict | None:
    return ORDERS.get(order_id)


def search_products(query: str) -> dict | None:
    return CATALOG.get(query)


def convert_price(amount_usd: float, currency: str) -> float:
    return round(amount_usd * USD_RATES[currency], 2)


def get_return_policy() -> str:
    return f"Unused items can be returned within {RETURN_WINDOW_DAYS} days of purchase."


# The agent ----------------------------------------------------------------------------------

class _Trace:
    def __init__(self) -> None:
        self.calls: list[ToolCall] = []
        self.nodes: list[str] = ["router"]

    def call(self, name: str, fn, **args):
        result = fn(**args)
        self.calls.append(ToolCall(name=name, args=args, result=result))
        self.nodes.append(name)
        return result

    def answer(self, text: str) -> ExecutionResult:
        self.nodes.append("respond")
        return ExecutionResult(actual_response=text, tool_calls=self.calls, node_visits=self.nodes)


def shop_agent(message: str) -> ExecutionResult:
    """Answer one customer message."""
    trace = _Trace()
    text = message.lower()
    order = re.search(r"\border\s*#?(\d+)", text)
    product = next((p for p in CATALOG if p in text), None)
    currency = next((c for c in USD_RATES if c.lower() in text.split() or c in message), None)

    if order:
        order_id = order.group(1)
        info = trace.call("lookup_order", lookup_order, order_id=order_id)
        if info is None:
            return trace.answer(f"Sorry, I couldn't find order {order_id}. Please check the number.")
        if "return" in text:
            policy = trace.call("get_return_policy", get_return_policy)
            ok = info["days_since_purchase"] <= RETURN_WINDOW_DAYS
            verdict = "Yes, you can return it." if ok else "No, the return window has closed."
            return trace.answer(f"{verdict} {policy}")
        return trace.answer(f"Order {order_id} is {info['status']}.")

    if "return" in text:
        return trace.answer(trace.call("get_return_policy", get_return_policy))

    if product:
        item = trace.call("search_products", search_products, query=product)
        if currency:
            price = trace.call("convert_price", convert_price, amount_usd=item["price_usd"],
                               currency=currency)
            return trace.answer(f"The {item['name']} costs {price:.2f} {currency}.")
        return trace.answer(f"Yes, we sell the {item['name']} for ${item['price_usd']:.2f}.")

    return trace.answer("Hello! I can help with orders, products, prices and returns.")


def shop_agent_turn(user_message: str, history: list) -> ExecutionResult:
    """The same agent with AgentEvaluator's (message, history) signature; it needs no memory."""
    return shop_agent(user_message)
