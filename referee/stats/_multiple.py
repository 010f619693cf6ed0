"""Holm's step-down correction: several criteria tested at once, one family-wise error rate."""

from __future__ import annotations

from collections.abc import Sequence


def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values in the input order: the i-th smallest p is multiplied by
    (m - i + 1), capped at 1, and made non-decreasing along the sorted order. A family is
    rejected at level alpha exactly where its adjusted p is below alpha."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 0.0
    for position, index in enumerate(order):
        running = max(running, min(1.0, (m - position) * p_values[index]))
        adjusted[index] = running
    return adjusted
