"""The scripted judge refuses an image over Anthropic's 5 MB per-image limit as Anthropic does:
measured on the base64 text, through the real SDK; other providers and smaller images pass."""

from __future__ import annotations

import base64

import anthropic
import openai
import pytest

from referee.testing import DUMMY_API_KEY, ScriptedJudgeServer
from referee.testing.media_limits import ANTHROPIC_MAX_IMAGE_BASE64, refusing_oversized_images


def _image_block(raw_size: int) -> dict:
    data = base64.b64encode(b"\xff" * raw_size).decode("ascii")
    return {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg",
                                        "data": data}}


def _ask_claude(server: ScriptedJudgeServer, raw_size: int) -> str:
    client = anthropic.Anthropic(base_url=server.base_url("anthropic"), api_key=DUMMY_API_KEY,
                                 max_retries=0)
    message = client.messages.create(
        model="claude-haiku-4-5", max_tokens=10,
        messages=[{"role": "user", "content": [{"type": "text", "text": "What is shown?"},
                                               _image_block(raw_size)]}])
    return "".join(block.text for block in message.content if block.type == "text")


def test_an_image_whose_base64_passes_5_mb_is_refused_though_its_bytes_do_not():
    raw = 4 * 1024 * 1024  # 4 MB of bytes, 5.33 MB as base64
    encoded = len(base64.b64encode(b"\0" * raw))
    with ScriptedJudgeServer(refusing_oversized_images("Yes")) as server:
        with pytest.raises(anthropic.BadRequestError) as refused:
            _ask_claude(server, raw)
    assert refused.value.status_code == 400
    assert (f"messages.0.content.1.image.source.base64: image exceeds 5 MB maximum: "
            f"{encoded} bytes > {ANTHROPIC_MAX_IMAGE_BASE64} bytes") in str(refused.value)
    assert len(server.requests) == 1  # recorded, as the provider would have received it


def test_an_image_within_the_limit_gets_the_scripted_reply():
    under = ANTHROPIC_MAX_IMAGE_BASE64 // 4 * 3  # exactly 5 MB once encoded
    with ScriptedJudgeServer(refusing_oversized_images(lambda request: "Yes, a cat")) as server:
        assert _ask_claude(server, under) == "Yes, a cat"


def test_other_providers_are_not_held_to_anthropics_limit():
    data = base64.b64encode(b"\xff" * (4 * 1024 * 1024)).decode("ascii")
    with ScriptedJudgeServer(refusing_oversized_images("Yes")) as server:
        client = openai.OpenAI(base_url=server.base_url("openai"), api_key=DUMMY_API_KEY,
                               max_retries=0)
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{
            "role": "user", "content": [
                {"type": "text", "text": "What is shown?"},
                {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{data}"}}]}])
    assert reply.choices[0].message.content == "Yes"
