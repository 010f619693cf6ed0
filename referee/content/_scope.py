"""The images and documents of the case being scored, for every judge request made while its
criteria run: the engine opens ``judging_content(actual, expected)`` around a case's criteria,
and the judge layer adds ``case_parts()`` to each request that names no parts of its own. So
every judged criterion family (the QAG evaluators, GEval, CustomRubric, the AgentEvaluator LLM
criteria) shows the judge what the case and its output hold, without each building it.

The parts are found on the first judge request of the case, once, and only then: a case judged
by no judge, or holding no images, costs one walk of its values at most.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from referee.content._blobs import BlobStore
from referee.content._load import find_parts
from referee.content._parts import DocumentPart, ImagePart, distinct_parts


class _CaseContent:
    def __init__(self, actual: Any, expected: Any, blobs: BlobStore | None) -> None:
        self._sources = (expected, actual)  # what the case gives, then what the model made
        self._blobs = blobs
        self._parts: tuple[ImagePart | DocumentPart, ...] | None = None

    def parts(self) -> tuple[ImagePart | DocumentPart, ...]:
        if self._parts is None:
            found = distinct_parts(part for source in self._sources
                                   for part in find_parts(source))
            self._parts = tuple(self._with_bytes(part) for part in found)
        return self._parts

    def _with_bytes(self, part: ImagePart | DocumentPart) -> ImagePart | DocumentPart:
        """A stored output's part (its hash, no bytes: a re-scored run) read back from the
        run's blobs/."""
        if part.data is None and part.url is None and self._blobs is not None:
            return self._blobs.restore(part)
        return part


_CASE_CONTENT: ContextVar[_CaseContent | None] = ContextVar("referee_case_content", default=None)


@contextmanager
def judging_content(actual: Any, expected: Any, run_dir: Path | str | None = None
                    ) -> Iterator[None]:
    """Judge requests made inside show the judge the images and PDFs of ``expected`` (the
    case) and ``actual`` (its output), each once; a part stored by hash alone is read back
    from ``run_dir``'s blobs/."""
    token = _CASE_CONTENT.set(_CaseContent(actual, expected,
                                           BlobStore(run_dir) if run_dir else None))
    try:
        yield
    finally:
        _CASE_CONTENT.reset(token)


def case_parts() -> tuple[ImagePart | DocumentPart, ...]:
    """The images and PDFs of the case being scored; none outside a case."""
    content = _CASE_CONTENT.get()
    return () if content is None else content.parts()


def with_stored_bytes(part: ImagePart | DocumentPart) -> ImagePart | DocumentPart:
    """``part`` with its bytes: one stored by hash alone (a re-scored run's) is read back from
    the blobs/ of the run whose case is being scored; any other part as it is."""
    content = _CASE_CONTENT.get()
    return part if content is None else content._with_bytes(part)
