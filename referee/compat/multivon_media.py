"""multivon's content-bound media, read and written at the edge (design decision 15).

A multivon-eval user binds the exact bytes a vision evaluator grades to a case: a
``MediaArtifact`` is a descriptor (schema ``multivon.media/v1``: the bytes' SHA-256 and size,
their media type, what a parser measured in them, the caller's provenance and a digest over all
of it), ``with_media(case, *artifacts)`` puts the descriptors in the case's metadata under
``multivon_media_v1``, and a resolver hands the bytes back when the case is graded, checked
against the descriptor first. referee keeps that shape here: its own cases carry typed content
parts (``referee.content``) instead, and nothing in the core reads these keys.

What referee measures is what Pillow and pypdf (the ``images`` extra) read: an image's width,
height and EXIF orientation, a PDF's page count. Audio and video descriptors are accepted, as
multivon accepts them, but referee does not probe them (their properties are kept as given, and
a capture records none); the vision evaluators refuse them in one line.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from referee.case import EvalCase
from referee.content._fit import require
from referee.content._media import data_url
from referee.content._parts import ContentError

__all__ = ["MEDIA_KEY", "MEDIA_SCHEMA", "MediaArtifact", "case_media", "media_sources",
           "with_media"]

MEDIA_KEY = "multivon_media_v1"
MEDIA_SCHEMA = "multivon.media/v1"
DEFAULT_MAX_BYTES = 32 * 1024 * 1024

# Every media type a descriptor may name; the vision evaluators take the first two kinds only.
IMAGE_FORMATS = {"image/png": "PNG", "image/jpeg": "JPEG", "image/webp": "WEBP"}
PDF = "application/pdf"
TIME_BASED = frozenset({"audio/wav", "audio/mpeg", "video/mp4"})
MEDIA_TYPES = frozenset({*IMAGE_FORMATS, PDF, *TIME_BASED})

_FIELDS = frozenset({"schema", "sha256", "size_bytes", "media_type", "properties", "probe",
                     "provenance"})
_IMAGE_PROPERTIES = frozenset({"width", "height", "orientation"})
_AUDIO_PROPERTIES = frozenset({"duration_seconds", "stream_index", "sample_rate", "channels"})
_VIDEO_PROPERTIES = frozenset({"duration_seconds", "stream_index", "width", "height"})
# Past this many pixels an image is not decoded (a decompression bomb is not a picture to grade).
MAX_PIXELS = 40_000_000
EXIF_ORIENTATION = 274


def descriptor_json(value: Any) -> str:
    """The one JSON text of a descriptor, as multivon digests it: sorted keys, no spaces,
    UTF-8 kept, and nothing JSON cannot hold (NaN, a non-string key, an object) let through."""
    _check_portable(value, "descriptor")
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"media descriptor is not portable JSON: {exc}") from None


def _check_portable(value: Any, where: str) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"media descriptor field {where} has a non-string key {key!r}")
            _check_portable(item, f"{where}.{key}")
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check_portable(item, f"{where}[{index}]")


def descriptor_digest(value: Any) -> str:
    return hashlib.sha256(descriptor_json(value).encode("utf-8")).hexdigest()


def _library_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown"


def check_properties(media_type: str, properties: dict[str, Any]) -> None:
    """Refuse properties that do not fit their media type, in one line naming the field."""
    if media_type in TIME_BASED:
        if not properties:  # captured by referee, which does not probe audio or video
            return
        expected = _VIDEO_PROPERTIES if media_type.startswith("video/") else _AUDIO_PROPERTIES
    else:
        expected = _IMAGE_PROPERTIES if media_type in IMAGE_FORMATS else frozenset({"pages"})
    if set(properties) != expected:
        raise ValueError(f"media properties of {media_type} must be {sorted(expected)}, got "
                         f"{sorted(properties)}")
    for name, value in properties.items():
        if name == "duration_seconds":
            if value is not None and (isinstance(value, bool)
                                      or not isinstance(value, (int, float))
                                      or not math.isfinite(value) or value <= 0):
                raise ValueError(f"media property duration_seconds must be a positive finite "
                                 f"number or null, got {value!r}")
            continue
        least = 0 if name == "stream_index" else 1
        if type(value) is not int or value < least:
            raise ValueError(f"media property {name} must be an integer of at least {least}, "
                             f"got {value!r}")
    if media_type in IMAGE_FORMATS and not 1 <= properties["orientation"] <= 8:
        raise ValueError(f"media property orientation must be an EXIF orientation 1-8, got "
                         f"{properties['orientation']!r}")


def probe(content: bytes, media_type: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(properties, how they were measured) of ``content``: Pillow for images, pypdf for PDFs;
    audio and video are not measured here."""
    if media_type in IMAGE_FORMATS:
        return _probe_image(content, media_type)
    if media_type == PDF:
        pypdf = require("pypdf")
        try:
            pages = len(pypdf.PdfReader(io.BytesIO(content)).pages)
        except Exception as exc:  # pypdf's errors for a damaged file vary by version
            raise ValueError(f"media bytes are not a readable PDF: {exc}") from None
        properties = {"pages": pages}
        how = {"library": "pypdf", "version": _library_version("pypdf"),
               "scope": "document open and page count; pages not rendered"}
    else:
        properties = {}
        how = {"library": "none", "version": "",
               "scope": "SHA-256 and size only; referee does not probe audio or video"}
    check_properties(media_type, properties)
    return properties, how


def _probe_image(content: bytes, media_type: str) -> tuple[dict[str, Any], dict[str, Any]]:
    pil = require("PIL.Image")
    try:
        with pil.open(io.BytesIO(content)) as image:
            if image.format != IMAGE_FORMATS[media_type]:
                raise ValueError(f"media bytes are {image.format or 'no known format'}, not "
                                 f"the {media_type} the descriptor names")
            if getattr(image, "n_frames", 1) != 1:
                raise ValueError(f"media bytes hold {image.n_frames} frames; bind one image")
            width, height = image.size
            if width * height > MAX_PIXELS:
                raise ValueError(f"image is {width}x{height}, past the {MAX_PIXELS:,} pixel "
                                 "probe limit")
            orientation = image.getexif().get(EXIF_ORIENTATION, 1)
            image.load()  # a truncated file fails here, not in front of the judge
    except (pil.UnidentifiedImageError, OSError, SyntaxError) as exc:
        raise ValueError(f"media bytes are not a readable {media_type} image: {exc}") from None
    properties = {"width": width, "height": height, "orientation": orientation}
    check_properties(media_type, properties)
    return properties, {"library": "Pillow", "version": _library_version("Pillow"),
                        "scope": "single decoded image"}


class MediaArtifact:
    """One immutable media descriptor (not the bytes, and no proof of where they came from).

    ``capture`` measures bytes the caller supplies; ``from_dict`` reads a descriptor, checking
    its fields and digest (not that the bytes exist); ``verify`` checks bytes against it before
    they are graded. Provenance and probe values are the caller's and are not authenticated.
    """

    __slots__ = ("_text",)
    _text: str

    def __init__(self, text: str) -> None:
        data = json.loads(text)
        _check_descriptor(data)
        object.__setattr__(self, "_text", text)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("MediaArtifact is immutable: capture or bind a new one")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MediaArtifact) and other._text == self._text

    def __hash__(self) -> int:
        return hash(self._text)

    def __repr__(self) -> str:
        data = self.data
        return (f"MediaArtifact({data['media_type']}, {data['size_bytes']} bytes, "
                f"sha256={data['sha256'][:12]})")

    @classmethod
    def capture(cls, content: bytes, media_type: str, *, provenance: dict[str, Any] | None = None,
                max_bytes: int = DEFAULT_MAX_BYTES) -> MediaArtifact:
        """Describe ``content`` (bytes the caller read; no path or URL is resolved here)."""
        if not isinstance(content, bytes) or not content:
            raise ValueError("MediaArtifact.capture: content must be non-empty bytes")
        if type(max_bytes) is not int or max_bytes < 1:
            raise ValueError(f"MediaArtifact.capture: max_bytes must be a positive integer, "
                             f"got {max_bytes!r}")
        if len(content) > max_bytes:
            raise ValueError(f"MediaArtifact.capture: {len(content):,} bytes is past max_bytes="
                             f"{max_bytes:,}")
        if media_type not in MEDIA_TYPES:
            raise ValueError(f"MediaArtifact.capture: unsupported media type {media_type!r} "
                             f"(expected one of {', '.join(sorted(MEDIA_TYPES))})")
        properties, how = probe(content, media_type)
        body = {"schema": MEDIA_SCHEMA, "sha256": hashlib.sha256(content).hexdigest(),
                "size_bytes": len(content), "media_type": media_type,
                "properties": properties, "probe": how, "provenance": dict(provenance or {})}
        return cls.from_dict({**body, "digest": descriptor_digest(body)})

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MediaArtifact:
        if not isinstance(data, dict):
            raise TypeError(f"a media descriptor is a mapping, not {type(data).__name__}")
        return cls(descriptor_json(data))

    @property
    def data(self) -> dict[str, Any]:
        """The descriptor as a new dict (changing it changes no artifact)."""
        return json.loads(self._text)  # type: ignore[no-any-return]

    @property
    def id(self) -> str:
        # The digest covers provenance too: the same page bytes in two roles stay two artifacts.
        return "urn:multivon:media:" + self.data["digest"]

    @property
    def media_type(self) -> str:
        return str(self.data["media_type"])

    @property
    def sha256(self) -> str:
        return str(self.data["sha256"])

    def verify(self, content: bytes) -> bytes:
        """``content`` itself when it is the bound bytes (size, SHA-256, and what the parser
        measures in them again); else ValueError in one line."""
        data = self.data
        if not isinstance(content, bytes):
            raise ValueError(f"{self.id}: the resolver gave {type(content).__name__}, not bytes")
        if len(content) != data["size_bytes"] or hashlib.sha256(content).hexdigest() != \
                data["sha256"]:
            raise ValueError(f"bound {self.media_type} {data['sha256'][:12]}: the bytes given "
                             f"({len(content):,} bytes) do not match the bound content "
                             f"({data['size_bytes']:,} bytes, sha256 {data['sha256']})")
        if self.media_type not in TIME_BASED:
            measured, _ = probe(content, self.media_type)
            if measured != data["properties"]:
                raise ValueError(f"bound {self.media_type} {data['sha256'][:12]}: its "
                                 f"properties measure {measured} now, not the bound "
                                 f"{data['properties']}")
        return content

    def data_uri(self, content: bytes) -> str:
        """The verified bytes as a ``data:`` URL."""
        return data_url(self.media_type, self.verify(content))


def _check_descriptor(data: Any) -> None:
    if not isinstance(data, dict):
        raise TypeError(f"a media descriptor is a JSON object, not {type(data).__name__}")
    body = dict(data)
    claimed = body.pop("digest", None)
    if set(body) != _FIELDS:
        raise ValueError(f"media descriptor fields must be {sorted(_FIELDS | {'digest'})}, got "
                         f"{sorted(data)}")
    if body["schema"] != MEDIA_SCHEMA:
        raise ValueError(f"media descriptor schema must be {MEDIA_SCHEMA!r}, got "
                         f"{body['schema']!r}")
    if claimed != descriptor_digest(body):
        raise ValueError("media descriptor digest does not match its fields (edited after "
                         "capture?)")
    sha = body["sha256"]
    if not isinstance(sha, str) or len(sha) != 64 or set(sha) - set("0123456789abcdef"):
        raise ValueError(f"media descriptor sha256 must be 64 lowercase hex digits, got {sha!r}")
    if type(body["size_bytes"]) is not int or body["size_bytes"] < 1:
        raise ValueError(f"media descriptor size_bytes must be a positive integer, got "
                         f"{body['size_bytes']!r}")
    if body["media_type"] not in MEDIA_TYPES:
        raise ValueError(f"media descriptor media_type {body['media_type']!r} is not one of "
                         f"{', '.join(sorted(MEDIA_TYPES))}")
    for name in ("properties", "probe", "provenance"):
        if not isinstance(body[name], dict):
            raise ValueError(f"media descriptor {name} must be an object")
    check_properties(body["media_type"], body["properties"])


def case_media(case: EvalCase) -> tuple[MediaArtifact, ...]:
    """The artifacts bound to ``case``, in bound order (none when nothing is bound)."""
    bound = (case.metadata or {}).get(MEDIA_KEY, [])
    if not isinstance(bound, list):
        raise TypeError(f"case.metadata[{MEDIA_KEY!r}] must be an ordered list of media "
                        f"descriptors, not {type(bound).__name__}")
    return tuple(MediaArtifact.from_dict(item) for item in bound)


def with_media(case: EvalCase, *artifacts: MediaArtifact) -> EvalCase:
    """A copy of ``case`` whose metadata (and so its identity) holds the descriptors, in order."""
    if MEDIA_KEY in (case.metadata or {}):
        raise ValueError("case already has bound media; make a new revision of the case to "
                         "bind other media")
    if not artifacts:
        raise ValueError("with_media: give at least one MediaArtifact")
    for index, artifact in enumerate(artifacts):
        if not isinstance(artifact, MediaArtifact):
            raise TypeError(f"with_media: artifact {index} is a {type(artifact).__name__}, not "
                            "a MediaArtifact")
    bound = case.model_copy(update={"metadata": {**(case.metadata or {}),
                                                 MEDIA_KEY: [a.data for a in artifacts]}})
    case_media(bound)
    return bound


MediaResolver = Callable[[MediaArtifact], bytes]


def resolved_media(case: EvalCase, resolver: MediaResolver | None
                   ) -> list[tuple[MediaArtifact, bytes]]:
    """Each bound artifact with its verified bytes, in bound order; [] when nothing is bound.
    A resolver is required: bound media is graded from checked bytes or not at all."""
    artifacts = case_media(case)
    if not artifacts:
        return []
    if resolver is None:
        raise ContentError("this case binds media (with_media), and the evaluator has no "
                           "media_resolver to read its bytes",
                           expected="media_resolver=<a function from MediaArtifact to bytes>")
    found = []
    for artifact in artifacts:
        try:
            found.append((artifact, artifact.verify(resolver(artifact))))
        except ValueError as exc:
            raise ContentError(str(exc)) from None
    return found


def media_sources(case: EvalCase, resolver: MediaResolver | None) -> tuple[str, ...]:
    """The bound media as verified ``data:`` URLs, in bound order; () when nothing is bound.
    Bytes that no longer match their descriptor are refused here, before any judge sees them."""
    return tuple(data_url(artifact.media_type, content) for artifact, content
                 in resolved_media(case, resolver))
