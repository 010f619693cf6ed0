"""The paired tests of a comparison: which of B's differences from A are real.

Both runs scored the same cases, so every test is paired, case by case:

- pass/fail verdicts, per criterion and for whole cases: McNemar's test (exact below 25
  discordant cases), with the minimum detectable change of the pass rate for this many cases;
- scores, per criterion: a seeded paired bootstrap interval of the mean change, the Wilcoxon
  signed-rank test, Cohen's d_z and the rank-biserial correlation, and the minimum detectable
  mean change.

Each criterion is one more chance of a false alarm, so the per-criterion p-values of each test
are Holm-adjusted across criteria; a difference is called real when its adjusted p-value is
below ``ALPHA``. The whole-case verdict is one test on its own and is not adjusted.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from referee.stats import (
    McNemarResult,
    WilcoxonResult,
    bootstrap_mean_ci,
    cohens_dz,
    holm_adjust,
    mcnemar,
    paired_mean_mde,
    paired_proportion_mde,
    wilcoxon_signed_rank,
)

ALPHA = 0.05
OVERALL = "overall"


def _reading(adjusted_p: float) -> str:
    return "real" if adjusted_p < ALPHA else "could be noise"


def _p_text(p: float, adjusted: float | None) -> str:
    text = f"p = {p:.2g}" if p < 0.001 else f"p = {p:.3f}"
    return text if adjusted is None or adjusted == p else text + f", Holm-adjusted {adjusted:.3f}"


def _cases(n: int) -> str:
    return f"{n} case" if n == 1 else f"{n} cases"


def _more_cases(n: int) -> str:
    return f"{n} more case" if n == 1 else f"{n} more cases"


@dataclass(frozen=True)
class VerdictShift:
    """Paired pass/fail verdicts of one criterion (or of whole cases: ``OVERALL``) in A and B.

    ``newly_failing`` passed in A and failed in B; ``newly_passing`` the reverse. ``mde`` is the
    smallest change of the pass rate this many cases detect (80% power, two-sided 5%).
    """

    criterion: str
    n: int
    newly_failing: int
    newly_passing: int
    test: McNemarResult
    adjusted_p: float
    mde: float
    whole_case: bool = False  # the case's own verdict, not one criterion's (not adjusted)

    @property
    def change(self) -> float:
        """B's pass rate minus A's over the paired cases."""
        return (self.newly_passing - self.newly_failing) / self.n if self.n else 0.0

    @property
    def real(self) -> bool:
        return self.adjusted_p < ALPHA

    def describe(self) -> str:
        where = "overall (case verdicts)" if self.whole_case else f"on {self.criterion}"
        unseen = (f"a pass-rate change under {self.mde * 100:.0f} points goes unseen with "
                  f"{_cases(self.n)}")
        if self.n == 0:
            return f"no case has a verdict in both runs {where}"
        if not self.test.discordant:
            return f"A and B agree {where} in all {_cases(self.n)}; no difference ({unseen})"
        more = self.newly_failing - self.newly_passing
        moved = (f"B fails {_more_cases(more)}" if more > 0 else
                 f"B passes {_more_cases(-more)}" if more < 0 else "B fails as many cases as A")
        adjusted = None if self.whole_case else self.adjusted_p
        words = f"{moved} {where}; {_p_text(self.test.p_value, adjusted)}; {_reading(self.adjusted_p)}"
        detail = (f"{self.newly_failing} newly failing, {self.newly_passing} newly passing of "
                  f"{self.n} paired; McNemar {self.test.method}")
        return f"{words} ({detail}" + ("" if self.real else f"; {unseen}") + ")"

    def to_dict(self) -> dict[str, Any]:
        return {"criterion": self.criterion, "n": self.n, "newly_failing": self.newly_failing,
                "newly_passing": self.newly_passing, "pass_rate_change": self.change,
                "test": "mcnemar", "method": self.test.method, "p": self.test.p_value,
                "holm_p": self.adjusted_p, "real": self.real, "mde": self.mde,
                "whole_case": self.whole_case, "statement": self.describe()}


@dataclass(frozen=True)
class CriterionDelta:
    """A criterion's mean score in B minus A, over the cases both runs scored (paired).

    The 95% interval comes from a paired bootstrap over those cases: it says how far the mean
    change could move if other, similar cases had been drawn, so one flaky case does not read
    as a regression. ``significant`` when the interval excludes 0. The Wilcoxon signed-rank test
    (Holm-adjusted across criteria) decides whether the change is ``real``.
    """

    criterion: str
    n: int
    mean_a: float
    mean_b: float
    ci_low: float
    ci_high: float
    wilcoxon: WilcoxonResult | None = None
    adjusted_p: float | None = None
    effect_dz: float | None = None
    mde: float | None = None
    whole_case: bool = False  # the mean case score, not one criterion's (not adjusted)

    @property
    def delta(self) -> float:
        return self.mean_b - self.mean_a

    @property
    def significant(self) -> bool:
        return self.n > 1 and (self.ci_low > 0 or self.ci_high < 0)

    @property
    def real(self) -> bool:
        return self.adjusted_p is not None and self.adjusted_p < ALPHA

    @property
    def hint(self) -> str:
        if self.n < 2:
            return "too few paired cases to judge"
        if not self.significant:
            return "within noise"
        return "likely better" if self.delta > 0 else "likely worse"

    def describe(self) -> str:
        return (f"{self.criterion}: {self.mean_a:.3f} -> {self.mean_b:.3f} ({self.delta:+.3f}, "
                f"95% CI {self.ci_low:+.3f} to {self.ci_high:+.3f}, n={self.n}) {self.hint}")

    def statement(self) -> str:
        """In words: how B's scores moved, the test's verdict, the effect size and what this many
        cases could see."""
        test = self.wilcoxon
        if test is None or self.adjusted_p is None:
            return f"{self.criterion} scores: not tested"
        if test.n == 0:
            return f"{self.criterion} scores: identical in all {_cases(self.n)}; no difference"
        direction = "higher" if self.delta > 0 else "lower" if self.delta < 0 else "no different"
        where = "overall (mean case score)" if self.whole_case else f"on {self.criterion}"
        words = (f"B scores {direction} {where} by {abs(self.delta):.3f} on average; "
                 f"{_p_text(test.p_value, self.adjusted_p)}; {_reading(self.adjusted_p)}")
        detail = [f"paired-bootstrap 95% CI {self.ci_low:+.3f} to {self.ci_high:+.3f}",
                  f"Wilcoxon {test.method}, {_cases(test.zeros)} unchanged"]
        if self.effect_dz is not None:
            detail.append(f"d_z {self.effect_dz:+.2f}")
        if test.rank_biserial is not None:
            detail.append(f"rank-biserial {test.rank_biserial:+.2f}")
        if self.mde is not None and not self.real:
            detail.append(f"a mean change under {self.mde:.3f} goes unseen with {_cases(self.n)}")
        return f"{words} ({'; '.join(detail)})"

    def to_dict(self) -> dict[str, Any]:
        test = self.wilcoxon
        return {"criterion": self.criterion, "n": self.n, "mean_a": self.mean_a,
                "mean_b": self.mean_b, "delta": self.delta, "ci_low": self.ci_low,
                "ci_high": self.ci_high, "significant": self.significant, "hint": self.hint,
                "wilcoxon_p": test.p_value if test else None,
                "wilcoxon_method": test.method if test else None, "holm_p": self.adjusted_p,
                "real": self.real, "effect_dz": self.effect_dz,
                "rank_biserial": test.rank_biserial if test else None, "mde": self.mde,
                "whole_case": self.whole_case, "statement": self.statement()}


def _verdict_shift(criterion: str, pairs: Sequence[tuple[bool, bool]]) -> VerdictShift:
    n = len(pairs)
    failing = sum(a and not b for a, b in pairs)
    passing = sum(b and not a for a, b in pairs)
    test = mcnemar(failing, passing)
    mde = paired_proportion_mde(n, (failing + passing) / n if n else 0.0)
    return VerdictShift(criterion, n, failing, passing, test, test.p_value, mde)


def verdict_shifts(by_criterion: dict[str, list[tuple[bool, bool]]],
                   overall: list[tuple[bool, bool]]) -> list[VerdictShift]:
    """McNemar per criterion (Holm-adjusted across them), then the whole-case verdicts."""
    shifts = [_verdict_shift(name, pairs) for name, pairs in by_criterion.items()]
    adjusted = holm_adjust([s.test.p_value for s in shifts])
    shifts = [replace(s, adjusted_p=p) for s, p in zip(shifts, adjusted)]
    return shifts + [replace(_verdict_shift(OVERALL, overall), whole_case=True)] if overall \
        else shifts


def _delta(criterion: str, scored: Sequence[tuple[float, float]]) -> CriterionDelta:
    """The paired scores' bootstrap interval, Wilcoxon test (not yet adjusted), effect size and
    minimum detectable mean change."""
    n = len(scored)
    differences = [b - a for a, b in scored]
    low, high = bootstrap_mean_ci(differences)
    spread = statistics.stdev(differences) if n > 1 else 0.0
    test = wilcoxon_signed_rank(differences)
    return CriterionDelta(
        criterion=criterion, n=n, mean_a=sum(a for a, _ in scored) / n,
        mean_b=sum(b for _, b in scored) / n, ci_low=low, ci_high=high, wilcoxon=test,
        adjusted_p=test.p_value, effect_dz=cohens_dz(differences), mde=paired_mean_mde(n, spread))


def criterion_deltas(by_criterion: dict[str, list[tuple[float, float]]]) -> list[CriterionDelta]:
    """Per criterion, ``_delta`` with its Wilcoxon p-value Holm-adjusted across criteria."""
    deltas = [_delta(criterion, scored) for criterion, scored in by_criterion.items()]
    adjusted = holm_adjust([d.wilcoxon.p_value if d.wilcoxon else 1.0 for d in deltas])
    return [replace(d, adjusted_p=p) for d, p in zip(deltas, adjusted)]


def overall_delta(case_scores: Sequence[tuple[float, float]]) -> CriterionDelta | None:
    """The mean case score (the mean of a case's scored criteria) of the cases both runs
    passed or failed: one test on its own, not adjusted. None without such cases."""
    return replace(_delta(OVERALL, case_scores), whole_case=True) if case_scores else None
