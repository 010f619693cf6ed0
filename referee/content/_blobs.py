"""Content-addressed blob files beside a run: an image or a PDF is stored once, by its SHA-256,
however many cases, turns or outputs hold it, and a case line keeps only the hash.

Layout: ``<run dir>/blobs/<first two hex digits>/<sha256>``. A blob is written to a temporary
name and renamed into place, so a crash never leaves a torn blob under a real name, and two
writers of the same blob write the same bytes.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from referee.content._parts import (
    ContentError,
    DocumentPart,
    ImagePart,
    TextPart,
    sha256_hex,
)

BLOBS_DIR = "blobs"
_MEDIA_KINDS = frozenset({"image", "document"})


class BlobStore:
    def __init__(self, run_dir: Path | str) -> None:
        self.root = Path(run_dir) / BLOBS_DIR

    @classmethod
    def in_folder(cls, root: Path | str) -> BlobStore:
        """A store whose blobs lie under ``root`` itself (an exported labels file's
        ``<file>.blobs/``), in the same layout as a run's blobs/."""
        store = cls.__new__(cls)
        store.root = Path(root)
        return store

    def path_of(self, sha256: str) -> Path:
        if len(sha256) != 64 or not all(c in "0123456789abcdef" for c in sha256):
            raise ContentError(f"not a sha256 blob name: {sha256!r}")
        return self.root / sha256[:2] / sha256

    def put(self, data: bytes) -> str:
        """Store ``data`` (once) and return its sha256."""
        digest = sha256_hex(data)
        target = self.path_of(digest)
        if target.exists():
            return digest
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".", suffix=".part")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        return digest

    def get(self, sha256: str) -> bytes:
        target = self.path_of(sha256)
        try:
            data = target.read_bytes()
        except FileNotFoundError:
            raise ContentError(f"blob {sha256} is missing from {self.root}") from None
        if sha256_hex(data) != sha256:
            raise ContentError(f"blob {target} does not hash to its name (damaged)")
        return data

    def externalise(self, value: Any) -> Any:
        """``value`` with every image or document's bytes moved into the store: parts (models
        or their dumps, at any depth of lists and dicts) keep their hash and lose their data."""
        if isinstance(value, (ImagePart, DocumentPart)):
            return self._stored(value.model_dump(mode="python"))
        if isinstance(value, TextPart):
            return value.model_dump(mode="json")
        if isinstance(value, dict):
            if value.get("type") in _MEDIA_KINDS and value.get("data") is not None:
                return self._stored(dict(value))
            return {key: self.externalise(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.externalise(item) for item in value]
        return value

    def restore(self, part: ImagePart | DocumentPart | dict[str, Any]
                ) -> ImagePart | DocumentPart:
        """A stored part with its bytes read back from the store (checked against the hash)."""
        data = part.model_dump(mode="python") if not isinstance(part, dict) else dict(part)
        model = DocumentPart if data.get("type") == "document" else ImagePart
        if data.get("data") is None and data.get("sha256"):
            data["data"] = self.get(str(data["sha256"]))
        return model.model_validate(data)

    def _stored(self, data: dict[str, Any]) -> dict[str, Any]:
        raw = data.get("data")
        if isinstance(raw, str):  # a JSON dump: base64 text
            try:
                raw = (ImagePart if data.get("type") == "image" else DocumentPart
                       ).model_validate(data).data
            except ValueError:  # a mapping that only looks like a part: stored as it is
                return data
        if not isinstance(raw, bytes):
            raise ContentError(f"{data.get('type')} data is {type(raw).__name__}, not bytes")
        data["sha256"] = self.put(raw)
        data["data"] = None
        return {key: item for key, item in data.items() if item is not None}


# How a media part's dump starts its kind in compact JSON (pydantic's model_dump_json).
_MEDIA_MARKS = ('"type":"image"', '"type":"document"')


def externalise_json_line(line: str, run_dir: Path | str) -> str:
    """A compact JSON line (a stored case) with its images' and documents' bytes moved to the
    run's blob store; a line that holds none is returned untouched, without being parsed."""
    if not any(mark in line for mark in _MEDIA_MARKS):
        return line
    value = BlobStore(run_dir).externalise(json.loads(line))
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
