"""A flat screenshot can grow when it is scaled (the resampled edges defeat PNG's compression).
To a provider that scales a larger image itself and bills the size it scaled to (OpenAI,
Anthropic) the smaller original goes; Gemini, which bills the tiles it receives, gets it scaled."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from referee.content import ImagePart
from referee.content._fit import fit_part
from referee.content._limits import ANTHROPIC_LIMITS, GEMINI_LIMITS, OPENAI_LIMITS
from referee.content._tokens import anthropic_image_tokens, openai_image_tokens


def flat_screenshot(width: int, height: int) -> bytes:
    """Flat panels and rows of one-pixel glyph specks, as a UI capture has."""
    rng = np.random.default_rng(5)
    canvas = np.full((height, width, 3), 244, dtype=np.uint8)
    canvas[height // 8: height // 3, width // 10: width // 2] = (40, 90, 200)
    for row in range(20, height - 10, 24):
        canvas[row:row + 8][rng.random((8, width)) < 0.2] = 30
    out = io.BytesIO()
    Image.fromarray(canvas).save(out, "PNG")
    return out.getvalue()


@pytest.mark.parametrize("limits", [OPENAI_LIMITS, ANTHROPIC_LIMITS], ids=["openai", "anthropic"])
def test_a_screenshot_that_grows_when_scaled_is_sent_as_it_is(limits):
    original = ImagePart(data=flat_screenshot(2560, 1440), path="screen.png")
    fitted = fit_part(original, limits)
    assert fitted.sha256 == original.sha256
    assert isinstance(fitted, ImagePart) and (fitted.width, fitted.height) == (2560, 1440)


def test_the_original_costs_the_tokens_of_the_size_the_provider_scales_it_to():
    # The estimate follows the provider's own scaling, so keeping the original changes no bill.
    assert openai_image_tokens("gpt-4o", 2560, 1440) == openai_image_tokens("gpt-4o", 1365, 768)
    assert (anthropic_image_tokens("claude-haiku-4-5", 2560, 1440)
            == anthropic_image_tokens("claude-haiku-4-5", 1429, 804))


def test_gemini_gets_the_screenshot_scaled_though_it_grows():
    original = ImagePart(data=flat_screenshot(4096, 1536))
    fitted = fit_part(original, GEMINI_LIMITS)
    assert isinstance(fitted, ImagePart) and (fitted.width, fitted.height) == (3072, 1152)
    assert fitted.original_sha256 == original.sha256
