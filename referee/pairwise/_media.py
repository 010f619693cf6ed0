"""The images and PDFs a pairwise judge is shown besides the text: the case's (its input and
context; its reference's too when two runs' outputs are compared, while judged against the
reference they are that side's), then each response's, each group under a label naming the
response as the judge sees it (RESPONSE 1 or RESPONSE 2). The labels follow the order shown,
so when the pair is asked the other way round the images swap with their label.

A pair is judged outside a case's ``judging_content`` scope (two outputs, often of stored
runs), so its parts are found here and passed to the judge explicitly; a stored output keeps
only its parts' hashes, read back from its run's ``blobs/``.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from referee.content._blobs import BlobStore
from referee.content._load import find_parts
from referee.content._parts import ContentError, DocumentPart, ImagePart, TextPart, distinct_parts

Media = ImagePart | DocumentPart
Part = TextPart | ImagePart | DocumentPart

CASE_LABEL = "Images and documents of the case:"


def _side_label(shown_as: str) -> str:
    return f"Images and documents of {shown_as}:"


def _side_without(shown_as: str) -> str:
    return f"{shown_as} holds no images or documents."


@dataclass(frozen=True)
class PairMedia:
    """The media of a pair: the case's, and each output's (less what the case holds)."""

    case: tuple[Media, ...] = ()
    a: tuple[Media, ...] = ()
    b: tuple[Media, ...] = ()

    @classmethod
    def of(cls, case: Any, output_a: Any, output_b: Any, *, reference: Any = None) -> PairMedia:
        """The parts found in ``case`` and in each output (an ExecutionResult: its outputs,
        tool results, turns, metadata; side A's with ``reference``, a reference answer's
        media), as they are held (a stored part by its hash alone). An output's part the case
        holds too (its input echoed in a turn) counts as the case's."""
        referenced = distinct_parts(find_parts(reference))
        # The case holds its reference's media too (and a turn's copy of them): theirs are A's.
        shown = distinct_parts(find_parts(case), {p.content_key() for p in referenced})
        case_keys = {p.content_key() for p in shown}
        return cls(case=tuple(shown),
                   a=tuple(distinct_parts([*referenced, *find_parts(output_a)], case_keys)),
                   b=tuple(distinct_parts(find_parts(output_b), case_keys)))

    def with_bytes(self, *, run_dirs: Sequence[Path | str | None] = (),
                   restored: Iterable[Media] = ()) -> PairMedia:
        """These parts with their bytes: a part stored by hash alone takes them from
        ``restored`` (the judging scope's parts, read back already) or from the first of
        ``run_dirs`` whose blobs/ holds it; ContentError (one line) when none does."""
        source = _Bytes([BlobStore(d) for d in run_dirs if d], restored)
        return PairMedia(case=source.of(self.case), a=source.of(self.a), b=source.of(self.b))

    def __bool__(self) -> bool:
        return bool(self.case or self.a or self.b)

    def refs(self) -> dict[str, list[dict[str, Any]]]:
        """The parts as a comparison's JSON names them: hash, type, size and path, never
        their bytes; only the groups that hold any."""
        def ref(part: Media) -> dict[str, Any]:
            shown = part.model_dump(mode="json", exclude={"data"}, exclude_none=True)
            return {**shown, **({"bytes": part.size} if part.size is not None else {})}

        return {side: [ref(p) for p in parts] for side, parts
                in (("case", self.case), ("a", self.a), ("b", self.b)) if parts}

    def keys(self, side: Literal["a", "b"]) -> tuple[str, ...]:
        """What tells one side's media from another's: each part's content hash, in order."""
        return tuple(p.content_key() for p in (self.a if side == "a" else self.b))

    def parts(self, first: Literal["a", "b"], names: tuple[str, str]) -> list[Part]:
        """The parts of one request: the case's, then the side shown first (as ``names[0]``)
        and the other (as ``names[1]``), each after its label. None when no side holds any."""
        if not self:
            return []
        shown: list[Part] = []
        if self.case:
            shown += [TextPart(text=CASE_LABEL), *self.case]
        if self.a or self.b:
            order = (self.a, self.b) if first == "a" else (self.b, self.a)
            for media, name in zip(order, names):
                shown += ([TextPart(text=_side_label(name)), *media] if media
                          else [TextPart(text=_side_without(name))])
        return shown


class _Bytes:
    """Where a part stored by hash alone finds its bytes again."""

    def __init__(self, stores: Sequence[BlobStore], restored: Iterable[Media]) -> None:
        self.stores = stores
        self.restored = {p.content_key(): p for p in restored if p.data is not None}

    def of(self, parts: Sequence[Media]) -> tuple[Media, ...]:
        return tuple(self._with_bytes(part) for part in parts)

    def _with_bytes(self, part: Media) -> Media:
        if part.data is not None or part.url is not None:
            return part
        known = self.restored.get(part.content_key())
        if known is not None:
            return known
        for store in self.stores:
            if part.sha256 and store.path_of(part.sha256).is_file():
                return store.restore(part)
        where = " or ".join(str(store.root) for store in self.stores) or "no run directory"
        raise ContentError(f"{part.type} {part.label()} is stored by hash only and its bytes "
                           f"are in no run's blobs/ (looked in {where})")
