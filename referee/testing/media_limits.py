"""A provider's refusal of an image over its documented size limit, for the scripted judge.

Anthropic takes at most 5 MB per image through its API, and measures it on the base64 text the
request carries (its 400 names ``...image.source.base64`` and counts that text's length:
``image exceeds 5 MB maximum: 6275800 bytes > 5242880 bytes``), so a 4 MB JPEG, 5.3 MB once
encoded, is refused. ``refusing_oversized_images(responder)`` answers such a request as
Anthropic does and leaves every other request to ``responder``.
"""

from __future__ import annotations

import json

from referee.testing.script import Fault, Outcome, RecordedRequest, Responder
from referee.testing.wire import ANTHROPIC_MAX_IMAGE_BASE64, for_request


def oversized_image_refusal(request: RecordedRequest) -> Fault | None:
    """The provider's 400 for the first image in ``request`` over its per-image limit (the
    scripted wire format of each API knows its own; Anthropic's is emulated), else None."""
    refusal = for_request(request).oversized_image(request.body)
    return None if refusal is None else Fault("status", status=400, body=json.dumps(refusal))


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


__all__ = ["ANTHROPIC_MAX_IMAGE_BASE64", "oversized_image_refusal", "refusing_oversized_images"]
