"""ContainsKeywordsCriterion: specific words appear in the response."""

from __future__ import annotations

from referee.case import EvalCase
from referee.config import CriterionConfig
from referee.criteria.base import SyncCriterion
from referee.execution import ExecutionResult
from referee.result import CriterionResult


class ContainsKeywordsCriterion(SyncCriterion):
    """Case-insensitive substring search over the final response; score = found / keywords.

    ``config.keywords``, when non-empty, takes precedence over the ``keywords`` argument. With
    no keywords from either source the score is 1.0 with ``{"note": "No keywords specified"}``.
    """

    name = "contains_keywords"
    reads = ("actual_response",)
    description = "Evaluates presence of required keywords in response"

    def __init__(self, keywords: list[str] | None = None,
                 config: CriterionConfig | None = None) -> None:
        super().__init__(config)
        self.keywords = keywords or []

    @property
    def keywords(self) -> list[str]:
        # Read from the config on every use, so replacing ``criterion.config`` takes effect.
        return list(self.config.keywords or self._keywords)

    @keywords.setter
    def keywords(self, keywords: list[str] | str) -> None:
        # A bare string would otherwise be searched letter by letter.
        self._keywords = [keywords] if isinstance(keywords, str) else list(keywords)

    def evaluate_sync(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        keywords = self.keywords
        if not keywords:
            return self._result(1.0, {"note": "No keywords specified",
                                      "reason": "No keywords specified; nothing to check."})
        response = actual.actual_response.lower()
        found = [kw for kw in keywords if kw.lower() in response]
        missing = [kw for kw in keywords if kw.lower() not in response]
        reason = (f"Found {len(found)} of {len(keywords)} keywords."
                  + (f" Missing: {', '.join(repr(k) for k in missing)}." if missing else ""))
        return self._result(len(found) / len(keywords), {
            "reason": reason, "found": found, "missing": missing, "keywords": keywords,
        })
