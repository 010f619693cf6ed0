"""The interval estimates a run's record reports; they live in :mod:`referee.stats` with the
rest of referee's statistics, and keep their names here for the record's modules."""

from referee.stats._intervals import BOOTSTRAP_RESAMPLES as BOOTSTRAP_RESAMPLES
from referee.stats._intervals import BOOTSTRAP_SEED as BOOTSTRAP_SEED
from referee.stats._intervals import bootstrap_mean_ci as bootstrap_mean_ci
from referee.stats._intervals import wilson_bounds as wilson_bounds
