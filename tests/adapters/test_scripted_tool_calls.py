"""The scripted server plays an agent's model: assistant turns that call tools, in every API."""

from __future__ import annotations

import anthropic
import httpx
import pytest
from openai import OpenAI

from referee.testing import (
    DUMMY_API_KEY,
    RecordedRequest,
    Reply,
    ScriptedJudgeServer,
    ScriptedToolCall,
)


def weather(request: RecordedRequest) -> Reply | str:
    if request.tool_outputs:
        return f"It is {request.tool_outputs[-1]}."
    return Reply.calling(ScriptedToolCall("get_weather", {"city": "Paris"}, call_id="call_7"))


@pytest.fixture
def server():
    with ScriptedJudgeServer(weather) as srv:
        yield srv


def test_chat_completions_and_responses_get_tool_calls_then_the_answer(server):
    client = OpenAI(base_url=server.base_url(), api_key=DUMMY_API_KEY)
    first = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "?"}])
    (call,) = first.choices[0].message.tool_calls
    assert first.choices[0].finish_reason == "tool_calls"
    assert (call.id, call.function.name, call.function.arguments) == (
        "call_7", "get_weather", '{"city": "Paris"}')
    assert first.choices[0].message.content is None
    answer = client.chat.completions.create(model="m", messages=[
        {"role": "user", "content": "?"}, first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": "call_7", "content": "sunny"}])
    assert answer.choices[0].message.content == "It is sunny."

    response = client.responses.create(model="m", input="?")
    (item,) = response.output
    assert (item.type, item.call_id, item.name, item.arguments) == (
        "function_call", "call_7", "get_weather", '{"city": "Paris"}')


def test_anthropic_and_gemini_get_their_own_tool_call_shapes(server):
    claude = anthropic.Anthropic(base_url=server.base_url("anthropic"), api_key=DUMMY_API_KEY)
    message = claude.messages.create(model="m", max_tokens=50,
                                     messages=[{"role": "user", "content": "?"}])
    (block,) = message.content
    assert (message.stop_reason, block.type, block.id, block.name, block.input) == (
        "tool_use", "tool_use", "call_7", "get_weather", {"city": "Paris"})

    # Gemini's body read raw: importing google.genai here would outlive this test and change
    # what later tests of the missing-SDK message see.
    body = httpx.post(f"{server.base_url('google')}/v1beta/models/gemini-2.5-flash:generateContent",
                      json={"contents": [{"role": "user", "parts": [{"text": "?"}]}]}).json()
    (part,) = body["candidates"][0]["content"]["parts"]
    assert part == {"functionCall": {"id": "call_7", "name": "get_weather",
                                     "args": {"city": "Paris"}}}


def test_tool_outputs_are_those_of_the_current_user_turn(server):
    client = OpenAI(base_url=server.base_url(), api_key=DUMMY_API_KEY)
    earlier_turn = [{"role": "user", "content": "?"},
                    {"role": "assistant", "tool_calls": [{"id": "call_7", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{}"}}]},
                    {"role": "tool", "tool_call_id": "call_7", "content": "sunny"},
                    {"role": "assistant", "content": "It is sunny."}]
    reply = client.chat.completions.create(
        model="m", messages=[*earlier_turn, {"role": "user", "content": "And tomorrow?"}])
    assert reply.choices[0].message.tool_calls  # a new turn: the tool is called again
    assert server.requests[-1].tool_outputs == []


def test_a_scripted_tool_turn_needs_a_call():
    with pytest.raises(ValueError, match="at least one tool call"):
        Reply.calling()
