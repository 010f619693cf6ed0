"""LLMCallerMixin: document 000's judge-calling helpers, routed through referee.judge."""

from __future__ import annotations


class LLMCallerMixin:
    """Shared judge-calling logic for LLM-based criteria (implementation follows)."""
