"""ContainsKeywordsCriterion: specific words appear in the response. One rule for both API
surfaces: the multivon-style ``Contains`` (referee.evaluators) is this criterion with multivon's
constructor and settings."""

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
    ``case_sensitive`` compares as written; ``match_any`` scores 1.0 when at least one keyword
    is found (0.0 otherwise).
    """

    name = "contains_keywords"
    reads = ("actual_response",)
    description = "Evaluates presence of required keywords in response"
    case_sensitive: bool = False
    match_any: bool = False

    def __init__(self, keywords: list[str] | None = None,
                 config: CriterionConfig | None = None, *,
                 threshold: float | None = None) -> None:
        super().__init__(config, threshold=threshold)
        self.keywords = keywords or []

    @property
    def keywords(self) -> list[str]:
        # Read from the config on every use, so replacing ``criterion.config`` takes effect.
        return list(self.config.keywords or self._keywords)

    @keywords.setter
    def keywords(self, keywords: list[str] | str) -> None:
        # A bare string would otherwise be searched letter by letter.
        self._keywords = [keywords] if isinstance(keywords, str) else list(keywords)

    def _folded(self, text: str) -> str:
        return text if self.case_sensitive else text.casefold()

    def evaluate_sync(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        keywords = self.keywords
        if not keywords:
            return self._result(1.0, {"note": "No keywords specified",
                                      "reason": "No keywords specified; nothing to check."})
        response = self._folded(actual.actual_response or "")
        found = [kw for kw in keywords if self._folded(kw) in response]
        missing = [kw for kw in keywords if kw not in found]
        if self.match_any:
            score = 1.0 if found else 0.0
            reason = f"Found {found[0]!r}." if found else f"None of {keywords!r} found."
        else:
            score = len(found) / len(keywords)
            reason = (f"Found {len(found)} of {len(keywords)} keywords."
                      + (f" Missing: {', '.join(repr(k) for k in missing)}." if missing else ""))
        return self._result(score, {
            "reason": reason, "found": found, "missing": missing, "keywords": keywords,
        })
