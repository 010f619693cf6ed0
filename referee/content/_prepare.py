"""Everything a judge request needs to know about its parts, decided once: the judge can see
them (or the request is refused in one line), each is fitted to the provider, the provider's
own content shape, what they add to the prompt's token estimate, and what the reply cache keys
them by (``reply_cache_parts``: the original bytes' hashes and how they are fitted, never a
path; known without fitting, so a cached reply costs no decoding).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from referee.content._fit import fit_part, fit_signature
from referee.content._parts import DocumentPart, ImagePart, TextPart, parts_key
from referee.content._rules import ContentRules
from referee.content._vision import require_vision

Part = TextPart | ImagePart | DocumentPart


@dataclass(frozen=True)
class PreparedContent:
    parts: tuple[Part, ...]          # as sent: fitted to the provider
    content: list[dict[str, Any]]    # the provider's user-content shape
    media_tokens: int                # estimated prompt tokens of the images and documents
    cache_key: tuple[str, ...]       # reply_cache_parts of the parts as given


_PREPARED: dict[tuple[Any, ...], PreparedContent] = {}
_PREPARED_LIMIT = 256
_PREPARED_LOCK = threading.Lock()


def prepare_content(rules: ContentRules, api_style: str, model: str, parts: Sequence[Part], *,
                    takes_images: bool | None = None, detail: str = "auto") -> PreparedContent:
    """``parts`` ready for ``model`` of the provider whose ``rules`` these are; ContentError
    (one line) when they cannot go. The same parts for the same judge are prepared once (a
    case's requests and samples)."""
    key = (rules.provider, api_style, model, takes_images, detail,
           tuple(p.text if isinstance(p, TextPart) else p.content_key() for p in parts))
    with _PREPARED_LOCK:
        done = _PREPARED.get(key)
    if done is not None:
        return done
    prepared = _prepare(rules, api_style, model, parts, takes_images, detail)
    with _PREPARED_LOCK:
        if len(_PREPARED) >= _PREPARED_LIMIT:
            _PREPARED.clear()
        _PREPARED[key] = prepared
    return prepared


def _prepare(rules: ContentRules, api_style: str, model: str, parts: Sequence[Part],
             takes_images: bool | None, detail: str) -> PreparedContent:
    require_vision(rules, model, parts, takes_images)
    fitted = tuple(fit_part(part, rules.limits) for part in parts)
    return PreparedContent(parts=fitted, content=rules.user_content(api_style, fitted),
                           media_tokens=sum(rules.media_tokens(model, part, detail)
                                            for part in fitted),
                           cache_key=reply_cache_parts(rules, parts))


def reply_cache_parts(rules: ContentRules, parts: Sequence[Part]) -> tuple[str, ...]:
    """The parts as a judge reply cache key holds them, found without fitting them: text, each
    image's and document's original content hash, and the signature of how ``fit_part`` fits
    them for this provider (its limits and ``FIT_VERSION``), which decides the fitted bytes.
    The same image under another name keys the same; another image, or another provider's
    fitting, does not."""
    return (*parts_key(list(parts)), fit_signature(rules.limits))
