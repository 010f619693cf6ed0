"""A turn sent an image or a PDF keeps its parts in the TurnResult and in the history later
turns are given, so an agent that rebuilds the conversation from its history sends the model
every earlier turn's images; the run store keeps those parts once in blobs/, and a text
conversation is stored as before."""

from __future__ import annotations

import json

import pytest
from content_samples import picture
from test_content_frameworks import (
    analyst_agent,
    chat_media,
    one_model_graph,
    responses_media,
    sha,
)

from referee import AgentEvaluator, EvalCase, EvalSet
from referee.content import ImagePart, TextPart
from referee.execution import TurnResult
from referee.report.html import render_html
from referee.store import load_run
from referee.testing import ScriptedJudgeServer

FIRST = picture(300, 200, seed=41)
SECOND = picture(240, 160, seed=42)
CONVERSATION = EvalSet(eval_cases=[EvalCase(conversation=[
    {"user_content": ["What does this chart show?", ImagePart(data=FIRST, path="q1.png")]},
    {"user_content": ["And this one, next to the first?", ImagePart(data=SECOND,
                                                                     path="q2.png")]},
])])
BOTH = [("image/png", sha(FIRST)), ("image/png", sha(SECOND))]


def media_hashes(content: object) -> list[str]:
    return [part.sha256 for part in content if isinstance(part, ImagePart)] \
        if isinstance(content, list) else []


def test_an_agent_rebuilding_from_its_history_sees_the_first_turns_image(tmp_path):
    seen: list[list[str]] = []

    def stateless_agent(message, history: list[TurnResult]) -> str:
        # What a stateless chat client sends: every earlier user turn, then this one.
        seen.append([h for turn in history for h in media_hashes(turn.user_content)]
                    + media_hashes(message))
        return f"reply {len(history) + 1}"

    report = AgentEvaluator(agent=stateless_agent).evaluate_sync(CONVERSATION,
                                                                 output_dir=tmp_path)

    assert seen == [[sha(FIRST)], [sha(FIRST), sha(SECOND)]]
    (case,) = report.cases
    first, second = case.execution.turns
    assert first.user_text == "What does this chart show?"
    assert [p.sha256 for p in first.user_parts if isinstance(p, ImagePart)] == [sha(FIRST)]
    assert isinstance(first.user_parts[0], TextPart)
    # Stored once: each picture one blob, each turn's part its hash alone.
    run_dir = tmp_path / report.run_id
    (line,) = (run_dir / "cases.jsonl").read_text().splitlines()
    stored = json.loads(line)["execution"]["turns"]
    assert [[p.get("sha256") for p in t["user_content"] if p["type"] == "image"]
            for t in stored] == [[sha(FIRST)], [sha(SECOND)]]
    assert all("data" not in p for t in stored for p in t["user_content"])
    assert sorted(p.read_bytes() for p in (run_dir / "blobs").rglob("*") if p.is_file()) \
        == sorted([FIRST, SECOND])
    # Read back, a turn's parts are the same parts (by hash) with the text beside them.
    (loaded,) = load_run(run_dir).cases
    assert [t.user_text for t in loaded.execution.turns] == [t.user_text for t in
                                                            case.execution.turns]
    assert [media_hashes(t.user_content) for t in loaded.execution.turns] == [
        [sha(FIRST)], [sha(SECOND)]]
    # The report shows each turn's text, and its images as the case's thumbnails.
    html = render_html(report)
    assert "What does this chart show?" in html and "And this one, next to the first?" in html
    assert html.count('<img src="data:image/') == 2


def test_a_text_conversation_is_stored_as_before(tmp_path):
    report = AgentEvaluator(agent=lambda message, history: f"re: {message}").evaluate_sync(
        EvalSet(eval_cases=[EvalCase(conversation=[{"user_content": "Hello"},
                                                   {"user_content": [{"text": "Bye"}]}])]),
        output_dir=tmp_path)
    (line,) = (tmp_path / report.run_id / "cases.jsonl").read_text().splitlines()
    # Exactly the bytes a text turn was stored as: its words as a JSON string.
    assert ('"turns":[{"user_content":"Hello","response":"re: Hello"},'
            '{"user_content":"Bye","response":"re: Bye"}]') in line
    assert not (tmp_path / report.run_id / "blobs").exists()
    assert TurnResult(user_content=[TextPart(text="Hi")]).user_content == "Hi"


def test_langgraph_is_sent_both_turns_images_on_the_second_turn():
    from referee.adapters import LangGraphAgent

    with ScriptedJudgeServer(reply="North sold most.") as server:
        agent = LangGraphAgent(one_model_graph(server))
        report = AgentEvaluator(agent=agent, save=False).evaluate_sync(CONVERSATION)

    (case,) = report.cases
    assert case.error is None and len(case.execution.turns) == 2
    one, two = server.requests
    assert chat_media(one.body) == BOTH[:1]
    assert chat_media(two.body) == BOTH  # the first turn's image, then the second's


@pytest.mark.parametrize("api", ["responses", "chat_completions"])
def test_the_agents_sdk_is_sent_both_turns_images_on_the_second_turn(api):
    with ScriptedJudgeServer(reply="North sold most.") as server:
        report = AgentEvaluator(agent=analyst_agent(server, api),
                                save=False).evaluate_sync(CONVERSATION)

    (case,) = report.cases
    assert case.error is None and len(case.execution.turns) == 2
    read = responses_media if api == "responses" else chat_media
    one, two = server.requests
    assert read(one.body) == BOTH[:1]
    assert read(two.body) == BOTH


async def test_two_conversations_with_the_same_words_about_different_pictures_stay_apart():
    """The adapter finds a conversation's own state by its words and its pictures' hashes:
    run side by side, each second turn continues its own first."""
    from referee.adapters import LangGraphAgent

    with ScriptedJudgeServer(reply="Same words.") as server:
        agent = LangGraphAgent(one_model_graph(server))
        turn_a = ["What is it?", ImagePart(data=FIRST)]
        turn_b = ["What is it?", ImagePart(data=SECOND)]
        first_a = await agent(turn_a, [])
        first_b = await agent(turn_b, [])
        await agent("More?", [TurnResult(user_content=turn_a, response=first_a.actual_response)])
        await agent("More?", [TurnResult(user_content=turn_b, response=first_b.actual_response)])

    assert [chat_media(r.body) for r in server.requests[2:]] == [BOTH[:1], BOTH[1:]]
