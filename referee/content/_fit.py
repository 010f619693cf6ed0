"""Parts fitted to what a provider takes, before they go into a judge request.

An image past the provider's useful size is scaled down, one in a format the provider does not
take (BMP, TIFF, HEIC for OpenAI, an animated GIF) is re-encoded, and one still over the byte
limit is re-encoded as JPEG at falling quality. The fitted part names the original
(``original_sha256``); the original is what the run stores and the report shows. A PDF is sent
as it is, or refused in one line when it is over the provider's byte or page limit.

Pillow and pypdf are the ``images`` extra, imported only here and only when a part is fitted.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import json
import logging
import re
import sys
import threading
import warnings
from typing import Any

from referee.content._limits import ProviderLimits, fitted_size
from referee.content._media import human_size, sniff_media_type
from referee.content._parts import ContentError, DocumentPart, ImagePart, TextPart

# Bump whenever fitting can give other bytes for the same part and limits (another size rule,
# encoder, quality step): the reply cache keys a request's parts by the originals and this
# signature, so replies judged on the old fitting stop matching.
FIT_VERSION = 1

_EXTRA_HINT = "pip install 'referee[images]'"
_BUFFER_NAME = re.compile(r"\s*<_io\.BytesIO object at 0x[0-9a-fA-F]+>")
_JPEG_QUALITIES = (90, 80, 65, 50)
_PACKAGES = {"PIL": "Pillow"}


def require(module: str) -> Any:
    """Import one of the ``images`` extra's libraries, or say in one line how to get it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        package = _PACKAGES.get(module.split(".")[0], module)
        raise ContentError(f"images and documents need {package}: {_EXTRA_HINT}") from None


def fit_part(part: TextPart | ImagePart | DocumentPart, limits: ProviderLimits
             ) -> TextPart | ImagePart | DocumentPart:
    """``part`` as it can be sent to a judge with these ``limits`` (itself when it fits)."""
    if isinstance(part, TextPart):
        return part
    if part.data is None:
        if part.url is None:
            raise ContentError(f"{part.label()} has no bytes here: a stored part, kept by "
                               "its hash (BlobStore(run_dir).restore reads it back)")
        if limits.takes_image_urls if isinstance(part, ImagePart) \
                else limits.takes_document_urls:
            return part  # fetched by the provider: its size and pages are the provider's
        raise ContentError(f"{limits.label} takes {part.type}s as bytes; {part.label()} is "
                           "only a URL here (give the file or a data: URL)")
    if isinstance(part, DocumentPart):
        return check_document(part, limits)
    return fit_image(part, limits)


def fit_signature(limits: ProviderLimits) -> str:
    """What decides how ``fit_part`` fits a part for these ``limits``, as text: the reply cache
    keys a request's original parts with it, so a cached reply is found without fitting."""
    return _signature(limits, FIT_VERSION)


@functools.lru_cache(maxsize=16)
def _signature(limits: ProviderLimits, version: int) -> str:
    fields = {name: sorted(value) if isinstance(value, frozenset) else value
              for name, value in dataclasses.asdict(limits).items()}
    return f"fit {version} " + json.dumps(fields, sort_keys=True, separators=(",", ":"))


def sent_size(raw_bytes: int) -> int:
    """An image's size as a request carries it: base64 text, 4 characters per 3 bytes.
    Anthropic measures its 5 MB per image on that text (a 4 MB file is refused), and the
    other providers' per-image limits hold inline data as base64 too."""
    return 4 * -(-raw_bytes // 3)


def open_image(data: bytes, label: str = "") -> Any:
    """Pillow's image of ``data``, its first frame loaded; one line naming ``label`` when it
    cannot be read (damaged bytes, a HEIC photo without Pillow's HEIF plugin)."""
    pil = require("PIL.Image")
    name = f"image {label}" if label else "image"
    if sniff_media_type(data) in ("image/heic", "image/heif"):
        try:  # Pillow reads HEIC/HEIF only through this plugin
            from pillow_heif import register_heif_opener  # type: ignore[import-not-found]
        except ImportError:
            raise ContentError(f"{name} is HEIC/HEIF, which Pillow reads only with the "
                               "pillow-heif plugin: pip install pillow-heif") from None
        register_heif_opener()
    try:
        with warnings.catch_warnings():
            # A scan or a panorama past Pillow's decompression-bomb warning (89 MP) is still a
            # picture the user gave; one over twice that is refused by Pillow below.
            warnings.simplefilter("ignore", pil.DecompressionBombWarning)
            image = pil.open(io.BytesIO(data))
            image.load()
    except Exception as exc:  # Pillow raises several unrelated types for damaged files
        # Pillow's "cannot identify image file <_io.BytesIO object at 0x...>" names a buffer.
        problem = _BUFFER_NAME.sub("", str(exc)) or type(exc).__name__
        raise ContentError(f"{name} cannot be decoded: {problem}") from None
    return image


def image_size(data: bytes) -> tuple[int, int]:
    image = open_image(data)
    return int(image.width), int(image.height)


def fit_image(part: ImagePart, limits: ProviderLimits) -> ImagePart:
    pil = require("PIL.Image")
    assert part.data is not None
    image = open_image(part.data, part.label())
    width, height = image.size
    target = fitted_size(width, height, limits)
    animated = bool(getattr(image, "is_animated", False))
    if (target == (width, height) and part.media_type in limits.image_types and not animated
            and sent_size(len(part.data)) <= limits.max_image_bytes):
        return part.model_copy(update={"width": width, "height": height})
    if animated:
        image.seek(0)  # the first frame: no provider reads an animation
    if target != (width, height):
        image = image.resize(target, pil.Resampling.LANCZOS)
    data, media_type = _encode(image, part, limits)
    if (limits.scales_larger_images and len(data) >= len(part.data) and not animated
            and part.media_type in limits.image_types
            and sent_size(len(part.data)) <= limits.max_image_bytes):
        # A flat screenshot can grow when scaled (the resampled edges defeat PNG's
        # compression); a provider that scales it itself sees the same pixels and bills the
        # same tokens, so the smaller original goes.
        return part.model_copy(update={"width": width, "height": height})
    if sent_size(len(data)) > limits.max_image_bytes:
        # Sizes as sent, in the measure the limit is held to.
        raise ContentError(f"image {part.label()} is {human_size(sent_size(len(data)))} even "
                           f"as JPEG at quality {_JPEG_QUALITIES[-1]}; {limits.label} takes at most "
                           f"{human_size(limits.max_image_bytes)}")
    return ImagePart(data=data, media_type=media_type, path=part.path, width=target[0],
                     height=target[1], original_sha256=part.sha256)


def _encode(image: Any, part: ImagePart, limits: ProviderLimits) -> tuple[bytes, str]:
    """PNG for images that need their alpha channel or are lossless already (diagrams,
    screenshots), JPEG for photos; JPEG at falling quality while the bytes are over the limit."""
    keep_lossless = part.media_type in ("image/png", "image/gif", "image/bmp", "image/tiff")
    has_alpha = image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info
    if (keep_lossless or has_alpha) and "image/png" in limits.image_types:
        out = io.BytesIO()
        image.save(out, format="PNG", optimize=True)
        if sent_size(out.tell()) <= limits.max_image_bytes:
            return out.getvalue(), "image/png"
    rgb = image.convert("RGB")
    data = b""
    for quality in _JPEG_QUALITIES:
        out = io.BytesIO()
        rgb.save(out, format="JPEG", quality=quality)
        data = out.getvalue()
        if sent_size(len(data)) <= limits.max_image_bytes:
            break
    return data, "image/jpeg"


class _QuietWhileCounting(logging.Filter):
    """Drops pypdf's log records ("EOF marker not found") made while this thread counts a
    PDF's pages: a damaged file is one ContentError naming it, not a stray unnamed line."""

    counting = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(self.counting, "active", False)


_QUIET = _QuietWhileCounting()


def count_pages(data: bytes, label: str) -> int:
    pypdf = require("pypdf")
    # pypdf logs each warning on its module's own logger, where a parent's filter never runs.
    for name in [name for name in sys.modules if name.partition(".")[0] == "pypdf"]:
        module_log = logging.getLogger(name)
        if _QUIET not in module_log.filters:
            module_log.addFilter(_QUIET)
    _QUIET.counting.active = True
    try:
        return len(pypdf.PdfReader(io.BytesIO(data)).pages)
    except Exception as exc:  # pypdf's errors for a damaged file vary by version
        raise ContentError(f"document {label} is not a readable PDF: {exc}") from None
    finally:
        _QUIET.counting.active = False


def check_document(part: DocumentPart, limits: ProviderLimits) -> DocumentPart:
    assert part.data is not None
    if len(part.data) > limits.max_document_bytes:
        raise ContentError(f"document {part.label()} is {human_size(len(part.data))}; "
                           f"{limits.label} takes PDFs up to "
                           f"{human_size(limits.max_document_bytes)}")
    pages = part.pages if part.pages is not None else count_pages(part.data, part.label())
    if pages > limits.max_document_pages:
        raise ContentError(f"document {part.label()} has {pages} pages; {limits.label} takes "
                           f"PDFs up to {limits.max_document_pages} pages")
    return part if part.pages == pages else part.model_copy(update={"pages": pages})
