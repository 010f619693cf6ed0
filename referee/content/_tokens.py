"""Prompt tokens an image or a PDF costs, by each provider's documented rule (checked
2026-12-07), for the run's cost estimate before any reply reports real usage.

- OpenAI, tile models (GPT-4o, GPT-4.1, GPT-5, o1, o3): the image is fitted within 2048x2048,
  then its short side to 768; it costs a base plus a per-tile price for each 512x512 tile, or
  the base alone at detail "low".
- OpenAI, patch models (GPT-4.1 mini/nano, GPT-5 mini/nano, o4-mini): one patch per 32x32
  pixels, at most 1536 patches (the image is scaled down to fit), times a model multiplier.
- Anthropic: width x height / 750, of the image as the model sees it (long edge 1568,
  about 1.15 megapixels).
- Gemini: 258 tokens for an image with both sides at most 384 px, else 258 per 768x768 tile;
  258 tokens per PDF page.

OpenAI and Anthropic read a PDF as each page's text plus an image of the page and publish no
fixed figure; Anthropic gives 1,500 to 3,000 tokens per page, and referee budgets the upper end
for both so an estimate does not undercount.
"""

from __future__ import annotations

import math
import re

from referee.content._limits import ANTHROPIC_LIMITS, OPENAI_LIMITS, fitted_size

# (model name pattern, base tokens, tokens per 512x512 tile); the first match wins.
_OPENAI_TILES: tuple[tuple[re.Pattern[str], int, int], ...] = (
    (re.compile(r"^gpt-4o-mini"), 2833, 5667),
    (re.compile(r"^gpt-5"), 70, 140),
    (re.compile(r"^(o1|o3)(?!-mini)"), 75, 150),
    (re.compile(r"^computer-use"), 65, 129),
    (re.compile(r""), 85, 170),  # GPT-4o, GPT-4.1, GPT-4.5 and anything not named here
)
# (model name pattern, multiplier) of the patch-priced models.
_OPENAI_PATCHES: tuple[tuple[re.Pattern[str], float], ...] = (
    (re.compile(r"^gpt-(4\.1|5)-mini"), 1.62),
    (re.compile(r"^gpt-(4\.1|5)-nano"), 2.46),
    (re.compile(r"^o4-mini"), 1.72),
)
_PATCH = 32
_MAX_PATCHES = 1536
GEMINI_TILE_TOKENS = 258
# Per PDF page: Gemini's documented figure; Anthropic's upper figure, used for OpenAI too.
GEMINI_PAGE_TOKENS = GEMINI_TILE_TOKENS
ESTIMATED_PAGE_TOKENS = 3000


def openai_image_tokens(model: str, width: int, height: int, detail: str = "auto") -> int:
    """Prompt tokens of one ``width`` x ``height`` image sent to an OpenAI ``model``."""
    model = model.lower()
    for pattern, multiplier in _OPENAI_PATCHES:
        if pattern.match(model):
            return math.ceil(_patches(width, height) * multiplier)
    base, per_tile = next((b, t) for pattern, b, t in _OPENAI_TILES if pattern.match(model))
    if detail == "low":
        return base
    seen_w, seen_h = fitted_size(width, height, OPENAI_LIMITS)
    return base + per_tile * math.ceil(seen_w / 512) * math.ceil(seen_h / 512)


def anthropic_image_tokens(model: str, width: int, height: int, detail: str = "auto") -> int:
    seen_w, seen_h = fitted_size(width, height, ANTHROPIC_LIMITS)
    return math.ceil(seen_w * seen_h / 750)


def gemini_image_tokens(model: str, width: int, height: int, detail: str = "auto") -> int:
    if width <= 384 and height <= 384:
        return GEMINI_TILE_TOKENS
    return math.ceil(width / 768) * math.ceil(height / 768) * GEMINI_TILE_TOKENS


def _patches(width: int, height: int) -> int:
    patches = math.ceil(width / _PATCH) * math.ceil(height / _PATCH)
    if patches <= _MAX_PATCHES:
        return patches
    # Scaled down to fit the patch budget, then trimmed so that whole patches cover each side.
    shrink = math.sqrt(_PATCH * _PATCH * _MAX_PATCHES / (width * height))
    scaled_w, scaled_h = width * shrink, height * shrink
    shrink *= min(math.floor(scaled_w / _PATCH) / (scaled_w / _PATCH),
                  math.floor(scaled_h / _PATCH) / (scaled_h / _PATCH))
    return math.ceil(width * shrink / _PATCH) * math.ceil(height * shrink / _PATCH)
