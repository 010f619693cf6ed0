"""How often a case's verdict flips between runs of the same case."""

from __future__ import annotations


def flip_rate(passes: int, fails: int) -> float | None:
    """The chance that two different runs of a case disagree (one passes, the other fails),
    estimated without bias from its runs: passes x fails / (n choose 2). 0.0 for a case whose
    runs all agree, 1.0 for one pass and one fail; None below two runs."""
    if passes < 0 or fails < 0:
        raise ValueError(f"counts must be >= 0, got {passes} passes and {fails} fails")
    runs = passes + fails
    if runs < 2:
        return None
    return 2 * passes * fails / (runs * (runs - 1))
