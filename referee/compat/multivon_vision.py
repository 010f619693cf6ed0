"""multivon's ``call_vision(prompt, sources, judge)`` (one vision request, made through
referee's judge layer) and ``graded_media`` (the images its vision evaluators grade).

multivon names an image or PDF by a string: a file path (read relative to the current
directory), a ``data:`` URL or an ``http(s)`` URL. Each is read into a content part here, and
the request goes through ``Judge.complete(..., parts=...)``: each provider's own wire shape,
fitting to its limits, the reply cache, retries and rate limits are the judge layer's, and no
client is opened here.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from referee.case import EvalCase
from referee.compat.multivon_media import (
    IMAGE_FORMATS,
    MEDIA_KEY,
    PDF,
    MediaResolver,
    case_media,
    resolved_media,
)
from referee.content._load import find_parts, load_part
from referee.content._parts import ContentError, DocumentPart, ImagePart, distinct_parts
from referee.content._vision import _VISION_HINT, takes_images
from referee.errors import JudgeUnavailable
from referee.judge import JudgeConfig, get_judge
from referee.judge.binding import bind_in_layers
from referee.judge.providers import rules_for

__all__ = ["call_vision", "graded_media", "source_part", "vision_judge"]


def source_part(source: Any, *, field: str | None = None) -> ImagePart | DocumentPart:
    """The image or PDF a multivon source string names (path, ``data:`` URL or URL); a
    problem is one line naming ``field``."""
    if not isinstance(source, str) or not source.strip():
        raise ContentError(f"an image source is a non-empty string, not {source!r}",
                           field=field, expected="a path, a data: URL or an http(s) URL")
    text = source.strip()
    lowered = text.lower()
    if lowered.startswith("data:"):
        where, is_pdf = "url", lowered.startswith("data:application/pdf")
    else:  # a URL, or a path relative to the current directory: .pdf is a document, as in multivon
        where = "url" if lowered.startswith(("http://", "https://")) else "path"
        is_pdf = lowered.split("?", 1)[0].endswith(".pdf")
    part = load_part({"type": "document" if is_pdf else "image", where: text}, field=field)
    assert isinstance(part, (ImagePart, DocumentPart))
    return part


def vision_judge(judge: JudgeConfig | None) -> JudgeConfig:
    """The one judge ``judge`` names (else configure()'s, the environment's, the default);
    JudgeUnavailable, in one line, for a panel, an unreachable model or a text-only model."""
    binding = bind_in_layers(judge)
    if binding.panel is not None or binding.cascade is not None:
        raise JudgeUnavailable("call_vision asks one judge; the judge in effect is a panel or "
                               "a cascade (give judge=JudgeConfig(...))")
    cfg = binding.first
    if cfg is None:
        raise JudgeUnavailable(f"call_vision: no provider can serve judge model "
                               f"{binding.unreachable_model!r}")
    rules = rules_for(cfg.provider).content_rules
    if rules is None or not takes_images(rules, cfg.model):
        raise JudgeUnavailable(f"judge {cfg.provider}/{cfg.model} takes text only, and "
                               f"call_vision sends images (expected {_VISION_HINT})",
                               provider=cfg.provider, model=cfg.model)
    return cfg


def call_vision(prompt: str, sources: Sequence[str], judge: JudgeConfig | None = None,
                max_tokens: int = 2048) -> str:
    """The judge's text reply to ``prompt`` shown ``sources`` (paths, ``data:`` URLs or URLs,
    in order). JudgeUnavailable when no vision judge can answer; a source that cannot be read
    is an InputError naming it."""
    from referee.run.sync import run_sync

    if isinstance(sources, str):
        raise TypeError("call_vision: sources is a list of paths or URLs, not one string")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"call_vision: max_tokens must be a positive integer, got "
                         f"{max_tokens!r}")
    cfg = vision_judge(judge)
    parts = [source_part(source, field=f"sources[{index}]")
             for index, source in enumerate(sources)]
    reply = run_sync(get_judge(cfg).complete(prompt, parts=parts, max_tokens=max_tokens))
    return reply.text


# The case-metadata keys multivon read images from before media could be bound.
UNBOUND_KEYS = ("images", "image_url", "image_path")


def graded_media(case: EvalCase, resolver: MediaResolver | None
                 ) -> tuple[list[ImagePart | DocumentPart], bool]:
    """(the images and PDFs a vision evaluator grades for ``case``, whether they are bound).

    In this order, the first that the case has: media bound with ``with_media`` (each checked
    against its descriptor through ``resolver``), multivon's unbound metadata references
    (``images``, ``image_url``, ``image_path``; deprecated, as multivon deprecates them), and
    referee's own content parts anywhere in the case. Bound audio or video is refused in one
    line: a vision judge grades stills and pages, and dropping them would grade less than the
    case holds.
    """
    metadata = case.metadata or {}
    if MEDIA_KEY in metadata:
        unsupported = sorted({a.media_type for a in case_media(case)
                              if a.media_type not in IMAGE_FORMATS and a.media_type != PDF})
        if unsupported:
            raise ContentError(f"this case binds {', '.join(unsupported)}, and vision "
                               "evaluators grade images and PDF pages: render or transcribe "
                               "it and bind the result", field=f"metadata[{MEDIA_KEY!r}]")
        return [_bound_part(a.media_type, content)
                for a, content in resolved_media(case, resolver)], True
    references = _unbound_references(metadata)
    if references is not None:
        parts = [source_part(source, field=field) for field, source in references]
        if parts:
            warnings.warn(
                "image references in case.metadata bind no bytes, so a regrade cannot show "
                "that the same image was graded: bind them with with_media() and give the "
                "evaluator media_resolver=", DeprecationWarning, stacklevel=3)
        return parts, False
    return distinct_parts(find_parts(case)), False


def _bound_part(media_type: str, content: bytes) -> ImagePart | DocumentPart:
    if media_type == PDF:
        return DocumentPart(data=content)
    return ImagePart(data=content)


def _unbound_references(metadata: dict[str, Any]) -> list[tuple[str, Any]] | None:
    """(field, source) of each unbound reference, or None when the metadata names none."""
    if "images" in metadata:
        images = metadata["images"]
        if not isinstance(images, (list, tuple)):
            raise ContentError(f"an ordered list of image sources, not "
                               f"{type(images).__name__}", field="metadata['images']")
        return [(f"metadata['images'][{index}]", source) for index, source in enumerate(images)]
    named = [(f"metadata[{key!r}]", metadata[key]) for key in ("image_url", "image_path")
             if metadata.get(key)]
    if len(named) > 1:
        raise ContentError("the case names both image_url and image_path",
                           field="metadata", expected="one of them, or an ordered 'images' list")
    return named or None
