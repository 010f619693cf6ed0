"""The benchmark workloads as plain data, identical for every system.

Cases are generated deterministically from their index, so every system sees byte-identical
inputs and every case has distinct text (a cache cannot collapse two cases into one).
Standard library only: the peer runners import this module from their own environment.
"""

from __future__ import annotations

from typing import Any

# W2's keyword check is configured once per suite because multivon-eval's Contains takes its
# substrings at construction; every agent response below contains both.
AGENT_KEYWORDS = ["order", "refund"]

# Each RAG case carries this many context chunks; the scripted replies rely on it only as a
# fallback when a prompt does not show how many verdicts it expects.
CONTEXT_CHUNKS = 3

_PRODUCTS = [
    "the Aurora desk lamp", "the Basalt water bottle", "the Cinder hiking boot",
    "the Delta travel mug", "the Ember space heater", "the Fjord rain jacket",
    "the Granite cutting board", "the Harbor backpack", "the Iris reading light",
    "the Juniper tea kettle", "the Kestrel bike helmet", "the Lumen smart bulb",
]
_CITIES = ["Lisbon", "Osaka", "Denver", "Tallinn", "Nairobi", "Quito", "Perth", "Bergen"]


def rag_case(index: int) -> dict[str, Any]:
    """One W1 case: question, three context chunks, the model's answer and the reference answer."""
    product = _PRODUCTS[index % len(_PRODUCTS)]
    city = _CITIES[(index // len(_PRODUCTS)) % len(_CITIES)]
    days = 14 + index % 30
    fee = 5 + index % 20
    warranty = 1 + index % 4
    question = f"Case {index}: what is the return window for {product} bought in {city}?"
    context = [
        f"Policy {index}-A: {product} sold in {city} may be returned within {days} days of delivery.",
        f"Policy {index}-B: a restocking fee of {fee} euros applies to opened items from {city}.",
        f"Policy {index}-C: {product} carries a {warranty}-year limited warranty.",
    ]
    output = (
        f"You can return {product} within {days} days of delivery. "
        f"Opened items from {city} are charged a {fee} euro restocking fee."
    )
    expected = f"{days} days from delivery, with a {fee} euro fee if opened."
    return {"input": question, "context": context, "output": output, "expected_output": expected}


def rag_cases(count: int, start: int = 0) -> list[dict[str, Any]]:
    return [rag_case(i) for i in range(start, start + count)]


# W5: each context chunk grows to about 500 tokens (~2,000 characters) of policy text, so a case
# carries about 1,500 tokens of context, past every provider's 1,024-token caching minimum
# except Claude Haiku 4.5's 4,096.
_CLAUSES = [
    "Refunds are paid to the original payment method within {n} business days of inspection.",
    "Items marked final sale in {city} stores cannot be exchanged after {n} days.",
    "A receipt or order number is required for every return of {product}.",
    "Gift recipients may exchange {product} for store credit up to {n} days after delivery.",
    "Damaged packaging alone does not make {product} ineligible for return in {city}.",
    "Returns shipped from {city} are processed at the regional centre within {n} days.",
    "Customers in {city} may book a courier pickup for returns weighing over {n} kilograms.",
    "Warranty claims for {product} require the serial number printed under the base.",
]
LONG_CONTEXT_CHUNK_CHARS = 2000


def _long_chunk(head: str, index: int, salt: int, product: str, city: str) -> str:
    sentences, i = [head], 0
    while sum(len(x) + 1 for x in sentences) < LONG_CONTEXT_CHUNK_CHARS:
        clause = _CLAUSES[(index + salt + i) % len(_CLAUSES)]
        sentences.append(f"Clause {index}.{salt}.{i}: "
                         + clause.format(n=3 + (index + i * salt) % 40, city=city, product=product))
        i += 1
    return " ".join(sentences)


def long_rag_case(index: int) -> dict[str, Any]:
    """One W5 case: W1's case with each of its three chunks grown to ~2,000 characters."""
    case = rag_case(index)
    product = _PRODUCTS[index % len(_PRODUCTS)]
    city = _CITIES[(index // len(_PRODUCTS)) % len(_CITIES)]
    case["context"] = [_long_chunk(chunk, index, salt, product, city)
                       for salt, chunk in enumerate(case["context"], start=1)]
    return case


def long_rag_cases(count: int) -> list[dict[str, Any]]:
    return [long_rag_case(i) for i in range(count)]


def cases_for(workload: str, count: int) -> list[dict[str, Any]]:
    """The judged workloads' cases: ``rag`` (W1/W3/W4) or ``long-rag`` (W5)."""
    return long_rag_cases(count) if workload == "long-rag" else rag_cases(count)


def agent_case(index: int) -> dict[str, Any]:
    """One W2 case: the expected tool trajectory (with args) and what the agent actually did.

    The agent makes one extra lookup call (IN_ORDER allows extras) and answers with both
    keywords, so a correct implementation passes every criterion on every case.
    """
    order_id = f"A{100000 + index}"
    amount = 10 + index % 90
    expected_calls = [
        {"name": "lookup_order", "args": {"order_id": order_id}},
        {"name": "check_policy", "args": {"order_id": order_id, "reason": "damaged"}},
        {"name": "issue_refund", "args": {"order_id": order_id, "amount": amount}},
    ]
    actual_calls = [
        expected_calls[0],
        {"name": "lookup_customer", "args": {"order_id": order_id}},
        expected_calls[1],
        expected_calls[2],
    ]
    expected = f"Your refund of {amount} euros for order {order_id} has been issued."
    response = f"I issued a refund of {amount} euros for your order {order_id}; it is on its way."
    return {
        "input": f"Case {index}: my order {order_id} arrived damaged, can I get a refund?",
        "expected_output": expected,
        "expected_tool_calls": expected_calls,
        "actual_tool_calls": actual_calls,
        "output": response,
    }


def agent_cases(count: int) -> list[dict[str, Any]]:
    return [agent_case(i) for i in range(count)]


def real_judge_case(index: int) -> dict[str, Any]:
    """One case for the real-judge benchmark: a short context and an answer that is right on
    even indices and wrong on odd ones (a number the context does not give), so that a judge's
    verdicts can be checked against the truth; ``correct`` says which."""
    case = rag_case(index)
    correct = index % 2 == 0
    days = 14 + index % 30
    fee = 5 + index % 20
    product = _PRODUCTS[index % len(_PRODUCTS)]
    city = _CITIES[(index // len(_PRODUCTS)) % len(_CITIES)]
    if not correct:
        case["output"] = (f"You can return {product} within {days + 60} days of delivery. "
                          f"Opened items from {city} are charged a {fee + 35} euro restocking fee.")
    case["context"] = case["context"][:2]
    case["correct"] = correct
    return case


def real_judge_cases(count: int) -> list[dict[str, Any]]:
    return [real_judge_case(i) for i in range(count)]
