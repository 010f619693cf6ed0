"""The images and documents of each case, for the pages people read (the report's case
details, the viewer's labelling page): a thumbnail inline while the page's image budget
lasts, and a link to the file beside the run (blobs/) for documents and for images past the
budget, so a page of many image cases stays small and still works offline."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from referee.content._blobs import BlobStore
from referee.content._load import find_parts
from referee.content._parts import ContentError, DocumentPart, ImagePart
from referee.content._thumbs import thumbnail_data_url

# Inline thumbnails per report file, in bytes of data: URL. At about 5 KB a thumbnail that is
# some 400 distinct images; identical images repeat in the compressed case bodies for little.
THUMBNAIL_BUDGET = 2_000_000


class Gallery:
    """Builds each case's media list; one per rendered page, so the budget spans the page."""

    def __init__(self, run_dir: str | Path | None, budget: int | None = None,
                 blob_href: Callable[[str], str] | None = None) -> None:
        """``blob_href`` turns a hash into the link to its file: by default the path beside
        report.html in the run directory; the viewer serves blobs under the run's URL."""
        self.blobs = BlobStore(run_dir) if run_dir else None
        self.blob_href = blob_href or (lambda sha256: f"blobs/{sha256[:2]}/{sha256}")
        self.left = THUMBNAIL_BUDGET if budget is None else budget
        self.shown: dict[str, int] = {}  # sha256 -> bytes of its thumbnail already counted

    def of_case(self, case: Any, execution: Any) -> list[dict[str, Any]]:
        """The media of a case (``case``: what it gives) and of its output (``execution``)."""
        items: list[dict[str, Any]] = []
        seen: set[str] = set()
        for where, holder in (("case", case), ("output", execution)):
            try:
                parts = find_parts(holder)
            except ContentError as exc:  # a part that cannot be read is named, not fatal
                items.append({"where": where, "label": "unreadable part", "src": None,
                              "href": None, "note": str(exc), "kind": "image"})
                continue
            for part in parts:
                key = part.content_key()
                if key in seen:
                    continue
                seen.add(key)
                items.append(self._item(where, part))
        return items

    def _item(self, where: str, part: ImagePart | DocumentPart) -> dict[str, Any]:
        item: dict[str, Any] = {"where": where, "label": part.label(), "kind": part.type,
                                "src": None, "href": self._href(part), "note": ""}
        if isinstance(part, DocumentPart):
            item["note"] = "PDF" + (f", {part.pages} pages" if part.pages else "")
            return item
        data = part.data
        if data is None and self.blobs is not None and part.sha256:
            try:
                data = self.blobs.get(part.sha256)
            except ContentError as exc:
                item["note"] = str(exc)
                return item
        if data is None:
            item["note"] = "not stored with the run" if part.url is None else "remote image"
            item["href"] = item["href"] or part.url
            return item
        try:
            src = thumbnail_data_url(part if part.data is not None
                                     else part.model_copy(update={"data": data}))
        except ContentError as exc:
            item["note"] = str(exc)
            return item
        cost = 0 if part.sha256 in self.shown else len(src)
        if cost > self.left:
            item["note"] = "past the report's image budget: open the file"
            return item
        self.left -= cost
        self.shown[part.sha256 or ""] = len(src)
        item["src"] = src
        return item

    def _href(self, part: ImagePart | DocumentPart) -> str | None:
        if self.blobs is None or not part.sha256:
            return None
        if not self.blobs.path_of(part.sha256).is_file():
            return None
        return self.blob_href(part.sha256)
