"""A provider's refusal of an image over its documented size limit, for the scripted judge.

Anthropic takes at most 5 MB per image through its API, and measures it on the base64 text the
request carries (its 400 names ``...image.source.base64`` and counts that text's length:
``image exceeds 5 MB maximum: 6275800 bytes > 5242880 bytes``), so a 4 MB JPEG, 5.3 MB once
encoded, is refused. ``refusing_oversized_images(responder)`` answers such a request as
Anthropic does and leaves every other request to ``responder``.
"""

from __future__ import annotations

import json
from typing import Any

from referee.testing.script import Fault, Outcome, RecordedRequest, Responder

ANTHROPIC_MAX_IMAGE_BASE64 = 5 * 1024 * 1024


def oversized_image_refusal(request: RecordedRequest) -> Fault | None:
    """Anthropic's 400 for the first base64 image in ``request`` over 5 MB, else None."""
    if request.provider != "anthropic":
        return None
    messages = request.body.get("messages")
    for i, message in enumerate(messages if isinstance(messages, list) else []):
        content = message.get("content") if isinstance(message, dict) else None
        for j, block in enumerate(content if isinstance(content, list) else []):
            size = _base64_image_length(block)
            if size > ANTHROPIC_MAX_IMAGE_BASE64:
                return Fault("status", status=400, body=json.dumps({
                    "type": "error",
                    "error": {"type": "invalid_request_error",
                              "message": f"messages.{i}.content.{j}.image.source.base64: "
                                         f"image exceeds 5 MB maximum: {size} bytes > "
                                         f"{ANTHROPIC_MAX_IMAGE_BASE64} bytes"}}))
    return None


def refusing_oversized_images(responder: Responder | Outcome) -> Responder:
    """``responder``, except that a request over a provider's per-image limit is refused."""
    def respond(request: RecordedRequest) -> Outcome:
        refusal = oversized_image_refusal(request)
        if refusal is not None:
            return refusal
        if callable(responder):
            return responder(request)
        return responder
    return respond


def _base64_image_length(block: Any) -> int:
    if not isinstance(block, dict) or block.get("type") != "image":
        return 0
    source = block.get("source")
    if not isinstance(source, dict) or source.get("type") != "base64":
        return 0
    data = source.get("data")
    return len(data) if isinstance(data, str) else 0


__all__ = ["ANTHROPIC_MAX_IMAGE_BASE64", "oversized_image_refusal", "refusing_oversized_images"]
