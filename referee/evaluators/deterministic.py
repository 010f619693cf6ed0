"""Deterministic evaluators of the EvalSuite-style API: string, format and latency checks.

Each is a criterion (``async evaluate(actual, expected) -> CriterionResult``) with the friendlier
constructor multivon users know, e.g. ``Contains(["ok"])``. ``details["reason"]`` always
explains the verdict. A case that lacks what an evaluator needs (no ``expected_output``, no
measured latency) is reported as skipped, naming the missing field; it never passes silently.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import jsonschema
from rapidfuzz.distance import LCSseq
from rapidfuzz.distance import Levenshtein as _rapidfuzz_levenshtein

from referee.case import EvalCase
from referee.compat.multivon import MultivonSurface
from referee.criteria.base import SyncCriterion
from referee.criteria.exact_match import ExactMatchCriterion
from referee.criteria.keywords import ContainsKeywordsCriterion
from referee.execution import ExecutionResult
from referee.result import CriterionResult

__all__ = [
    "BLEU",
    "ROUGE",
    "Contains",
    "DeterministicEvaluator",
    "ExactMatch",
    "JSONSchema",
    "JSONSchemaEval",
    "Latency",
    "Levenshtein",
    "MaxLatency",
    "NotEmpty",
    "RegexMatch",
    "StartsWith",
    "WordCount",
    "levenshtein_distance",
]


class DeterministicEvaluator(MultivonSurface, SyncCriterion):
    """Base: a threshold instead of a ``CriterionConfig``, and a check over the output text."""

    def __init__(self, threshold: float = 1.0) -> None:
        super().__init__(threshold=threshold)

    def _verdict(self, score: float, reason: str, **details: Any) -> CriterionResult:
        return self._result(score, {"reason": reason, **details})

    def _needs_expected_output(self, case: EvalCase) -> CriterionResult | None:
        if case.expected_output is None:
            return self._skipped(f"{type(self).__name__} needs the case's expected_output, "
                                 "and this case has none.")
        return None


def _fold(text: str, case_sensitive: bool) -> str:
    return text if case_sensitive else text.casefold()


class Contains(MultivonSurface, ContainsKeywordsCriterion):
    """The output contains the given substrings; score = fraction found.

    ``match_any=True`` scores 1.0 when at least one is found (0.0 otherwise). The 10xgraph-style
    ``ContainsKeywordsCriterion`` with multivon's constructor (at least one substring), not a
    second rule.
    """

    name = "contains"
    description = "The output contains the given substrings"

    def __init__(self, substrings: Sequence[str] | str, case_sensitive: bool = False,
                 threshold: float = 1.0, match_any: bool = False) -> None:
        super().__init__(threshold=threshold)
        self.keywords = substrings
        if not self.substrings:
            raise ValueError("Contains needs at least one substring to look for")
        self.case_sensitive = case_sensitive
        self.match_any = match_any

    # multivon's name for the keywords, kept as the public attribute it was: a stored run's
    # criteria settings (which resume compares) read as before.
    @property
    def keywords(self) -> list[str]:
        return list(self.substrings)

    @keywords.setter
    def keywords(self, keywords: Sequence[str] | str) -> None:
        # A bare string would otherwise be searched letter by letter.
        self.substrings = [keywords] if isinstance(keywords, str) else list(keywords)


class ExactMatch(MultivonSurface, ExactMatchCriterion):
    """The output equals ``expected_output`` after stripping whitespace (case-insensitive by
    default): the 10xgraph-style ``ExactMatchCriterion`` with multivon's settings and
    constructor, not a second rule."""

    description = "The output equals the expected output"
    strips_expected = True

    def __init__(self, case_sensitive: bool = False, threshold: float = 1.0) -> None:
        super().__init__(threshold=threshold)
        self.case_sensitive = case_sensitive

    def expected_text(self, case: EvalCase) -> str | None:
        return case.expected_output

    def no_expectation(self, case: EvalCase) -> str:
        return f"{type(self).__name__} needs the case's expected_output, and this case has none."


class StartsWith(DeterministicEvaluator):
    """The output, leading whitespace ignored, starts with ``prefix``."""

    name = "starts_with"
    description = "The output starts with a prefix"

    def __init__(self, prefix: str, case_sensitive: bool = False, threshold: float = 1.0) -> None:
        super().__init__(threshold)
        self.prefix = prefix
        self.case_sensitive = case_sensitive

    def evaluate_sync(self, actual: ExecutionResult, case: EvalCase) -> CriterionResult:
        output = actual.actual_response or ""
        ok = _fold(output.lstrip(), self.case_sensitive).startswith(
            _fold(self.prefix, self.case_sensitive))
        reason = (f"Starts with {self.prefix!r}." if ok
                  else f"Does not start with {self.prefix!r}; starts with {output.lstrip()[:40]!r}.")
        return self._verdict(1.0 if ok else 0.0, reason)


class RegexMatch(DeterministicEvaluator):
    """``re.search(pattern, output)`` finds a match; flags default to ``re.IGNORECASE``."""

    name = "regex_match"
    description = "The output matches a regular expression"

    def __init__(self, pattern: str, flags: int = re.IGNORECASE, threshold: float = 1.0) -> None:
        super().__init__(threshold)
        try:
            self.pattern = re.compile(pattern, flags)
        except re.error as exc:
            raise ValueError(f"RegexMatch pattern {pattern!r} is not a valid regular "
                             f"expression: {exc}") from None

    def runs_off_loop(self, actual: ExecutionResult, expected: EvalCase) -> bool:
        # A user's pattern can backtrack catastrophically on a short output too.
        return True

    def evaluate_sync(self, actual: ExecutionResult, case: EvalCase) -> CriterionResult:
        output = actual.actual_response or ""
        found = self.pattern.search(output)
        if found:
            return self._verdict(1.0, f"Pattern matched {found.group(0)[:100]!r}.",
                                 match=found.group(0))
        return self._verdict(0.0, f"Pattern {self.pattern.pattern!r} not found.", match=None)


class NotEmpty(DeterministicEvaluator):
    """The output has something besides whitespace."""

    name = "not_empty"
    description = "The output is not empty"

    def evaluate_sync(self, actual: ExecutionResult, case: EvalCase) -> CriterionResult:
        output = actual.actual_response or ""
        ok = bool(output.strip())
        return self._verdict(1.0 if ok else 0.0, "Output is not empty." if ok else "Output is empty.")


DEFAULT_MAX_WORDS = 10_000


def _first_given(*values: int | None) -> int | None:
    return next((v for v in values if v is not None), None)


class WordCount(DeterministicEvaluator):
    """The number of whitespace-separated words lies in ``[min_words, max_words]``.

    ``min=`` and ``max=`` are accepted as short spellings. Unset bounds are multivon's defaults,
    0 and 10,000 words (or the minimum, when that is larger).
    """

    name = "word_count"
    description = "The output's word count lies within bounds"

    def __init__(self, min_words: int | None = None, max_words: int | None = None,
                 threshold: float = 1.0, *, min: int | None = None,  # noqa: A002
                 max: int | None = None) -> None:  # noqa: A002
        super().__init__(threshold)
        self.min_words = _first_given(min_words, min, 0)
        # An unset maximum never undercuts a minimum given above it.
        default_max = DEFAULT_MAX_WORDS if (self.min_words or 0) <= DEFAULT_MAX_WORDS \
            else self.min_words
        self.max_words = _first_given(max_words, max, default_max)
        for label, bound in (("min_words", self.min_words), ("max_words", self.max_words)):
            if bound is not None and bound < 0:
                raise ValueError(f"WordCount {label} must not be negative, got {bound}")
        if (self.min_words is not None and self.max_words is not None
                and self.min_words > self.max_words):
            raise ValueError(f"WordCount min_words ({self.min_words}) exceeds "
                             f"max_words ({self.max_words})")

    def evaluate_sync(self, actual: ExecutionResult, case: EvalCase) -> CriterionResult:
        output = actual.actual_response or ""
        count = len(output.split())
        low = self.min_words if self.min_words is not None else 0
        high = "∞" if self.max_words is None else self.max_words
        ok = count >= low and (self.max_words is None or count <= self.max_words)
        reason = f"{count} words, {'within' if ok else 'outside'} [{low}, {high}]."
        return self._verdict(1.0 if ok else 0.0, reason, word_count=count)


class JSONSchema(DeterministicEvaluator):
    """The output is JSON that validates against ``schema`` (checked with ``jsonschema``).

    The output must be JSON itself; text around it, code fences included, fails with the reason.
    """

    name = "json_schema"
    description = "The output is JSON matching a schema"

    def __init__(self, schema: dict[str, Any], threshold: float = 1.0) -> None:
        super().__init__(threshold)
        validator_class = jsonschema.validators.validator_for(schema)
        try:
            validator_class.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise ValueError(f"JSONSchema schema is invalid: {exc.message}") from None
        self.schema = schema
        self._validator = validator_class(schema)

    def __getstate__(self) -> dict[str, Any]:
        # The compiled validator holds local functions, which do not pickle; a copy sent to
        # another process (a Ray worker) compiles its own from the schema.
        state = self.__dict__.copy()
        del state["_validator"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._validator = jsonschema.validators.validator_for(self.schema)(self.schema)

    def evaluate_sync(self, actual: ExecutionResult, case: EvalCase) -> CriterionResult:
        output = actual.actual_response or ""
        try:
            data = json.loads(output)
        except json.JSONDecodeError as exc:
            return self._verdict(0.0, f"Output is not valid JSON: {exc.msg} at line {exc.lineno} "
                                      f"column {exc.colno}.", valid_json=False, errors=[])
        errors = sorted(self._validator.iter_errors(data), key=lambda e: list(e.absolute_path))
        if not errors:
            return self._verdict(1.0, "Valid JSON matching the schema.", valid_json=True, errors=[])
        described = [f"{e.json_path}: {e.message}" for e in errors]
        return self._verdict(0.0, f"Schema violation at {described[0]}"
                                  + (f" (and {len(errors) - 1} more)." if len(errors) > 1 else "."),
                             valid_json=True, errors=described)


JSONSchemaEval = JSONSchema


def levenshtein_distance(a: str, b: str) -> int:
    """Character edit distance (insertions, deletions, substitutions, each costing 1).

    rapidfuzz computes it in C (bit-parallel): two 5,000-character strings take milliseconds
    rather than the seconds a pure-Python table needs (docs/benchmarks.md).
    """
    return int(_rapidfuzz_levenshtein.distance(a, b))


class Levenshtein(DeterministicEvaluator):
    """Normalised edit similarity to ``expected_output``: ``1 - distance / longer length``."""

    name = "levenshtein"
    description = "Character-level similarity to the expected output"

    def __init__(self, threshold: float = 0.8, case_sensitive: bool = False) -> None:
        super().__init__(threshold)
        self.case_sensitive = case_sensitive

    def evaluate_sync(self, actual: ExecutionResult, case: EvalCase) -> CriterionResult:
        output = actual.actual_response or ""
        skipped = self._needs_expected_output(case)
        if skipped:
            return skipped
        got = _fold(output.strip(), self.case_sensitive)
        want = _fold((case.expected_output or "").strip(), self.case_sensitive)
        longest = max(len(got), len(want))
        distance = levenshtein_distance(got, want)
        score = 1.0 if longest == 0 else 1.0 - distance / longest
        return self._verdict(score, f"Edit distance {distance} over {longest} characters: "
                                    f"similarity {score:.3f}.", distance=distance)


class MaxLatency(DeterministicEvaluator):
    """The run took at most ``max_ms`` milliseconds (or ``max_s`` seconds).

    Within the limit scores 1.0; beyond it the score falls linearly, reaching 0.0 at twice the
    limit, so a near miss and a timeout are told apart. The default threshold 1.0 fails both.
    """

    name = "max_latency"
    description = "The run finished within a time limit"

    def __init__(self, max_ms: float | None = None, threshold: float = 1.0, *,
                 max_s: float | None = None) -> None:
        super().__init__(threshold)
        if (max_ms is None) == (max_s is None):
            raise ValueError(f"{type(self).__name__} needs exactly one of max_ms or max_s")
        limit_s = max_s if max_s is not None else max_ms / 1000.0  # type: ignore[operator]
        if limit_s <= 0:
            raise ValueError(f"{type(self).__name__} limit must be positive, got {limit_s}s")
        self.limit_s = limit_s

    @property
    def max_ms(self) -> float:
        return self.limit_s * 1000.0

    def evaluate_sync(self, actual: ExecutionResult, case: EvalCase) -> CriterionResult:
        if actual.latency_s is None:
            return self._skipped(f"{type(self).__name__} needs the run's latency_s, "
                                 "and none was measured.")
        ms = actual.latency_s * 1000.0
        if ms <= self.max_ms:
            return self._verdict(1.0, f"{ms:.0f} ms within the {self.max_ms:.0f} ms limit.",
                                 latency_ms=ms)
        score = max(0.0, 1.0 - (ms - self.max_ms) / self.max_ms)
        return self._verdict(score, f"{ms:.0f} ms exceeds the {self.max_ms:.0f} ms limit.",
                             latency_ms=ms)


class Latency(MaxLatency):
    """Same check as :class:`MaxLatency`, reported under the name ``latency``."""

    name = "latency"


# multivon's reference-overlap metrics ---------------------------------------------------------


def _words(text: str) -> list[str]:
    return text.lower().split()


def bleu_score(output: str, reference: str, n: int = 4) -> tuple[float, int, float]:
    """(score, order used, brevity penalty): the geometric mean of clipped n-gram precisions up
    to ``n`` (capped at the shorter text's length), times the brevity penalty; lower-cased
    words, no smoothing, so a missing order gives 0."""
    hyp, ref = _words(output), _words(reference)
    if not hyp:
        return 0.0, 0, 0.0
    penalty = 1.0 if len(hyp) >= len(ref) else math.exp(1 - len(ref) / len(hyp))
    order = min(n, len(hyp), len(ref))
    log_sum = 0.0
    for size in range(1, order + 1):
        hyp_grams = Counter(tuple(hyp[i:i + size]) for i in range(len(hyp) - size + 1))
        ref_grams = Counter(tuple(ref[i:i + size]) for i in range(len(ref) - size + 1))
        clipped = sum((hyp_grams & ref_grams).values())
        if clipped == 0:
            return 0.0, order, penalty
        log_sum += math.log(clipped / max(sum(hyp_grams.values()), 1)) / order
    score = penalty * math.exp(log_sum) if order else 0.0
    return max(0.0, min(1.0, score)), order, penalty


class BLEU(DeterministicEvaluator):
    """BLEU-``n`` of the output against ``expected_output`` (see :func:`bleu_score`)."""

    name = "bleu"
    description = "Word n-gram overlap with the expected output (BLEU)"

    def __init__(self, n: int = 4, threshold: float = 0.5) -> None:
        super().__init__(threshold)
        if n < 1:
            raise ValueError(f"BLEU n must be at least 1, got {n}")
        self.n = n

    def evaluate_sync(self, actual: ExecutionResult, case: EvalCase) -> CriterionResult:
        output = actual.actual_response or ""
        skipped = self._needs_expected_output(case)
        if skipped:
            return skipped
        score, order, penalty = bleu_score(output, case.expected_output or "", self.n)
        if not _words(output):
            return self._verdict(0.0, "Empty output.")
        return self._verdict(round(score, 4), f"BLEU-{order}: {score:.4f} (brevity penalty "
                                              f"{penalty:.3f}).", order=order,
                             brevity_penalty=penalty)


class ROUGE(DeterministicEvaluator):
    """ROUGE-L F1 (longest common word subsequence) of the output against ``expected_output``,
    lower-cased words. This is multivon's ``ROUGE``; the 10xgraph-style API's unigram rule is
    :class:`referee.criteria.RougeMatchCriterion`."""

    name = "rouge_l"
    description = "Longest common word subsequence with the expected output (ROUGE-L)"

    def __init__(self, threshold: float = 0.5) -> None:
        super().__init__(threshold)

    def evaluate_sync(self, actual: ExecutionResult, case: EvalCase) -> CriterionResult:
        output = actual.actual_response or ""
        skipped = self._needs_expected_output(case)
        if skipped:
            return skipped
        hyp, ref = _words(output), _words(case.expected_output or "")
        if not hyp or not ref:
            return self._verdict(0.0, "Empty output or reference.")
        common = LCSseq.similarity(hyp, ref)
        precision, recall = common / len(hyp), common / len(ref)
        f1 = 2 * precision * recall / (precision + recall) if common else 0.0
        return self._verdict(round(f1, 4), f"ROUGE-L F1 {f1:.4f} (precision {precision:.3f}, "
                                           f"recall {recall:.3f}).",
                             precision=precision, recall=recall)
