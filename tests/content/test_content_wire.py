"""Each provider receives its own image and document format: the parts are built into each
API's request shape, sent through the official SDK to the scripted judge server on 127.0.0.1,
and the request body the server recorded is checked."""

from __future__ import annotations

import base64

import pytest
from content_samples import pdf, picture

from referee.content import (
    ANTHROPIC_CONTENT,
    GEMINI_CONTENT,
    OPENAI_CONTENT,
    DocumentPart,
    ImagePart,
    TextPart,
    fit_part,
)
from referee.testing import DUMMY_API_KEY, ScriptedJudgeServer

PNG = picture(400, 300)
PDF = pdf(2)
PARTS = [TextPart(text="Does the form match the screenshot?"),
         ImagePart(data=PNG, path="shots/screen.png"),
         DocumentPart(data=PDF, path="forms/claim.pdf")]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@pytest.fixture
def server(isolated_judge):
    with ScriptedJudgeServer(reply="Yes") as running:
        yield running


async def test_chat_completions_gets_image_url_and_file_parts(server):
    import openai

    async with openai.AsyncOpenAI(base_url=server.base_url("openai"), api_key=DUMMY_API_KEY,
                                  max_retries=0) as client:
        reply = await client.chat.completions.create(
            model="gpt-4.1", messages=[{"role": "user",
                                        "content": OPENAI_CONTENT.user_content("chat", PARTS)}])
    assert reply.choices[0].message.content == "Yes"
    (request,) = server.requests
    assert request.path.endswith("/chat/completions")
    assert request.body["messages"][0]["content"] == [
        {"type": "text", "text": "Does the form match the screenshot?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(PNG)}",
                                            "detail": "auto"}},
        {"type": "file", "file": {"filename": "claim.pdf",
                                  "file_data": f"data:application/pdf;base64,{b64(PDF)}"}},
    ]


async def test_responses_gets_input_image_and_input_file_parts(server):
    import openai

    async with openai.AsyncOpenAI(base_url=server.base_url("openai"), api_key=DUMMY_API_KEY,
                                  max_retries=0) as client:
        await client.responses.create(
            model="gpt-4.1", input=[{"role": "user",
                                     "content": OPENAI_CONTENT.user_content("responses", PARTS)}])
    (request,) = server.requests
    assert request.path.endswith("/responses")
    assert request.body["input"][0]["content"] == [
        {"type": "input_text", "text": "Does the form match the screenshot?"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{b64(PNG)}",
         "detail": "auto"},
        {"type": "input_file", "filename": "claim.pdf",
         "file_data": f"data:application/pdf;base64,{b64(PDF)}"},
    ]


async def test_anthropic_gets_image_and_document_blocks(server):
    import anthropic

    remote = ImagePart(url="https://example.com/chart.png")
    async with anthropic.AsyncAnthropic(base_url=server.base_url("anthropic"),
                                        api_key=DUMMY_API_KEY, max_retries=0) as client:
        reply = await client.messages.create(
            model="claude-sonnet-4-5", max_tokens=16,
            messages=[{"role": "user",
                       "content": ANTHROPIC_CONTENT.user_content("chat", [*PARTS, remote])}])
    assert reply.content[0].text == "Yes"
    (request,) = server.requests
    assert request.body["messages"][0]["content"] == [
        {"type": "text", "text": "Does the form match the screenshot?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": b64(PNG)}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                        "data": b64(PDF)}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/chart.png"}},
    ]


async def test_gemini_gets_inline_data_parts(server):
    pytest.importorskip("google.genai")
    from google import genai
    from google.genai import types

    client = genai.Client(api_key=DUMMY_API_KEY, http_options=types.HttpOptions(
        base_url=server.base_url("google"), retry_options=types.HttpRetryOptions(attempts=1)))
    reply = await client.aio.models.generate_content(
        model="gemini-2.5-flash",
        contents=[{"role": "user", "parts": GEMINI_CONTENT.user_content("chat", PARTS)}])
    assert reply.text == "Yes"
    (request,) = server.requests
    text, image, document = request.body["contents"][0]["parts"]
    assert text == {"text": "Does the form match the screenshot?"}
    # The SDK writes the bytes as URL-safe base64 under inlineData (its key for the blob's
    # media type has varied between releases; the API reads both spellings).
    assert [_inline(image), _inline(document)] == [("image/png", PNG),
                                                   ("application/pdf", PDF)]


def _inline(part: dict) -> tuple[str, bytes]:
    (blob,) = [part[key] for key in ("inlineData", "inline_data") if key in part]
    return (blob.get("mimeType", blob.get("mime_type")),
            base64.urlsafe_b64decode(blob["data"]))


async def test_a_fitted_image_is_what_the_provider_receives(server):
    """The judge gets the image scaled to Anthropic's bounds; the original stays as it was."""
    import anthropic

    large = ImagePart(data=picture(3000, 2000), path="big.png")
    fitted = fit_part(large, ANTHROPIC_CONTENT.limits)
    async with anthropic.AsyncAnthropic(base_url=server.base_url("anthropic"),
                                        api_key=DUMMY_API_KEY, max_retries=0) as client:
        await client.messages.create(model="claude-sonnet-4-5", max_tokens=16, messages=[
            {"role": "user", "content": ANTHROPIC_CONTENT.user_content("chat", [fitted])}])
    (request,) = server.requests
    sent = base64.b64decode(request.body["messages"][0]["content"][0]["source"]["data"])
    assert sent == fitted.data and len(sent) < len(large.data or b"")
    assert ImagePart(data=sent).sha256 == fitted.sha256 != large.sha256
