"""Calibrated thresholds for Faithfulness, Hallucination and Relevance (document 001).

The table is the document's, row for row. Lookups go by the *resolved* judge model name.

Aliases: a calibration was measured against one model snapshot, so only names that denote
that same snapshot share its row. Anthropic's ``claude-haiku-4-5`` alias (the built-in default
judge) currently points at ``claude-haiku-4-5-20251001``, and ``gpt-4o-mini-2024-07-18`` is the
snapshot behind ``gpt-4o-mini``; both therefore map to the measured row. Other dated snapshots
are *not* folded onto a row: a model the benchmark never saw gets the "Other models" value.
Matching ignores case and surrounding whitespace.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

from referee.errors import CalibrationMissing

DEFAULT_THRESHOLD = 0.70

# The key used in threshold_table() for the document's "Other models" row.
OTHER_MODELS = "*"

CALIBRATED_EVALUATORS = ("hallucination", "faithfulness", "relevance")

_TABLE: Mapping[str, Mapping[str, float]] = MappingProxyType({
    "claude-haiku-4-5-20251001": MappingProxyType(
        {"hallucination": 0.55, "faithfulness": 0.90, "relevance": 0.30}),
    "claude-sonnet-4-6": MappingProxyType(
        {"hallucination": 0.30, "faithfulness": 0.90, "relevance": 0.30}),
    "gpt-4o-mini": MappingProxyType(
        {"hallucination": 0.30, "faithfulness": 0.90, "relevance": 0.30}),
})

_ALIASES: Mapping[str, str] = MappingProxyType({
    "claude-haiku-4-5": "claude-haiku-4-5-20251001",
    "gpt-4o-mini-2024-07-18": "gpt-4o-mini",
})


def calibration_row(model: str | None) -> str | None:
    """The table row a judge model name maps to, or None for "Other models"."""
    key = (model or "").strip().lower()
    key = _ALIASES.get(key, key)
    return key if key in _TABLE else None


def calibrated_threshold(evaluator: str, model: Any, strict: bool = False) -> float:
    """Threshold for ``evaluator`` (e.g. ``"faithfulness"``) judged by ``model`` (a model name or
    a JudgeConfig). A model without a row gets the "Other models" default, or, with
    ``strict=True``, :class:`referee.errors.CalibrationMissing`."""
    model = getattr(model, "model", model)
    if evaluator not in CALIBRATED_EVALUATORS:
        raise ValueError(
            f"no calibration for evaluator {evaluator!r}; calibrated evaluators are "
            f"{', '.join(CALIBRATED_EVALUATORS)}"
        )
    row = calibration_row(model)
    if row is None:
        if strict:
            raise CalibrationMissing(evaluator, str(model))
        return DEFAULT_THRESHOLD
    return _TABLE[row][evaluator]


def threshold_table() -> dict[tuple[str, str], float]:
    """The full calibration table as ``{(evaluator, judge_model): threshold}``.

    Every measured model appears under its table name and under each alias; the "Other models"
    row appears as ``(evaluator, "*")``.
    """
    table: dict[tuple[str, str], float] = {}
    names_by_row: dict[str, list[str]] = {row: [row] for row in _TABLE}
    for alias, row in _ALIASES.items():
        names_by_row[row].append(alias)
    for row, thresholds in _TABLE.items():
        for evaluator in CALIBRATED_EVALUATORS:
            for name in names_by_row[row]:
                table[(evaluator, name)] = thresholds[evaluator]
    for evaluator in CALIBRATED_EVALUATORS:
        table[(evaluator, OTHER_MODELS)] = DEFAULT_THRESHOLD
    return table
