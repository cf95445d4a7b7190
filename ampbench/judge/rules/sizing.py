"""The seed planner's arithmetic that the seeded rules' `plan` functions share (judge.planner runs them).

Each seeded rule sizes its own row (judge/rules/traits.py `Seeding.plan`): the between-trial spread the run
showed and the effect the rule must detect; these are the spreads they are made of.
"""

from __future__ import annotations

import math

from ampbench.config import Thresholds
from ampbench.judge import measure, stats
from ampbench.record.models import Trial
from ampbench.results.baselines import compact


def log_medians(trials: list[Trial], metric: str) -> list[float]:
    """Log per-trial median throughput."""
    return measure.log_rates([compact(t, metric).rates() for t in trials])


def pooled_sd(*groups: list[float]) -> float | None:
    return stats.pooled_sd(groups)[0]


def metric_values(trials: list[Trial], metric: str) -> list[float]:
    """The trials' finite values of the suite's metric."""
    return [float(t.metrics[metric]) for t in trials if metric in t.metrics and math.isfinite(t.metrics[metric])]


def margin_k(th: Thresholds, sd: float | None) -> float:
    """The margin's sigma factor when the noise term sets it (then the margin itself is estimated)."""
    return th.metric_sigma_k if sd is not None and th.metric_sigma_k * sd >= 0.8 * th.metric_abs_tol else 0.0
