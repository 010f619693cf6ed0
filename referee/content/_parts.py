"""Content parts: the text, images and documents (PDF) a case, an output or a judge prompt holds.

A part carries its bytes (or, for a remote image, only its URL) and the SHA-256 of those bytes.
The hash is what every cache key, blob file name and equality uses; the path a part was read
from is kept for people (the report names it) and never keys anything, so moving a case file
changes no verdict. A stored part may hold only its hash: its bytes then live in the run's
blob store (``_blobs``).

Standard library and pydantic only: the data model imports this, and ``import referee`` must
not load Pillow.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Collection, Iterable
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    field_serializer,
    model_serializer,
)

from referee._strict import StrictModel
from referee.content._media import (
    DOCUMENT_TYPES,
    IMAGE_TYPES,
    data_url,
    is_data_url,
    parse_data_url,
    sniff_media_type,
)
from referee.errors import InputError


class ContentError(InputError):
    """A part referee cannot take or a judge cannot be sent: a missing file, an unsupported
    media type, an oversized document, a judge without vision. One line, naming the part."""


# Names recorders write for a type referee knows by another (a declared type is all a remote
# part has to go by).
_MEDIA_TYPE_ALIASES = {"image/jpg": "image/jpeg", "image/pjpeg": "image/jpeg",
                       "image/x-png": "image/png"}


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# A dump made with ``context={IDENTITY: True}`` shows each image or document as what tells it
# apart (its type, media type and hash; a remote one's URL), never its bytes or the path it was
# read from: a case's eval_id hashes that dump, so moving a case file keeps the id, and
# hashing a case that holds a 5 MB image encodes no base64.
IDENTITY = "referee_content_identity"


class _Typed(StrictModel):
    """A part's dump always names its type, even where defaults are left out (the run store's
    lines): the type is how a stored value is known to be a part again."""

    @model_serializer(mode="wrap")
    def _with_type(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        if info.context and info.context.get(IDENTITY) and isinstance(self, _MediaPart):
            return self.identity()
        data = handler(self)
        if isinstance(data, dict):
            data["type"] = type(self).model_fields["type"].default
        return data


class TextPart(_Typed):
    type: Literal["text"] = "text"
    text: str


class _MediaPart(_Typed):
    """What images and documents share: bytes or a URL, their media type and their hash."""

    media_type: str = ""
    data: bytes | None = None
    # A remote reference (https://...), passed to providers that fetch URLs; referee itself
    # never fetches it (no network calls besides the judge and the model under test).
    url: str | None = None
    # Where the bytes came from (a path as the case file wrote it): shown to people, never a key.
    path: str | None = None
    sha256: str | None = None
    # A part fitted to a provider's limits (resized, re-encoded) names the part it came from;
    # the report shows the original.
    original_sha256: str | None = None

    _kind: ClassVar[str] = "media"
    _accepted: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def _normalise_input(cls, data: dict[str, Any]) -> dict[str, Any]:
        raw = data.get("data")
        if isinstance(raw, str):  # JSON holds bytes as base64 (what dumps write)
            # Gemini's and ADK's dumps (pydantic's ``ser_json_bytes="base64"``) write the
            # URL-safe alphabet.
            altchars = b"-_" if "-" in raw or "_" in raw else None
            try:
                data["data"] = base64.b64decode(raw, altchars=altchars, validate=True)
            except (binascii.Error, ValueError):
                raise ValueError(f"{cls._kind} 'data' is not base64 text") from None
        url = data.get("url")
        if isinstance(url, str) and is_data_url(url):
            declared, data["data"] = parse_data_url(url)
            data["url"] = None
            if declared and not data.get("media_type") and not data.get("mediaType"):
                data["media_type"] = declared
        return data

    def model_post_init(self, context: Any, /) -> None:
        if self.data is None:
            if self.url is None and self.sha256 is None:
                raise ValueError(f"{self._kind} part needs data, a url, a path or a stored "
                                 "sha256")
            if self.url is not None and not self.media_type:
                from referee.content._media import media_type_of_name

                self.media_type = media_type_of_name(self.url.split("?", 1)[0]) or ""
            self.media_type = _MEDIA_TYPE_ALIASES.get(self.media_type, self.media_type)
            if self.url is not None and self.media_type and \
                    self.media_type not in self._accepted:
                # A remote SVG: no provider takes it, and no judge should be sent it.
                raise ContentError(f"unsupported {self._kind} media type {self.media_type}",
                                   expected=", ".join(sorted(self._accepted)))
            return
        # The bytes decide: providers reject a declared type that does not match the data, and
        # every type referee accepts has a signature it reads.
        media_type = sniff_media_type(self.data)
        if media_type is None and self.media_type and self.media_type not in self._accepted:
            media_type = self.media_type  # refused below by its own name (an SVG, a video)
        if media_type is None:
            declared = f" (declared {self.media_type})" if self.media_type else ""
            raise ContentError(f"{self._kind} bytes are in no format referee reads{declared}",
                               expected=", ".join(sorted(self._accepted)))
        if media_type not in self._accepted:
            raise ContentError(f"unsupported {self._kind} media type {media_type}",
                               expected=", ".join(sorted(self._accepted)))
        self.media_type = media_type
        digest = sha256_hex(self.data)
        if self.sha256 is not None and self.sha256 != digest:
            raise ContentError(f"{self._kind} bytes do not match their sha256 {self.sha256}")
        self.sha256 = digest

    def __repr_args__(self) -> Any:
        # A part printed (a judge prompt's JSON of a tool result, a log line) names its size,
        # never its bytes.
        for key, value in super().__repr_args__():
            yield key, (f"<{len(value)} bytes>" if key == "data" and value is not None
                        else value)

    @field_serializer("data", when_used="json")
    def _data_as_base64(self, value: bytes | None) -> str | None:
        return None if value is None else base64.b64encode(value).decode("ascii")

    @property
    def size(self) -> int | None:
        return None if self.data is None else len(self.data)

    def as_data_url(self) -> str:
        """The part as a ``data:`` URL, or its remote URL when it has no bytes here."""
        if self.data is None:
            if self.url is None:
                raise ContentError(f"{self._kind} {self.sha256} has no bytes here: load it "
                                   "from its run's blob store first", source=self.path)
            return self.url
        return data_url(self.media_type, self.data)

    def content_key(self) -> str:
        """What tells two parts apart in a cache key: the bytes' hash, or the remote URL."""
        return f"sha256:{self.sha256}" if self.sha256 else f"url:{self.url}"

    def identity(self) -> dict[str, Any]:
        """What tells this part apart from another, as a case's eval_id hashes it."""
        found: dict[str, Any] = {"type": self._kind, "media_type": self.media_type}
        if self.sha256:
            found["sha256"] = self.sha256
        else:
            found["url"] = self.url
        return found

    def label(self) -> str:
        """How errors and the report name the part."""
        return self.path or self.url or f"{self._kind} {(self.sha256 or '')[:12]}"


class ImagePart(_MediaPart):
    type: Literal["image"] = "image"
    width: int | None = None
    height: int | None = None

    _kind: ClassVar[str] = "image"
    _accepted: ClassVar[frozenset[str]] = IMAGE_TYPES


class DocumentPart(_MediaPart):
    type: Literal["document"] = "document"
    # The file name sent with the document (OpenAI's file parts take one).
    name: str | None = None
    pages: int | None = None

    _kind: ClassVar[str] = "document"
    _accepted: ClassVar[frozenset[str]] = DOCUMENT_TYPES

    @property
    def filename(self) -> str:
        if self.name:
            return self.name
        if self.path:
            return self.path.replace("\\", "/").rsplit("/", 1)[-1]
        return f"document-{(self.sha256 or 'remote')[:12]}.pdf"


ContentPart = Annotated[TextPart | ImagePart | DocumentPart, Field(discriminator="type")]
MediaPart = ImagePart | DocumentPart


def distinct_parts(parts: Iterable[MediaPart],
                   leaving_out: Collection[str] = ()) -> list[MediaPart]:
    """``parts`` each once by content (the same image held by a case's input and its first
    turn, or shown again in a later turn, is one image), in order of first appearance, less
    those whose ``content_key()`` is in ``leaving_out``."""
    found: dict[str, MediaPart] = {}
    for part in parts:
        key = part.content_key()
        if key not in leaving_out:
            found.setdefault(key, part)
    return list(found.values())


def parts_key(parts: list[TextPart | ImagePart | DocumentPart]) -> list[str]:
    """The parts as a judge reply cache key sees them: text, and each media part's hash."""
    return [part.text if isinstance(part, TextPart)
            else f"{part.type}:{part.media_type}:{part.content_key()}" for part in parts]
