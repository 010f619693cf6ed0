"""What each provider takes: image formats, the size a model actually looks at, byte and page
limits, as each provider documented them (checked 2026-12-07; the values are in one table so a
change in a provider's documentation is one edit).

Standard library only: these numbers are read before a run (to refuse a case in one line) and
by the token estimates, neither of which needs Pillow.
"""

from __future__ import annotations

from dataclasses import dataclass

MB = 1024 * 1024


@dataclass(frozen=True)
class ProviderLimits:
    label: str
    image_types: frozenset[str]
    # The largest image worth sending: the model scales anything bigger down to this itself,
    # so sending more costs bandwidth and request bytes and buys nothing.
    max_long_edge: int
    max_short_edge: int | None
    max_pixels: int | None
    max_image_bytes: int
    max_document_bytes: int
    max_document_pages: int
    # Whether the API fetches a remote image URL itself (Gemini takes bytes or its own files).
    takes_image_urls: bool
    # Whether it fetches a remote PDF itself: Anthropic's document blocks take a url source;
    # OpenAI's Chat Completions file part takes bytes or an uploaded file's id only.
    takes_document_urls: bool = False
    # Whether the provider scales a larger image down itself and bills the tokens of the size
    # it scaled to (OpenAI, Anthropic), so a larger original costs bytes but no tokens; Gemini
    # bills the tiles of the size it receives.
    scales_larger_images: bool = False


# OpenAI: PNG, JPEG, WEBP, non-animated GIF; at detail "high" the image is fitted within
# 2048x2048, then its short side to 768; 20 MB per image; PDF file inputs up to 100 pages
# and 32 MB per request.
OPENAI_LIMITS = ProviderLimits(
    label="OpenAI", image_types=frozenset({"image/png", "image/jpeg", "image/webp",
                                            "image/gif"}),
    max_long_edge=2048, max_short_edge=768, max_pixels=None, max_image_bytes=20 * MB,
    max_document_bytes=32 * MB, max_document_pages=100, takes_image_urls=True,
    scales_larger_images=True)
# Anthropic: JPEG, PNG, GIF, WEBP; an image past 1568 px on its long edge or about 1.15
# megapixels is scaled down before the model sees it; 5 MB per image through the API; PDF
# documents up to 100 pages in a 32 MB request.
ANTHROPIC_LIMITS = ProviderLimits(
    label="Anthropic", image_types=frozenset({"image/jpeg", "image/png", "image/gif",
                                               "image/webp"}),
    max_long_edge=1568, max_short_edge=None, max_pixels=1_150_000, max_image_bytes=5 * MB,
    max_document_bytes=32 * MB, max_document_pages=100, takes_image_urls=True,
    takes_document_urls=True, scales_larger_images=True)
# Gemini: PNG, JPEG, WEBP, HEIC, HEIF; inline data up to 20 MB per request; PDFs up to
# 1000 pages. Gemini bills 258 tokens per 768x768 tile, so referee keeps the long edge at
# 3072 (4x4 tiles) rather than sending a camera's full resolution.
GEMINI_LIMITS = ProviderLimits(
    label="Gemini", image_types=frozenset({"image/png", "image/jpeg", "image/webp",
                                            "image/heic", "image/heif"}),
    max_long_edge=3072, max_short_edge=None, max_pixels=None, max_image_bytes=20 * MB,
    max_document_bytes=20 * MB, max_document_pages=1000, takes_image_urls=False)


def fitted_size(width: int, height: int, limits: ProviderLimits) -> tuple[int, int]:
    """The size an image is scaled to (aspect ratio kept) to fit ``limits``; never enlarged."""
    scale = min(1.0, limits.max_long_edge / max(width, height))
    if limits.max_short_edge is not None:
        scale = min(scale, limits.max_short_edge / min(width, height))
    if limits.max_pixels is not None and width * height > limits.max_pixels:
        scale = min(scale, (limits.max_pixels / (width * height)) ** 0.5)
    if scale >= 1.0:
        return width, height
    return max(1, int(width * scale)), max(1, int(height * scale))
