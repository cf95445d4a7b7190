"""The rate functions: a trial's per-step samples/s and the figures made of them, one definition each.

The global batch (samples of one optimizer step over every rank), the per-step rates a `Trial` and a baseline
file's compact trial share, and a trial's median, fast-floor and trimmed-mean rates.  judge/measure.py makes a
mode's figure of these; the trial's assembler (record/assemble.py) stores the median as `throughput.samples_per_s`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np


def global_batch(batch_size: int, grad_accum: int = 1, world_size: int = 1) -> int:
    """Samples of one optimizer step: the per-device batch times the micro-batches accumulated times the
    ranks.  The one formula (tests/test_one_measurement.py greps for another): the built-in loop's
    replicas, a command trial's steps and a step that did not record its samples all count with it."""
    return batch_size * max(1, grad_accum) * max(1, world_size)


def trial_rate(rates: np.ndarray) -> float | None:
    """A trial's samples/s: the median of its per-step rates (judge/measure.py defines the rest)."""
    return float(np.median(rates)) if len(rates) else None


def steps_rate(steps: Iterable[Any]) -> float:
    """Samples over time of the given steps (each with `samples` and `time_s`), 0 without time: what a program's
    own throughput line measures over its interval (Trial.mean_rate over the measured steps; the command
    cross-check over a line's own steps)."""
    steps = list(steps)
    busy = sum(s.time_s for s in steps)
    return sum(s.samples for s in steps) / busy if busy > 0 else 0.0


FLOOR_PERCENTILE = 95  # of the per-step rates: one step in 20 is faster than a trial's fast floor
FLOOR_MIN_STEPS = 20   # fewer measured steps leave no step to spare above the percentile


def floor_rate(rates: np.ndarray) -> float | None:
    """A trial's fast-floor samples/s: the 95th percentile of its per-step rates (the 5th of its step
    times), None below FLOOR_MIN_STEPS measured steps.

    Why a second figure beside the median: on a shared or virtual machine a trial runs through episodes
    in which every step is up to twice as slow (another tenant on the core, SMT siblings, a hypervisor);
    they move the median by up to 45% while the steps between them keep their speed.  A change of the
    code moves every step, the fastest ones too.  The history comparison (judge.rules.history_pooled)
    decides a slowdown on this figure, measured on real run sets in docs/checks.md."""
    return float(floor_rates_batch(np.asarray(rates))) if len(rates) >= FLOOR_MIN_STEPS else None


def floor_rates_batch(rates: np.ndarray) -> np.ndarray:
    """floor_rate over the last axis (per-step rates of many trials at once: tests/test_floor_sim.py)."""
    return np.percentile(rates, FLOOR_PERCENTILE, axis=-1)


TRIM_SHARE = 0.05  # the slowest steps left out of a trial's trimmed mean rate (one step in 20)


def trimmed_rate(rates: np.ndarray) -> float | None:
    """A trial's trimmed mean samples/s: its samples over the time of its fastest 95% of measured steps
    (the harmonic mean of those steps' rates, steps of equal samples), None below FLOOR_MIN_STEPS.

    Why a third figure: the floor (and the median) cannot see a change that slows only part of the steps (a
    host sync or a data-pipeline stall in 30% of the steps, a slowdown after warm-up), which costs the user
    its full share of the time; the trimmed mean pays for every step but the slowest one in 20 (a lone
    stall).  The slow episodes of a shared machine move it as much as the median, which is why the history
    rule counts its FAIL only where the run records a steady step-time shape (judge.rules.history_pooled)."""
    return float(trimmed_rates_batch(np.asarray(rates))) if len(rates) >= FLOOR_MIN_STEPS else None


def trimmed_rates_batch(rates: np.ndarray) -> np.ndarray:
    """trimmed_rate over the last axis (tests/test_floor_sim.py decides many simulated trials at once)."""
    keep = max(1, round(rates.shape[-1] * (1 - TRIM_SHARE)))
    fastest = -np.sort(-rates, axis=-1)[..., :keep]
    return keep / np.sum(1.0 / fastest, axis=-1)


def rates_from(times: list[float], samples: list[int] | int) -> np.ndarray:
    """Per-step samples/s from step times and samples (one int when constant); the one definition
    shared by a Trial and a baseline file's compact trial.  Zero-time and zero-sample steps are dropped."""
    t = np.asarray(times, dtype=float)
    n = np.broadcast_to(np.asarray(samples, dtype=float), t.shape) if len(t) else t
    keep = (t > 0) & (n > 0)
    return n[keep] / t[keep]
