"""Parts in each provider's own request shape: what a judge request's user content becomes.

- OpenAI Chat Completions: ``text`` / ``image_url`` (a data: URL or the remote URL, with
  ``detail``) / ``file`` (a PDF as a data: URL with its file name).
- OpenAI Responses: ``input_text`` / ``input_image`` / ``input_file``.
- Anthropic Messages: ``text`` / ``image`` and ``document`` blocks with a base64 or url source.
- Gemini (google-genai): ``text`` / ``inline_data`` parts with the raw bytes (the SDK encodes
  them as base64 on the wire).

Each builder takes parts already fitted to the provider (``_fit.fit_part``); a part without
bytes that the provider cannot fetch is refused there, in one line, before any request.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from referee.content._parts import ContentError, DocumentPart, ImagePart, TextPart

Part = TextPart | ImagePart | DocumentPart


def openai_chat_content(parts: Sequence[Part], detail: str = "auto") -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            content.append({"type": "image_url",
                            "image_url": {"url": part.as_data_url(), "detail": detail}})
        else:
            content.append({"type": "file", "file": {"filename": part.filename,
                                                     "file_data": _bytes_url(part)}})
    return content


def openai_responses_content(parts: Sequence[Part], detail: str = "auto"
                             ) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            content.append({"type": "input_text", "text": part.text})
        elif isinstance(part, ImagePart):
            content.append({"type": "input_image", "image_url": part.as_data_url(),
                            "detail": detail})
        else:
            content.append({"type": "input_file", "filename": part.filename,
                            "file_data": _bytes_url(part)})
    return content


def anthropic_content(parts: Sequence[Part]) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            content.append({"type": "text", "text": part.text})
            continue
        if part.data is not None:
            source = {"type": "base64", "media_type": part.media_type,
                      "data": base64.b64encode(part.data).decode("ascii")}
        else:
            source = {"type": "url", "url": part.as_data_url()}
        content.append({"type": part.type, "source": source})
    return content


def gemini_parts(parts: Sequence[Part]) -> list[dict[str, Any]]:
    """google-genai ``Part`` dicts (the SDK validates them into ``types.Part``)."""
    content: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            content.append({"text": part.text})
        else:
            if part.data is None:
                raise ContentError(f"Gemini takes {part.type}s as bytes; {part.label()} is "
                                   "only a URL here")
            content.append({"inline_data": {"mime_type": part.media_type, "data": part.data}})
    return content


def _bytes_url(part: DocumentPart) -> str:
    if part.data is None:
        raise ContentError(f"OpenAI takes documents as bytes; {part.label()} is only a URL here")
    return part.as_data_url()


def around_prompt(prompt: str, prefix: str, parts: Sequence[Part]) -> list[Part]:
    """A judge prompt with its parts: the shared case material (``prefix``), the images and
    documents, then what is asked. The material and the media stay the requests' common
    start, so the provider's prompt cache still serves a case's sibling requests."""
    head, tail = (prefix, prompt[len(prefix):]) if prefix and prompt.startswith(prefix) \
        else ("", prompt)
    return [*([TextPart(text=head)] if head else []), *parts,
            *([TextPart(text=tail)] if tail else [])]


def openai_user_content(api_style: str, parts: Sequence[Part]) -> list[dict[str, Any]]:
    """OpenAI's user content in the API the judge uses (``api_style``)."""
    return (openai_responses_content(parts) if api_style == "responses"
            else openai_chat_content(parts))


def anthropic_user_content(api_style: str, parts: Sequence[Part]) -> list[dict[str, Any]]:
    return anthropic_content(parts)


def gemini_user_content(api_style: str, parts: Sequence[Part]) -> list[dict[str, Any]]:
    return gemini_parts(parts)
