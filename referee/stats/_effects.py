"""Effect sizes of paired differences, to read beside a p-value: how large, not only how sure."""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def cohens_dz(differences: Sequence[float]) -> float | None:
    """Mean paired difference over its standard deviation (Cohen's d_z); None below two
    differences or when they do not vary (every case moved by the same amount)."""
    if len(differences) < 2:
        return None
    spread = statistics.stdev(differences)
    return statistics.fmean(differences) / spread if spread > 0 else None
