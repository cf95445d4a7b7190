"""The one measurement definition: a trial's and a mode's samples/s (pytest-benchmark's `Stats`).

- A trial's figure is the median of its per-step rates over the measured steps (warm-up and
  evaluations excluded): robust to a stall, one number per replication unit
  (`record.rates.trial_rate` of `Trial.step_rates()`, the value the trial's assembler,
  `record.assemble.throughput`, stores in `throughput.samples_per_s`).
- A mode's figure is the geometric mean of its ok trials' figures, over the trials with at least
  `MIN_STEPS` measured steps when any has them; its interval is the two-sided `confidence`
  t interval on the log scale (two trials at least).
- A speedup is the ratio of two modes' geometric means: the speed rule's point estimate.

The console, summary.csv, `ampbench summary`, check.json, report.md/html, the history line and
the dashboard all read these numbers, so a mode shows one samples/s everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ampbench.config.suite import MIN_MEASURED_STEPS
from ampbench.judge.distributions import t_ppf
from ampbench.record.rates import floor_rate, trial_rate, trimmed_rate

MIN_TRIALS = 2  # per side: one trial cannot show seed-to-seed spread
MIN_STEPS = MIN_MEASURED_STEPS  # measured steps per trial for a usable per-trial median


@dataclass(frozen=True)
class ModeStats:
    """A mode's throughput: per-trial figures and their geometric mean with its interval."""

    per_trial: tuple[float, ...]   # the trials' figures the mode's figure is made of
    short: tuple[int, ...] = ()    # measured steps of trials left out for having < MIN_STEPS
    confidence: float = 0.95

    @property
    def samples_per_s(self) -> float | None:
        return geomean(self.per_trial) if self.per_trial else None

    @property
    def interval(self) -> tuple[float, float] | None:
        """Two-sided `confidence` t interval of the geometric mean (log scale), >= 2 trials."""
        k = len(self.per_trial)
        if k < MIN_TRIALS:
            return None
        logs = np.log(self.per_trial)
        half = t_ppf((1 + self.confidence) / 2, k - 1) * float(np.std(logs, ddof=1)) / math.sqrt(k)
        centre = float(np.mean(logs))
        return float(np.exp(centre - half)), float(np.exp(centre + half))


def judged_rate(rates: np.ndarray) -> float | None:
    """A trial's figure as the rules use it: its samples/s (`trial_rate`) when it has at least
    MIN_STEPS measured steps, else None (too short to stand for the trial)."""
    return trial_rate(rates) if len(rates) >= MIN_STEPS else None


def judged_floor(rates: np.ndarray) -> float | None:
    """A trial's fast-floor samples/s (record.rates.floor_rate): the history rule's disturbance-robust
    figure; None below FLOOR_MIN_STEPS measured steps."""
    return floor_rate(rates)


def judged_trimmed(rates: np.ndarray) -> float | None:
    """A trial's trimmed mean samples/s (record.rates.trimmed_rate): the history rule's figure that sees the
    slow steps; None below FLOOR_MIN_STEPS measured steps."""
    return trimmed_rate(rates)


def run_floor(floors: Sequence[float]) -> float | None:
    """A run's fast floor for one mode: the median of its trials' floors (a trial that ran wholly in a
    slow episode is one of three and moves the median by nothing), None without any."""
    return float(np.exp(np.median(np.log(floors)))) if len(floors) else None


def geomean(values: Sequence[float] | np.ndarray) -> float:
    """The geometric mean of per-trial figures: how a mode's (or a run's) samples/s is made of its
    trials' figures, and the centre of every log-ratio comparison."""
    return float(np.exp(np.mean(np.log(np.asarray(values, dtype=float)))))


def log_rates(rates: Sequence[np.ndarray]) -> list[float]:
    """log samples/s of each trial that has a judged figure (the scale the rate comparisons work on)."""
    return [math.log(r) for r in (judged_rate(x) for x in rates) if r is not None]


def mode_stats(rate_groups: Sequence[np.ndarray], confidence: float = 0.95) -> ModeStats:
    """From each ok trial's per-step rates: trials with >= MIN_STEPS measured steps when any has
    them (the speed rule's rule), else every trial with a measured step (a figure, marked short)."""
    usable = [g for g in rate_groups if len(g)]
    long = [g for g in usable if len(g) >= MIN_STEPS]
    keep = long or usable
    short = tuple(len(g) for g in usable if len(g) < MIN_STEPS)
    return ModeStats(tuple(trial_rate(g) or 0.0 for g in keep), short, confidence)


def speedup(num: ModeStats, den: ModeStats) -> float | None:
    """Ratio of geometric means (AMP over FP32): the speed rule's point estimate."""
    a, b = num.samples_per_s, den.samples_per_s
    return a / b if a and b else None
