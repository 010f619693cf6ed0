"""Reading content parts from what users and other tools write.

A case file names an image by a path relative to the case file, a ``data:`` URL or a remote URL;
a recorded conversation carries the provider's own part shapes (OpenAI Chat Completions and
Responses, Anthropic, Gemini/ADK). Each is read into the one part model. A problem is one
line naming the file, the field and what was expected.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from referee.content._media import DOCUMENT_TYPES, media_type_of_name, sniff_media_type
from referee.content._parts import ContentError, DocumentPart, ImagePart, TextPart

Part = TextPart | ImagePart | DocumentPart

_TEXT_TYPES = frozenset({"text", "input_text", "output_text"})
_SHORTHANDS = {"image": "image", "document": "document", "pdf": "document"}
_GEMINI_INLINE = ("inline_data", "inlineData")
_GEMINI_FILE = ("file_data", "fileData")


def is_part(value: Any) -> bool:
    """Whether ``value`` reads as a non-text content part in any of the shapes ``load_part``
    takes (so the data model can tell a list of parts from a list of anything else)."""
    if isinstance(value, (ImagePart, DocumentPart)):
        return True
    if not isinstance(value, Mapping):
        return False
    kind = value.get("type")
    if kind in ("image", "document", "image_url", "input_image", "file", "input_file"):
        return True
    if kind in ("blob", "uri") and "modality" in value:
        return True
    # A null key is none: Gemini's dumps fill every part field, ``inline_data: null`` included.
    return any(value.get(key) is not None
               for key in (*_SHORTHANDS, *_GEMINI_INLINE, *_GEMINI_FILE))


def holds_media(value: Any) -> bool:
    """Whether ``value`` is an image or document part, or a list holding one (in any shape
    ``load_part`` reads)."""
    if isinstance(value, (list, tuple)):
        return any(is_part(item) for item in value)
    return is_part(value)


def media_content(value: Any, *, base_dir: Path | str | None = None, source: str | None = None,
                  field: str | None = None) -> list[Part] | None:
    """The parts of a message's content that holds an image or a document, else None (the
    value is then left as it is): a part, a list of parts, a Gemini/ADK Content
    (``{parts: [...], role}``) or a chat message whose content is a list of parts."""
    if holds_media(value):
        return load_parts(value if isinstance(value, (list, tuple)) else [value],
                          base_dir=base_dir, source=source, field=field)
    if isinstance(value, Mapping):
        key = "parts" if "parts" in value else "content" if "content" in value else None
        inner = value.get(key) if key else None
        if isinstance(inner, list) and holds_media(inner):
            return load_parts(inner, base_dir=base_dir, source=source,
                              field=f"{field}.{key}" if field else key)
    return None


def load_parts(value: Any, *, base_dir: Path | str | None = None, source: str | None = None,
               field: str | None = None) -> list[Part]:
    """A str, one part or a list of parts, read into parts (see ``load_part``)."""
    if isinstance(value, (list, tuple)):
        return [load_part(item, base_dir=base_dir, source=source,
                          field=f"{field}[{index}]" if field else f"[{index}]")
                for index, item in enumerate(value)]
    return [load_part(value, base_dir=base_dir, source=source, field=field)]


def load_part(value: Any, *, base_dir: Path | str | None = None, source: str | None = None,
              field: str | None = None) -> Part:
    """One part from a str (text), a part model, or a dict in referee's or a provider's shape.

    ``path`` entries are read relative to ``base_dir`` (the case file's folder); ``source`` and
    ``field`` name the file and the key in errors.
    """
    if isinstance(value, (TextPart, ImagePart, DocumentPart)):
        return value
    if isinstance(value, str):
        return TextPart(text=value)
    if not isinstance(value, Mapping):
        raise ContentError(f"a content part is text or a mapping, not {type(value).__name__}",
                           source=source, field=field,
                           expected="text, {type: image, path: ...} or a provider's part")
    reader = _Reader(Path(base_dir) if base_dir is not None else None, source, field)
    return reader.part(dict(value))


class _Reader:
    def __init__(self, base_dir: Path | None, source: str | None, field: str | None) -> None:
        self.base_dir = base_dir
        self.source = source
        self.field = field

    def fail(self, message: str, expected: str | None = None) -> ContentError:
        return ContentError(message, source=self.source, field=self.field, expected=expected)

    def part(self, data: dict[str, Any]) -> Part:
        kind = data.get("type")
        if kind == "input_file":  # Responses: its own file_data key is no Gemini file_data
            return self.media("document", {"url": data.get("file_data"),
                                           "name": data.get("filename")})
        if kind in ("image", "file") and data.keys() & {"base64", "source_type", "file_id"}:
            return self._langchain(kind, data)
        if kind in _TEXT_TYPES or (kind is None and set(data) == {"text"}):
            text = data.get("text")
            if not isinstance(text, str):
                raise self.fail("a text part's 'text' is not a string")
            return TextPart(text=text)
        for key in _GEMINI_INLINE:
            if data.get(key) is not None:
                return self._gemini_inline(data[key])
        for key in _GEMINI_FILE:
            if data.get(key) is not None:
                return self._gemini_file(data[key])
        if "source" in data and kind in ("image", "document"):
            return self._anthropic(kind, data)
        if kind == "image" and isinstance(data.get("image"), Mapping):  # OpenInference
            return self.media("image", {"url": data["image"].get("url")})
        if kind in ("blob", "uri") and "modality" in data:  # OTel GenAI message parts
            return self._genai(kind, data)
        if kind == "image_url":  # Chat Completions
            image_url = data.get("image_url")
            url = image_url.get("url") if isinstance(image_url, Mapping) else image_url
            return self.media("image", {"url": url})
        if kind == "input_image":  # Responses
            return self.media("image", {"url": data.get("image_url")})
        if kind == "file":  # Chat Completions
            file = data.get("file")
            file = file if isinstance(file, Mapping) else {}
            return self.media("document", {"url": file.get("file_data"),
                                           "name": file.get("filename")})
        for key, shorthand_kind in _SHORTHANDS.items():
            if key in data and kind is None:
                reference = data.pop(key)
                if not isinstance(reference, str):
                    raise self.fail(f"'{key}' names a path or a URL, not "
                                    f"{type(reference).__name__}")
                target = "url" if "://" in reference or reference.startswith("data:") else "path"
                return self.media(shorthand_kind, {**data, target: reference})
        if kind in ("image", "document") or (kind is None and "path" in data):
            return self.media(kind, data)
        raise self.fail(f"unknown content part type {kind!r}" if kind else
                        "a mapping that is no content part",
                        expected="text, image or document")

    def media(self, kind: str | None, data: dict[str, Any]) -> ImagePart | DocumentPart:
        data = {key: value for key, value in data.items() if value is not None}
        data.pop("type", None)
        for alias in ("mime_type", "mimeType"):  # MCP's image content: {type, data, mimeType}
            if alias in data:
                data.setdefault("media_type", data.pop(alias))
        path = data.get("path")
        # A part that already holds its bytes, a URL or a stored hash keeps ``path`` as where
        # it came from; only a bare path is read.
        if path is not None and not data.keys() & {"data", "url", "sha256"}:
            data["data"] = self._read(str(path), kind or "content")
            named = media_type_of_name(str(path))
            if named and not data.get("media_type") and sniff_media_type(data["data"]) is None:
                # Bytes in no format referee reads: the file's name says what it is (an SVG).
                data["media_type"] = named
        if kind is None:  # {path: ...} alone: the bytes say which
            sniffed = sniff_media_type(data.get("data") or b"")
            kind = "document" if sniffed in DOCUMENT_TYPES else "image"
        model = ImagePart if kind == "image" else DocumentPart
        try:
            return model.model_validate(data)
        except ContentError:
            raise
        except ValidationError as exc:
            first = exc.errors()[0]
            message = str(first.get("msg", exc)).removeprefix("Value error, ")
            where = ".".join(str(p) for p in first.get("loc", ()))
            name = f" ({path})" if path else ""
            raise self.fail(f"{kind} part{name}: {message}" + (f" at '{where}'" if where
                                                                 else "")) from None

    def _read(self, path: str, kind: str) -> bytes:
        target = Path(path).expanduser()
        if not target.is_absolute() and self.base_dir is not None:
            target = self.base_dir / target
        try:
            return target.read_bytes()
        except FileNotFoundError:
            raise self.fail(f"{kind} file not found: {path}"
                            + (f" (looked in {os.path.abspath(target.parent)})"
                               if self.base_dir else "")) from None
        except OSError as exc:
            raise self.fail(f"cannot read {kind} file {path}: {exc.strerror or exc}") from None

    def _gemini_inline(self, blob: Any) -> ImagePart | DocumentPart:
        blob = blob if isinstance(blob, Mapping) else {}
        media_type = blob.get("mime_type") or blob.get("mimeType") or ""
        raw = blob.get("data")
        kind = "document" if media_type in DOCUMENT_TYPES else "image"
        return self.media(kind, {"media_type": media_type, "data": raw})

    def _gemini_file(self, blob: Any) -> ImagePart | DocumentPart:
        blob = blob if isinstance(blob, Mapping) else {}
        media_type = blob.get("mime_type") or blob.get("mimeType") or ""
        kind = "document" if media_type in DOCUMENT_TYPES else "image"
        return self.media(kind, {"media_type": media_type,
                                 "url": blob.get("file_uri") or blob.get("fileUri")})

    def _genai(self, shape: str, data: dict[str, Any]) -> ImagePart | DocumentPart:
        media_type = data.get("mime_type") or data.get("mimeType") or ""
        modality = data.get("modality")
        if modality != "image" and media_type not in DOCUMENT_TYPES:
            raise self.fail(f"{modality} parts are not images or PDFs",
                            expected="an image or a PDF")
        kind = "document" if media_type in DOCUMENT_TYPES else "image"
        if shape == "blob":
            return self.media(kind, {"media_type": media_type, "data": data.get("content")})
        return self.media(kind, {"media_type": media_type, "url": data.get("uri")})

    def _anthropic(self, kind: str, data: dict[str, Any]) -> ImagePart | DocumentPart:
        source = data["source"] if isinstance(data["source"], Mapping) else {}
        if source.get("type") == "base64":
            return self.media(kind, {"media_type": source.get("media_type"),
                                     "data": source.get("data"), "name": data.get("title")}
                              if kind == "document" else
                              {"media_type": source.get("media_type"), "data": source.get("data")})
        if source.get("type") == "url":
            return self.media(kind, {"url": source.get("url")})
        raise self.fail(f"an Anthropic {kind} source of type {source.get('type')!r} holds no "
                        "bytes referee can read", expected="base64 or url")

    def _langchain(self, kind: str, data: dict[str, Any]) -> ImagePart | DocumentPart:
        """LangChain's standard content blocks: ``{type: image|file, base64|url, mime_type}``
        (v1) or ``{..., source_type: base64|url, data|url}`` (v0)."""
        media_type = data.get("mime_type") or ""
        media = "document" if kind == "file" or media_type in DOCUMENT_TYPES else "image"
        found = data.get("extras")
        extras: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        fields: dict[str, Any] = {"media_type": media_type,
                                  "data": data.get("base64", data.get("data")),
                                  "url": data.get("url")}
        if media == "document":
            fields["name"] = data.get("filename") or extras.get("filename")
        if fields["data"] is None and fields["url"] is None:
            raise self.fail(f"a LangChain {kind} block of an uploaded file "
                            f"({data.get('file_id') or data.get('id')!r}) holds no bytes or URL "
                            "referee can read", expected="base64 or url")
        return self.media(media, fields)


_MAX_DEPTH = 32


def find_parts(value: Any, *, base_dir: Path | str | None = None) -> list[ImagePart | DocumentPart]:
    """Every image and document held anywhere in ``value``: part models, part mappings in any
    shape ``load_part`` reads, ``data:`` URLs of images or PDFs in strings, inside lists,
    mappings and pydantic models (an ExecutionResult's tool results, turns and metadata, a
    turn's message content), in order of appearance."""
    found: list[ImagePart | DocumentPart] = []
    _collect(value, found, Path(base_dir) if base_dir is not None else None, 0)
    return found


_SCALARS = (bool, int, float, bytes, type(None))


def _collect(value: Any, found: list[ImagePart | DocumentPart], base_dir: Path | None,
             depth: int) -> None:
    # Every case of a judged run is walked once: the common kinds are tested first, by type.
    kind = type(value)
    if kind is str:
        if value[:5].lower() == "data:" and ("image/" in value[:30] or "/pdf" in value[:30]):
            media = "document" if "/pdf" in value[:30] else "image"
            found.append(_Reader(base_dir, None, None).media(media, {"url": value}))
        return
    if kind in _SCALARS or depth > _MAX_DEPTH:
        return
    if kind is ImagePart or kind is DocumentPart:
        found.append(value)
    elif kind is dict or isinstance(value, Mapping):
        if is_part(value):
            part = load_part(value, base_dir=base_dir)
            if not isinstance(part, TextPart):
                found.append(part)
            return
        for item in value.values():
            _collect(item, found, base_dir, depth + 1)
    elif kind is list or kind is tuple:
        for item in value:
            _collect(item, found, base_dir, depth + 1)
    elif isinstance(value, (ImagePart, DocumentPart)):
        found.append(value)
    else:
        fields = getattr(kind, "__pydantic_fields__", None)  # a pydantic model: its fields
        if fields:
            for name in fields:
                _collect(getattr(value, name, None), found, base_dir, depth + 1)
