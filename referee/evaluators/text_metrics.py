"""Character-level similarity to the expected output: edit distance and chrF (multivon's
``multivon_eval.evaluators.text_metrics``)."""

from __future__ import annotations

from collections import Counter

from referee.case import EvalCase
from referee.evaluators.deterministic import DeterministicEvaluator, Levenshtein
from referee.execution import ExecutionResult
from referee.result import CriterionResult

__all__ = ["ChrfScore", "Levenshtein", "chrf_score"]


def _char_grams(text: str, n: int) -> Counter[str]:
    return Counter(text[i:i + n] for i in range(len(text) - n + 1))


def chrf_score(output: str, reference: str, max_n: int = 6,
               beta: float = 2.0) -> tuple[float, list[int]]:
    """(score, orders used): chrF with sacreBLEU's aggregation, precision and recall averaged
    over the character n-gram orders 1..``max_n`` first, then combined into F-beta. An order
    that one text is too short for is left out rather than counted as 0; identical texts
    score 1.0."""
    if output == reference:
        return 1.0, []
    precisions: list[float] = []
    recalls: list[float] = []
    orders: list[int] = []
    for n in range(1, max_n + 1):
        hyp, ref = _char_grams(output, n), _char_grams(reference, n)
        if not hyp or not ref:
            continue
        overlap = sum((hyp & ref).values())
        precisions.append(overlap / sum(hyp.values()))
        recalls.append(overlap / sum(ref.values()))
        orders.append(n)
    if not orders:
        return 0.0, []
    p, r = sum(precisions) / len(orders), sum(recalls) / len(orders)
    if p + r == 0:
        return 0.0, orders
    b2 = beta * beta
    return (1 + b2) * p * r / (b2 * p + r), orders


class ChrfScore(DeterministicEvaluator):
    """chrF of the output against ``expected_output`` (see :func:`chrf_score`); lower-cased and
    with whitespace removed unless ``case_sensitive``/``include_whitespace``."""

    name = "chrf"
    description = "Character n-gram F-score against the expected output (chrF)"

    def __init__(self, max_n: int = 6, beta: float = 2.0, threshold: float = 0.5,
                 case_sensitive: bool = False, include_whitespace: bool = False) -> None:
        super().__init__(threshold)
        if max_n < 1:
            raise ValueError(f"max_n must be >= 1, got {max_n}")
        self.max_n = max_n
        self.beta = beta
        self.case_sensitive = case_sensitive
        self.include_whitespace = include_whitespace

    def _prepare(self, text: str) -> str:
        text = text if self.case_sensitive else text.lower()
        return text if self.include_whitespace else "".join(text.split())

    def evaluate_sync(self, actual: ExecutionResult, case: EvalCase) -> CriterionResult:
        output = actual.actual_response or ""
        skipped = self._needs_expected_output(case)
        if skipped:
            return skipped
        score, orders = chrf_score(self._prepare(output), self._prepare(case.expected_output or ""),
                                   self.max_n, self.beta)
        if not orders:
            reason = ("Identical after normalisation." if score == 1.0 else
                      f"No usable n-gram order (max_n={self.max_n}; texts too short).")
        else:
            reason = f"chrF {score:.3f} over character orders {orders} (beta {self.beta})."
        return self._verdict(score, reason, orders=orders)
