"""Images and documents (PDF) as content parts: the part models, reading them from case files
and recorded conversations, the run's blob store, fitting them to each judge provider, their
token cost, each provider's request shape, and deterministic image checks.

Pillow and pypdf (the ``images`` extra) load only when a part is fitted, hashed or measured:
importing this package loads neither.
"""

from __future__ import annotations

from referee._lazy import lazy_getattr

_EXPORTS = {
    "ContentError": "referee.content._parts",
    "TextPart": "referee.content._parts",
    "ImagePart": "referee.content._parts",
    "DocumentPart": "referee.content._parts",
    "ContentPart": "referee.content._parts",
    "parts_key": "referee.content._parts",
    "load_part": "referee.content._load",
    "load_parts": "referee.content._load",
    "is_part": "referee.content._load",
    "find_parts": "referee.content._load",
    "BlobStore": "referee.content._blobs",
    "ContentRules": "referee.content._rules",
    "OPENAI_CONTENT": "referee.content._rules",
    "ANTHROPIC_CONTENT": "referee.content._rules",
    "GEMINI_CONTENT": "referee.content._rules",
    "fit_part": "referee.content._fit",
    "PreparedContent": "referee.content._prepare",
    "prepare_content": "referee.content._prepare",
    "around_prompt": "referee.content._wire",
    "takes_images": "referee.content._vision",
    "require_vision": "referee.content._vision",
    "perceptual_hash": "referee.content._checks",
    "images_match": "referee.content._checks",
    "image_problems": "referee.content._checks",
    "register_text_extractor": "referee.content._checks",
    "extract_text": "referee.content._checks",
    "ImageMatches": "referee.content._criteria",
    "ImageCheck": "referee.content._criteria",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_getattr(__name__, globals(), _EXPORTS)
