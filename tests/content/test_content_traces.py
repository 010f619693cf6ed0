"""Images in recorded conversations: a tool's image result is kept as parts beside its text,
stored once, and checked by the image criteria."""

from __future__ import annotations

import base64

import pytest
from content_samples import picture

from referee import EvalCase
from referee.adapters import execution_from_messages
from referee.content import ImageMatches, ImagePart, find_parts
from referee.errors import InputError


def data_url(data: bytes) -> str:
    return f"data:image/png;base64,{base64.b64encode(data).decode('ascii')}"


def conversation(tool_content):
    return [
        {"role": "user", "content": "Open the dashboard"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "screenshot", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": tool_content},
        {"role": "assistant", "content": "The dashboard is open."},
    ]


async def test_a_tools_image_result_is_kept_as_parts_and_checked():
    shot = picture(400, 300, seed=8)
    run = execution_from_messages(conversation([
        {"type": "text", "text": "captured"},
        {"type": "image_url", "image_url": {"url": data_url(shot)}}]))
    (call,) = run.tool_calls
    text, image = call.result
    assert text == "captured" and isinstance(image, ImagePart) and image.data == shot
    assert "bytes>" in str(call.result) and len(str(call.result)) < 500
    assert [p.sha256 for p in find_parts(run)] == [ImagePart(data=shot).sha256]
    result = await ImageMatches(shot).evaluate(run, EvalCase(input="Open the dashboard"))
    assert result.passed


def test_a_text_tool_result_is_unchanged():
    run = execution_from_messages(conversation("plain text"))
    assert run.tool_calls[0].result == "plain text"


def test_an_unreadable_image_in_a_tool_result_names_the_message():
    with pytest.raises(InputError, match=r"^trace.json: field 'messages\[2\]\.content': "
                                         r"image part: image bytes are in no format referee reads "
                                         r"\(declared image/png\)"):
        execution_from_messages(conversation([
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]),
            where="trace.json")
