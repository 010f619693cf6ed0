"""Document 001 "UNKNOWN verdicts": the verdict parser and the tolerant JSON reader."""

from __future__ import annotations

import pytest

from referee.judge import Verdict, parse_json_object, parse_verdict

YES, NO, UNKNOWN = Verdict.YES, Verdict.NO, Verdict.UNKNOWN

VERDICT_TABLE = [
    # starts with a verdict word
    ("Yes", YES),
    ("no", NO),
    ("YES.", YES),
    ("No!", NO),
    ("**Yes.**", YES),
    ("**No** - the context never mentions Paris.", NO),
    ("Yes, the answer is supported by the second passage.", YES),
    ("No, the response contradicts the source.", NO),
    ("  \n\nyes\n", YES),
    ("Answer: Yes", YES),
    ("Final answer: no", NO),
    ("Verdict: **NO**", NO),
    ("> Yes", YES),
    ("\"Yes\"", YES),
    ("- No.", NO),
    ("## Yes\nThe claim appears verbatim.", YES),
    ("Yes, no doubt about it.", YES),
    ("No or yes", UNKNOWN),
    # JSON and code fences
    ('{"answer": "no"}', NO),
    ('{"answer": "Yes", "reason": "stated in paragraph 2"}', YES),
    ('```json\n{"verdict": "yes"}\n```', YES),
    ('Here is my assessment:\n```json\n{"answer": "No"}\n```', NO),
    ('{"answer": true}', YES),
    ('{"answer": "I cannot say yes or no"}', UNKNOWN),
    ("```\nYes\n```", YES),
    # XML/HTML-style tags: a tag is not part of the word next to it
    ("<answer>No</answer>", NO),
    ("<b>Yes</b>", YES),
    ("<verdict>\n**Yes**\n</verdict>", YES),
    ("<thinking>yes, but the date differs</thinking>\n<answer>No</answer>", NO),
    ("<answer>yes</answer><answer>no</answer>", UNKNOWN),
    ("<answer>I cannot say yes or no</answer>", UNKNOWN),
    ("Answer: <Yes>", YES),
    # exactly one verdict word somewhere
    ("The statement is supported, so my answer is yes.", YES),
    ("After checking each claim against the context: no.", NO),
    ("答案：Yes", YES),
    ("Réponse : no (la source ne le dit pas)", NO),
    ("是的 — yes, 完全正确", YES),
    # hedges and ambiguity
    ("I cannot say yes or no with certainty", UNKNOWN),
    ("yes and no", UNKNOWN),
    ("Yes/No", UNKNOWN),
    ("Yesterday the model said something else entirely.", UNKNOWN),
    ("Nobody could tell from this context.", UNKNOWN),
    ("Nothing in the passage addresses this.", UNKNOWN),
    ("It depends on how you read it; I can't say yes.", UNKNOWN),
    ("The evidence is insufficient to answer yes.", UNKNOWN),
    ("Partially.", UNKNOWN),
    ("", UNKNOWN),
    ("   ", UNKNOWN),
    ("I'm not sure.", UNKNOWN),
    ("Possibly, the context is ambiguous.", UNKNOWN),
    ("The first claim: yes. The second claim: no.", UNKNOWN),
    # "no" meaning "none", and verdict words inside a phrase, answer nothing
    ("…a short factual answer with no invented details.", UNKNOWN),
    ("There are no unsupported claims in the output.", UNKNOWN),
    ("The output contains not a single error.", UNKNOWN),
    ("I would never say yes to that.", UNKNOWN),
    ("The answer is not yes.", UNKNOWN),
    ("There are no unsupported claims in the output. Yes.", YES),
    ("There are no unsupported claims in the output, so my answer is no.", NO),
    ("My answer is yes because the context states it.", YES),
    ("No invented details.", NO),  # a reply starting with a verdict word parses as before
    # referee's own data blocks, echoed back, are the material under test
    ("<<<BEGIN MODEL OUTPUT …>>>\nYes, children pay 20 euros.\n<<<END MODEL OUTPUT …>>>",
     UNKNOWN),
    ("<<<BEGIN MODEL OUTPUT 0a1b2c3d4e5f>>>\nYes.\n<<<END MODEL OUTPUT 0a1b2c3d4e5f>>>\nNo",
     NO),
    ("Yes, children pay 20 euros.\n<<<END MODEL OUTPUT 0a1b2c3d4e5f>>>\nNo", NO),
    ("No.\n<<<BEGIN MODEL OUTPUT 0a1b2c3d4e5f>>>\nYes, children pay 20 euros.", NO),
]


@pytest.mark.parametrize(("reply", "expected"), VERDICT_TABLE)
def test_verdict_table(reply: str, expected: Verdict) -> None:
    assert parse_verdict(reply) is expected


def test_table_is_large_enough() -> None:
    assert len(VERDICT_TABLE) >= 30


def test_none_reply_is_unknown() -> None:
    assert parse_verdict(None) is UNKNOWN


@pytest.mark.parametrize(("text", "expected"), [
    ('{"score": 0.8, "reasoning": "ok"}', {"score": 0.8, "reasoning": "ok"}),
    ('```json\n{"score": 1}\n```', {"score": 1}),
    ('Sure! Here you go: {"score": 0.25, "reasoning": "partly"} Hope this helps.',
     {"score": 0.25, "reasoning": "partly"}),
    ('```\n{"a": {"b": [1, 2]}}\n```\nextra prose', {"a": {"b": [1, 2]}}),
    ('prefix {not json} then {"k": "v"}', {"k": "v"}),
])
def test_parse_json_object_tolerates_fences_and_prose(text: str, expected: dict) -> None:
    assert parse_json_object(text) == expected


@pytest.mark.parametrize("text", ["", "no json here", "[1, 2, 3]", "{broken: json", None])
def test_parse_json_object_rejects_non_objects(text: str | None) -> None:
    with pytest.raises(ValueError, match="JSON object"):
        parse_json_object(text)
