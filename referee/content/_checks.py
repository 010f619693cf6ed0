"""Deterministic checks on images: equality by perceptual hash within a tolerance, and size and
format checks; plus the hook a user plugs a text extractor into (OCR, a PDF text layer).

A perceptual hash (the difference hash: a 9x8 greyscale thumbnail, one bit per pair of
neighbouring pixels, brighter or not) is the same for an image and its re-encoded, resized or
slightly recompressed copies, and far apart for different images; the Hamming distance
between two hashes is the tolerance a check sets. Pillow does the resampling; the ``imagehash``
package would add NumPy, SciPy and PyWavelets for the same 64 bits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from referee.content._fit import open_image, require
from referee.content._parts import ContentError, DocumentPart, ImagePart

HASH_BITS = 64
# Copies of one image (re-encoded as JPEG, resized to half) stay within this distance; two
# different photographs land near HASH_BITS / 2.
DEFAULT_MAX_DISTANCE = 10


def perceptual_hash(image: ImagePart | bytes) -> int:
    """The 64-bit difference hash of an image."""
    pil = require("PIL.Image")
    data = image if isinstance(image, bytes) else _bytes_of(image)
    small = open_image(data).convert("L").resize((9, 8), pil.Resampling.LANCZOS)
    pixels = small.tobytes()  # mode L: one byte per pixel, row by row
    bits = 0
    for row in range(8):
        for col in range(8):
            bits = (bits << 1) | (pixels[row * 9 + col] > pixels[row * 9 + col + 1])
    return bits


def hash_distance(first: int, second: int) -> int:
    return (first ^ second).bit_count()


def images_match(actual: ImagePart | bytes, expected: ImagePart | bytes,
                 max_distance: int = DEFAULT_MAX_DISTANCE) -> tuple[bool, int]:
    """(whether the two images look the same within ``max_distance`` bits, the distance)."""
    distance = hash_distance(perceptual_hash(actual), perceptual_hash(expected))
    return distance <= max_distance, distance


def image_problems(image: ImagePart, *, media_types: Iterable[str] | None = None,
                   min_width: int | None = None, min_height: int | None = None,
                   max_width: int | None = None, max_height: int | None = None,
                   max_bytes: int | None = None) -> list[str]:
    """What about ``image`` breaks the given bounds, one phrase each (empty: it meets them)."""
    from referee.content._fit import image_size

    problems: list[str] = []
    allowed = set(media_types) if media_types is not None else None
    if allowed is not None and image.media_type not in allowed:
        problems.append(f"format {image.media_type} is not one of {', '.join(sorted(allowed))}")
    data = _bytes_of(image)
    if max_bytes is not None and len(data) > max_bytes:
        problems.append(f"{len(data)} bytes is over {max_bytes}")
    width, height = image_size(data)
    for value, bound, what, over in ((width, min_width, "width", False),
                                     (height, min_height, "height", False),
                                     (width, max_width, "width", True),
                                     (height, max_height, "height", True)):
        if bound is not None and (value > bound if over else value < bound):
            problems.append(f"{what} {value} px is {'over' if over else 'under'} {bound} px")
    return problems


TextExtractor = Callable[[bytes], str]
_EXTRACTORS: dict[str, TextExtractor] = {}


def register_text_extractor(media_type: str, extractor: TextExtractor) -> None:
    """Plug in how text is read from a media type (an OCR engine for images, a PDF library for
    documents); text-based criteria then read what it returns for such parts."""
    _EXTRACTORS[media_type] = extractor


def extract_text(part: ImagePart | DocumentPart) -> str | None:
    """The part's text by the extractor registered for its media type; None when none is."""
    extractor = _EXTRACTORS.get(part.media_type)
    return None if extractor is None else extractor(_bytes_of(part))


def _bytes_of(part: ImagePart | DocumentPart) -> bytes:
    if part.data is None:
        raise ContentError(f"{part.label()} has no bytes here (a URL, or a stored part not "
                           "read back from its blob store)")
    return part.data
