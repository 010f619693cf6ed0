"""What a blob of bytes is: its media type read from its first bytes, and data URLs.

Standard library only: the data model reads parts through this module, and ``import referee``
must not load Pillow.
"""

from __future__ import annotations

import base64
import binascii
import re

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp",
                         "image/tiff", "image/heic", "image/heif"})
DOCUMENT_TYPES = frozenset({"application/pdf"})

# Magic numbers at the start of each file type referee reads (the formats' own specifications).
_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
    (b"BM", "image/bmp"),
    (b"II*\x00", "image/tiff"),
    (b"MM\x00*", "image/tiff"),
)

_EXTENSIONS = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
               ".gif": "image/gif", ".webp": "image/webp", ".bmp": "image/bmp",
               ".tif": "image/tiff", ".tiff": "image/tiff", ".heic": "image/heic",
               ".heif": "image/heif", ".pdf": "application/pdf",
               # Named so that a file of a type referee refuses is refused by its name.
               ".svg": "image/svg+xml", ".svgz": "image/svg+xml"}

_DATA_URL = re.compile(r"^data:(?P<type>[\w.+-]+/[\w.+-]+)?(?P<params>(?:;[^,;]*)*),", re.ASCII)


def sniff_media_type(data: bytes) -> str | None:
    """The media type the bytes' signature names; None when referee does not know it."""
    for signature, media_type in _SIGNATURES:
        if data.startswith(signature):
            return media_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[4:8] == b"ftyp" and data[8:12] in (b"heic", b"heix", b"mif1", b"heim", b"heis"):
        return "image/heic" if data[8:12] != b"mif1" else "image/heif"
    return None


def media_type_of_name(name: str) -> str | None:
    """The media type a file name's extension suggests."""
    dot = name.rfind(".")
    return _EXTENSIONS.get(name[dot:].lower()) if dot >= 0 else None


def is_data_url(value: str) -> bool:
    return value[:5].lower() == "data:"


def parse_data_url(value: str) -> tuple[str | None, bytes]:
    """(declared media type, bytes) of a ``data:`` URL; ValueError naming what is wrong."""
    match = _DATA_URL.match(value)
    if match is None:
        raise ValueError("a data URL reads data:<media type>[;base64],<data>")
    payload = value[match.end():]
    if ";base64" in (match.group("params") or "").lower():
        try:
            return match.group("type"), base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("the data URL's base64 payload does not decode") from None
    from urllib.parse import unquote_to_bytes

    return match.group("type"), unquote_to_bytes(payload)


def data_url(media_type: str, data: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


def human_size(size: int) -> str:
    """1536 -> '1.5 KB': sizes in errors, the way the providers state their limits."""
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"
