"""Small previews of images for people (the report, the viewer, the labelling view), and parts
shown without their bytes where a page prints a value as text."""

from __future__ import annotations

import io
from typing import Any

from referee.content._fit import open_image, require
from referee.content._media import human_size, is_data_url
from referee.content._parts import ContentError, DocumentPart, ImagePart

THUMBNAIL_EDGE = 160
_THUMBNAILS: dict[tuple[str, int], str] = {}
_MEDIA_KINDS = frozenset({"image", "document"})


def thumbnail_data_url(part: ImagePart, edge: int = THUMBNAIL_EDGE) -> str:
    """A ``data:`` URL of ``part`` scaled to fit ``edge`` pixels: PNG where the image has
    transparency or is a diagram already, JPEG otherwise (a few KB either way). Kept per
    content hash, so an image repeated across cases is scaled once."""
    key = (part.sha256 or "", edge)
    cached = _THUMBNAILS.get(key)
    if cached is not None:
        return cached
    if part.data is None:
        raise ContentError(f"{part.label()} has no bytes here to preview")
    pil = require("PIL.Image")
    from referee.content._media import data_url

    image = open_image(part.data, part.label())
    try:
        image.thumbnail((edge, edge), pil.Resampling.LANCZOS)
        has_alpha = image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info
        out = io.BytesIO()
        if has_alpha or image.mode == "P":
            image.save(out, format="PNG", optimize=True)
            url = data_url("image/png", out.getvalue())
        else:
            image.convert("RGB").save(out, format="JPEG", quality=70)
            url = data_url("image/jpeg", out.getvalue())
    except Exception as exc:  # Pillow raises several unrelated types for damaged files
        raise ContentError(f"image {part.label()} cannot be decoded: {exc}") from None
    if len(_THUMBNAILS) > 4096:
        _THUMBNAILS.clear()
    _THUMBNAILS[key] = url
    return url


def without_bytes(value: Any) -> Any:
    """``value`` for printing as text: each image or document (a part, its dump, a ``data:``
    URL) stands as its hash, type and size instead of its bytes."""
    if isinstance(value, (ImagePart, DocumentPart)):
        return _summary(value.model_dump(mode="python"))
    if isinstance(value, dict):
        if value.get("type") in _MEDIA_KINDS and value.get("data") is not None:
            return _summary(value)
        return {key: without_bytes(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [without_bytes(item) for item in value]
    if isinstance(value, str) and is_data_url(value) and len(value) > 200:
        return f"{value[:value.find(',') + 1]}… ({human_size(len(value))} of base64 not shown)"
    return value


def _summary(data: dict[str, Any]) -> dict[str, Any]:
    raw = data.get("data")
    shown = {key: item for key, item in data.items() if key != "data" and item is not None}
    if isinstance(raw, (bytes, str)):
        shown["bytes"] = len(raw) if isinstance(raw, bytes) else len(raw) * 3 // 4
    return shown
