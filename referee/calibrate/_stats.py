"""Agreement between an evaluator's scores and human pass/fail labels, with bootstrap intervals.

"Positive" is a pass: the human label says the output is acceptable, and the evaluator says so
when its score reaches the threshold (``score >= threshold``). Every interval is a percentile
bootstrap over *rows*: each resample keeps a row's score and its label together (a paired
bootstrap), which is what makes chance-corrected agreement measurable at all; resampling labels
and scores apart would make any judge look like chance.

numpy does the arithmetic: thousands of resamples × hundreds of rows × 101 thresholds is
milliseconds vectorised and seconds in pure Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel

from referee.record import wilson_bounds

try:
    import numpy as np
except ImportError:  # pragma: no cover - depends on the installation
    raise ImportError("referee calibrate needs numpy: pip install 'referee[calibrate]'") from None

# Thresholds of the agreement curve and of the fit: 0.00, 0.01, ..., 1.00.
GRID = np.round(np.linspace(0.0, 1.0, 101), 2)
AGREEMENT_METRICS = ("accuracy", "kappa", "tpr", "tnr", "precision", "recall", "f1")
FIT_METRICS = ("kappa", "f1", "youden")
DEFAULT_RESAMPLES = 2000
CONFIDENCE = 0.95
# Resampled weights are processed this many cells at a time, so memory stays bounded on big sets.
_CHUNK_CELLS = 4_000_000


@dataclass(frozen=True)
class Interval:
    """A value and its 95% interval. ``constant``: every resample gave the same value, so the
    bootstrap has no spread to measure and low and high are None (not a zero-width certainty);
    ``method`` says where low and high come from."""

    value: float | None
    low: float | None = None
    high: float | None = None
    constant: bool = False
    method: str = "bootstrap"


def _counts(weights: np.ndarray, scores: np.ndarray, labels: np.ndarray,
            thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Weighted confusion counts (tp, fp, fn, tn), each of shape (resamples, thresholds).

    Sorting by score once turns "score >= t" into a suffix, so each threshold's counts are a
    cumulative sum read at one position.
    """
    order = np.argsort(scores, kind="stable")
    sorted_scores = scores[order]
    pos_w = weights[:, order] * labels[order]
    neg_w = weights[:, order] * ~labels[order]
    # suffix[:, i] = total weight of rows i.. (those with the i-th smallest score and above)
    pos_suffix = np.concatenate([np.cumsum(pos_w[:, ::-1], axis=1)[:, ::-1],
                                 np.zeros((weights.shape[0], 1))], axis=1)
    neg_suffix = np.concatenate([np.cumsum(neg_w[:, ::-1], axis=1)[:, ::-1],
                                 np.zeros((weights.shape[0], 1))], axis=1)
    start = np.searchsorted(sorted_scores, thresholds - 1e-12, side="left")
    tp = pos_suffix[:, start]
    fp = neg_suffix[:, start]
    fn = pos_suffix[:, :1] - tp
    tn = neg_suffix[:, :1] - fp
    return tp, fp, fn, tn


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def metrics_from_counts(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray,
                        tn: np.ndarray) -> dict[str, np.ndarray]:
    """Every agreement metric elementwise; NaN where a metric is undefined (0/0)."""
    n = tp + fp + fn + tn
    tpr = _ratio(tp, tp + fn)
    tnr = _ratio(tn, tn + fp)
    precision = _ratio(tp, tp + fp)
    observed = _ratio(tp + tn, n)
    chance = _ratio((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn), n * n)
    kappa = _ratio(observed - chance, 1.0 - chance)
    kappa = np.where(np.isclose(chance, 1.0), np.nan, kappa)
    f1 = _ratio(2 * tp, 2 * tp + fp + fn)
    return {"accuracy": observed, "kappa": kappa, "tpr": tpr, "tnr": tnr,
            "precision": precision, "recall": tpr, "f1": f1, "youden": tpr + tnr - 1.0}


def _fit_index(values: np.ndarray) -> np.ndarray:
    """Index of the best threshold along the last axis, for each row of ``values``.

    Ties are common (a QAG score of 4 questions takes 5 values, so every threshold between two
    of them classifies alike): the middle one of the tied thresholds is taken, the choice least
    sensitive to where the scores happen to fall.
    """
    filled = np.where(np.isnan(values), -np.inf, values)
    best = filled.max(axis=-1, keepdims=True)
    tied = filled >= best - 1e-12
    ranks = np.cumsum(tied, axis=-1)
    middle = (ranks[..., -1:] + 1) // 2
    return np.argmax(tied & (ranks >= middle), axis=-1)


def _fitted(values: np.ndarray) -> np.ndarray:
    """The fitted GRID threshold of each row of ``values``; NaN for a row with no defined value,
    which would otherwise "fit" the middle of the grid on no evidence."""
    return np.where(np.isnan(values).all(axis=-1), np.nan, GRID[_fit_index(values)])


def _as_arrays(scores: Sequence[float] | np.ndarray,
               labels: Sequence[bool] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=bool)
    if s.shape != y.shape or s.ndim != 1:
        raise ValueError(f"scores and labels must be two lists of one length, got {s.shape} "
                         f"and {y.shape}")
    if s.size and (np.isnan(s).any() or s.min() < 0.0 or s.max() > 1.0):
        raise ValueError("scores must lie in [0, 1]")
    return s, y


def _bootstrap_weights(n: int, resamples: int, rng: np.random.Generator):
    """Yield blocks of resample multiplicities (how often each row was drawn), shape (b, n)."""
    block = max(1, _CHUNK_CELLS // max(n, 1))
    done = 0
    while done < resamples:
        size = min(block, resamples - done)
        yield rng.multinomial(n, np.full(n, 1.0 / n), size=size).astype(float)
        done += size


def _interval(samples: np.ndarray, value: float) -> Interval:
    finite = samples[~np.isnan(samples)]
    point = None if np.isnan(value) else float(value)
    if finite.size == 0:
        return Interval(point, None, None)
    if finite.max() - finite.min() < 1e-12:
        # A statistic no resample moves (every row in one cell, a threshold that passes every
        # resample alike): the bootstrap says nothing about its uncertainty.
        return Interval(point, None, None, constant=True)
    tail = (1.0 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return Interval(point, float(low), float(high))


class Agreement(BaseModel):
    """Agreement at one threshold: confusion counts and each metric with its interval, as the
    calibration report stores it."""

    threshold: float
    n: int
    positives: int
    base_rate: float | None
    tp: int
    fp: int
    fn: int
    tn: int
    accuracy: Interval
    kappa: Interval
    tpr: Interval
    tnr: Interval
    precision: Interval
    recall: Interval
    f1: Interval

    @property
    def metrics(self) -> dict[str, Interval]:
        """Each of ``AGREEMENT_METRICS`` by name."""
        return {name: getattr(self, name) for name in AGREEMENT_METRICS}


def _agreement(predicted: np.ndarray, labels: np.ndarray, threshold: float, resamples: int,
               rng: np.random.Generator) -> Agreement:
    """Agreement of fixed pass/fail predictions with labels, intervals by paired bootstrap.

    With the predictions fixed, a row is one of four (prediction, label) cells, so resampling
    rows with replacement is exactly a multinomial draw over the four cells' frequencies.
    """
    cells = np.array([np.sum(predicted & labels), np.sum(predicted & ~labels),
                      np.sum(~predicted & labels), np.sum(~predicted & ~labels)], dtype=float)
    n = int(labels.size)
    point = metrics_from_counts(*cells)
    if n:
        drawn = rng.multinomial(n, cells / n, size=resamples).astype(float)
        draws = metrics_from_counts(*drawn.T)
    else:
        draws = {name: np.array([]) for name in AGREEMENT_METRICS}
    metrics = {name: _interval(np.asarray(draws[name]), float(point[name]))
               for name in AGREEMENT_METRICS}
    tp, fp, fn, tn = (int(c) for c in cells)
    # A proportion the bootstrap cannot move (a judge right on all 20 rows is not certainly
    # right on all rows) still has a sound interval: Wilson's, from its counts.
    proportions = {"accuracy": (tp + tn, n), "tpr": (tp, tp + fn), "recall": (tp, tp + fn),
                   "tnr": (tn, tn + fp), "precision": (tp, tp + fp)}
    for name, (successes, trials) in proportions.items():
        if metrics[name].constant and trials:
            low, high = wilson_bounds(successes, trials)
            metrics[name] = Interval(metrics[name].value, low, high, constant=True,
                                     method="wilson")
    positives = int(labels.sum())
    return Agreement(threshold=threshold, n=n, positives=positives,
                     base_rate=positives / n if n else None, tp=tp, fp=fp, fn=fn, tn=tn,
                     **metrics)


def agreement_at(scores: Sequence[float], labels: Sequence[bool], threshold: float, *,
                 resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> Agreement:
    """Agreement when the evaluator passes every row whose score reaches ``threshold``."""
    s, y = _as_arrays(scores, labels)
    return _agreement(s >= threshold - 1e-12, y, threshold, resamples,
                      np.random.default_rng(seed))


def agreement_curve(scores: Sequence[float], labels: Sequence[bool]) -> dict[str, list[float | None]]:
    """kappa, F1 and Youden's J at each threshold of GRID (None where undefined)."""
    s, y = _as_arrays(scores, labels)
    values = metrics_from_counts(*_counts(np.ones((1, s.size)), s, y, GRID))
    curve: dict[str, list[float | None]] = {"threshold": [float(t) for t in GRID]}
    for name in FIT_METRICS:
        curve[name] = [None if np.isnan(v) else float(v) for v in values[name][0]]
    return curve


def _check_metric(metric: str) -> None:
    if metric not in FIT_METRICS:
        raise ValueError(f"unknown metric {metric!r}; expected one of {', '.join(FIT_METRICS)}")


def fit_threshold(scores: Sequence[float] | np.ndarray, labels: Sequence[bool] | np.ndarray,
                  metric: str = "kappa") -> float:
    """The GRID threshold where ``metric`` agrees best with the labels; NaN where the metric is
    undefined at every threshold (no rows)."""
    _check_metric(metric)
    s, y = _as_arrays(scores, labels)
    values = metrics_from_counts(*_counts(np.ones((1, s.size)), s, y, GRID))[metric]
    return float(_fitted(values)[0])


def fitted_threshold_interval(scores: Sequence[float], labels: Sequence[bool],
                              metric: str = "kappa", *, resamples: int = DEFAULT_RESAMPLES,
                              seed: int = 0) -> Interval:
    """The fitted threshold, and the interval of thresholds fitted on paired resamples."""
    _check_metric(metric)
    s, y = _as_arrays(scores, labels)
    value = fit_threshold(s, y, metric)
    rng = np.random.default_rng(seed)
    fits = [_fitted(metrics_from_counts(*_counts(w, s, y, GRID))[metric])
            for w in _bootstrap_weights(s.size, resamples, rng)] if s.size else []
    return _interval(np.concatenate(fits) if fits else np.array([]), value)


def fit_problem(agreement: Agreement, threshold: Interval, metric: str) -> str | None:
    """Why a fitted threshold does not separate the labels, or None when it does.

    Such a fit passes or fails every row, or its agreement is no better than chance: a judge
    near chance makes every threshold above 0 score kappa < 0, so the fit lands on 0.00 (pass
    everything), kappa exactly 0 and a bootstrap interval of one value.
    """
    if threshold.value is None or agreement.n == 0:
        return None  # nothing was fitted: reported as such
    passed = agreement.tp + agreement.fp
    if passed == agreement.n:
        return (f"the best threshold by {metric}, {threshold.value:.2f}, passes every one of "
                f"the {agreement.n} scored rows")
    if passed == 0:
        return (f"the best threshold by {metric}, {threshold.value:.2f}, fails every one of "
                f"the {agreement.n} scored rows")
    kappa = agreement.metrics["kappa"]
    if kappa.value is None:
        return "kappa is undefined at the fitted threshold"
    if kappa.constant and kappa.value < 1.0:  # a perfect split is constant too, and fine
        return f"kappa is {kappa.value:.2f} in every bootstrap resample"
    if kappa.value <= 0:
        return f"kappa at the fitted threshold is {kappa.value:.2f}, no better than chance"
    return None


def stratified_folds(labels: Sequence[bool] | np.ndarray, folds: int, seed: int = 0) -> np.ndarray:
    """A fold number per row; each class is shuffled and dealt round-robin over the folds."""
    y = np.asarray(labels, dtype=bool)
    if folds < 2:
        raise ValueError(f"cross-validation needs at least 2 folds, got {folds}")
    rng = np.random.default_rng(seed)
    assignment = np.empty(y.size, dtype=int)
    offset = 0
    for cls in (True, False):
        rows = rng.permutation(np.flatnonzero(y == cls))
        assignment[rows] = (np.arange(rows.size) + offset) % folds
        offset += rows.size
    return assignment


class CrossValidated(BaseModel):
    folds: int
    thresholds: list[float]
    agreement: Agreement


def cross_validate(scores: Sequence[float], labels: Sequence[bool], folds: int,
                   metric: str = "kappa", *, resamples: int = DEFAULT_RESAMPLES,
                   seed: int = 0) -> CrossValidated:
    """Agreement of out-of-fold predictions: each fold is judged at the threshold fitted on the
    other folds, so the figure is not the in-sample optimum."""
    _check_metric(metric)
    s, y = _as_arrays(scores, labels)
    if folds > s.size:
        raise ValueError(f"--folds {folds} is more than the {s.size} scored row(s)")
    fold_of = stratified_folds(y, folds, seed)
    predicted = np.zeros(s.size, dtype=bool)
    thresholds = []
    for fold in range(folds):
        held_out = fold_of == fold
        threshold = fit_threshold(s[~held_out], y[~held_out], metric)
        thresholds.append(threshold)
        predicted[held_out] = s[held_out] >= threshold - 1e-12
    agreement = _agreement(predicted, y, float(np.median(thresholds)), resamples,
                           np.random.default_rng(seed + 1))
    return CrossValidated(folds=folds, thresholds=thresholds, agreement=agreement)


def wilson_interval(successes: int, trials: int) -> Interval:
    """A proportion with its 95% Wilson score interval (sound at small n and near 0 or 1)."""
    if trials == 0:
        return Interval(None, None, None)
    low, high = wilson_bounds(successes, trials)
    return Interval(successes / trials, low, high)


def cohen_kappa(predicted: Sequence[bool], labels: Sequence[bool]) -> float | None:
    """Cohen's kappa of two pass/fail lists; None where it is undefined."""
    p = np.asarray(predicted, dtype=bool)
    y = np.asarray(labels, dtype=bool)
    value = metrics_from_counts(*(np.float64(np.sum(c)) for c in (p & y, p & ~y, ~p & y,
                                                                  ~p & ~y)))["kappa"]
    return None if np.isnan(value) else float(value)
