"""Images and PDFs in recorded conversations (issue 34): a message's parts in whichever shape its
recorder wrote them, read into referee's part models.

A user message's images become its turn's content as a list of parts (text and media, in the
order written); an assistant message's become the run's ``outputs``; a tool message's join its
result. A remote reference (a URL) is kept as one and never fetched. A part referee cannot
read is, in a message list, the record's one-line error (``notes`` None), and in a trace, a
note naming the span and attribute, the rest of the trace still read.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

from referee.content._load import is_part, load_part, load_parts
from referee.content._parts import ContentError, DocumentPart, ImagePart, TextPart, distinct_parts

Part = TextPart | ImagePart | DocumentPart
MediaPart = ImagePart | DocumentPart

_TEXT_TYPES = ("text", "input_text", "output_text")


def load_media(raw: Any, where: str, field: str, notes: list[str] | None) -> Part | None:
    """One recorded part; None (with a note) when it cannot be read and ``notes`` is given."""
    try:
        return load_part(raw, source=where, field=field)
    except ContentError as exc:
        if notes is None:
            raise
        notes.append(f"{exc}; the part is left out")
        return None


def content_parts(content: Any, where: str, field: str,
                  notes: list[str] | None = None) -> list[Part]:
    """The text and media parts of a message's content list, in order; [] when it holds no
    image or PDF (its text alone says it all). Only the list's own items are read: a block that
    nests content (a tool_result block) is not the message's own media."""
    if not isinstance(content, Sequence) or isinstance(content, (str, bytes)):
        return []
    if not any(is_part(item) for item in content):
        return []
    parts: list[Part] = []
    for index, item in enumerate(content):
        if isinstance(item, str):
            parts.append(TextPart(text=item))
        elif isinstance(item, Mapping) and item.get("type") in _TEXT_TYPES:
            text = item.get("text")
            if isinstance(text, str) and text:
                parts.append(TextPart(text=text))
        elif is_part(item):
            part = load_media(item, where, f"{field}[{index}]", notes)
            if part is not None:
                parts.append(part)
    return parts


def media_of(parts: Sequence[Part]) -> list[MediaPart]:
    return [part for part in parts if not isinstance(part, TextPart)]


def said(text: str, parts: Sequence[Part]) -> Any:
    """What a user turn said: its text, or its parts when it holds an image or PDF."""
    return list(parts) if media_of(parts) else text


def with_media(result: Any, media: Sequence[MediaPart]) -> Any:
    """A tool result with the images it returned kept beside its text."""
    if not media:
        return result
    return [*([result] if result not in (None, "") else []), *media]


def add_unique(found: list[MediaPart], parts: Sequence[MediaPart]) -> None:
    """Append the parts ``found`` does not hold yet (an agent span repeats its model's output)."""
    found[:] = distinct_parts([*found, *parts])


def turn_parts(message: Any) -> list[Part] | None:
    """A turn's message as parts when it holds an image or PDF (what AgentEvaluator sends such
    a turn), else None: a text message goes to the framework as text."""
    if isinstance(message, str):
        return None
    parts = load_parts(message)
    return parts if media_of(parts) else None


def langchain_blocks(parts: Sequence[Part]) -> list[dict[str, Any]]:
    """Parts as LangChain's standard content blocks, which each chat model integration turns
    into its provider's request."""
    blocks: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            blocks.append({"type": "text", "text": part.text})
            continue
        block: dict[str, Any] = {"type": "image" if isinstance(part, ImagePart) else "file"}
        if part.data is not None:
            block.update(base64=base64.b64encode(part.data).decode("ascii"),
                         mime_type=part.media_type)
        else:
            block["url"] = part.as_data_url()
        if isinstance(part, DocumentPart):
            block["extras"] = {"filename": part.filename}
        blocks.append(block)
    return blocks


def responses_input(parts: Sequence[Part]) -> list[dict[str, Any]]:
    """Parts as an OpenAI Responses user message's content (``input_text``/``input_image``/
    ``input_file``): the Agents SDK's own input shape."""
    from referee.content._wire import openai_responses_content

    return openai_responses_content(parts)
