"""A judge provider's rules for images and documents, gathered in one object that the
provider's adapter names (``ProviderRules.content_rules``), so that nothing outside the
adapters asks which provider it is: what its models look at (limits), what an image and a PDF
page cost (token rules), which models take text only, and its API's content shape."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from referee.content._limits import (
    ANTHROPIC_LIMITS,
    GEMINI_LIMITS,
    OPENAI_LIMITS,
    ProviderLimits,
)
from referee.content._parts import DocumentPart, ImagePart, TextPart
from referee.content._tokens import (
    ESTIMATED_PAGE_TOKENS,
    GEMINI_PAGE_TOKENS,
    anthropic_image_tokens,
    gemini_image_tokens,
    openai_image_tokens,
)
from referee.content._vision import ANTHROPIC_TEXT_ONLY, GEMINI_TEXT_ONLY, OPENAI_TEXT_ONLY
from referee.content._wire import (
    anthropic_user_content,
    gemini_user_content,
    openai_user_content,
)

Part = TextPart | ImagePart | DocumentPart


@dataclass(frozen=True)
class ContentRules:
    provider: str  # the provider's name, for messages
    limits: ProviderLimits
    # (model, width, height, detail) -> prompt tokens of one image
    image_tokens: Callable[[str, int, int, str], int]
    page_tokens: int  # prompt tokens of one PDF page (an upper estimate where none is published)
    text_only: tuple[re.Pattern[str], ...]  # the models its provider documents as text only
    # (api_style, parts) -> the user message's content in its API's shape
    user_content: Callable[[str, Sequence[Part]], list[dict[str, Any]]]

    def media_tokens(self, model: str, part: Part, detail: str = "auto") -> int:
        """Estimated prompt tokens of one fitted part (0 for text, which the prompt counts).

        An image known only by its URL is estimated at the largest size the provider looks at,
        so that an estimate never undercounts; a PDF whose pages were not counted, at one page.
        """
        if isinstance(part, TextPart):
            return 0
        if isinstance(part, DocumentPart):
            return self.page_tokens * (part.pages or 1)
        if part.width is not None and part.height is not None:
            return self.image_tokens(model, part.width, part.height, detail)
        edge = self.limits.max_long_edge
        return self.image_tokens(model, edge, edge, detail)


OPENAI_CONTENT = ContentRules("openai", OPENAI_LIMITS, openai_image_tokens,
                              ESTIMATED_PAGE_TOKENS, OPENAI_TEXT_ONLY, openai_user_content)
ANTHROPIC_CONTENT = ContentRules("anthropic", ANTHROPIC_LIMITS, anthropic_image_tokens,
                                 ESTIMATED_PAGE_TOKENS, ANTHROPIC_TEXT_ONLY,
                                 anthropic_user_content)
GEMINI_CONTENT = ContentRules("google", GEMINI_LIMITS, gemini_image_tokens, GEMINI_PAGE_TOKENS,
                              GEMINI_TEXT_ONLY, gemini_user_content)
