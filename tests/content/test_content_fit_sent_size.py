"""An image is fitted within a provider's per-image limit as the request carries it (base64),
not as a file: Anthropic refuses a 4.3 MB PNG, 5.8 MB once encoded."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from referee.content import ImagePart
from referee.content._fit import fit_part, sent_size
from referee.content._limits import ANTHROPIC_LIMITS
from referee.judge import get_judge
from referee.testing import ScriptedJudgeServer
from referee.testing.media_limits import ANTHROPIC_MAX_IMAGE_BASE64, refusing_oversized_images


def rgba_grain(side: int = 1040) -> bytes:
    """A PNG within Anthropic's pixel bounds whose file is under 5 MB and whose base64 is not."""
    pixels = np.random.default_rng(3).integers(0, 256, (side, side, 4), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels, "RGBA").save(out, "PNG")
    return out.getvalue()


def test_sent_size_is_the_base64_length():
    assert [sent_size(n) for n in (0, 1, 3, 4, 3 * 1024 * 1024)] == [0, 4, 4, 8, 4 * 1024 * 1024]


def test_a_file_under_5_mb_whose_base64_is_over_is_re_encoded_for_anthropic():
    data = rgba_grain()
    assert len(data) < ANTHROPIC_LIMITS.max_image_bytes < sent_size(len(data))
    fitted = fit_part(ImagePart(data=data), ANTHROPIC_LIMITS)
    assert isinstance(fitted, ImagePart) and fitted.data is not None
    assert fitted.sha256 != ImagePart(data=data).sha256
    assert sent_size(len(fitted.data)) <= ANTHROPIC_MAX_IMAGE_BASE64
    assert (fitted.width, fitted.height) == (1040, 1040)


async def test_anthropic_answers_the_fitted_image_instead_of_refusing_it():
    with ScriptedJudgeServer(refusing_oversized_images("Yes")) as server:
        judge = get_judge(server.judge_config(provider="anthropic", model="claude-haiku-4-5"))
        reply = await judge.complete("Is this a texture?", parts=[ImagePart(data=rgba_grain())])
    assert reply.text == "Yes"
    (request,) = server.requests
    (image,) = [b for b in request.body["messages"][-1]["content"] if b["type"] == "image"]
    assert len(image["source"]["data"]) <= ANTHROPIC_MAX_IMAGE_BASE64
