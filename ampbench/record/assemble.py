"""One assembler for a trial's record, fed by the built-in loop and by the program hook alike.

`feed(step)` takes each finished optimizer step's `StepRecord` (the built-in loop's step log, or a hook
step event turned into one); `finish()` sets every field derived from the steps and the measured
figures: the throughput summary (`throughput`) and the energy per sample.  A field derived anywhere else
would be computed twice, and the two producers once already disagreed on energy per sample.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ampbench.record.models import StepRecord, Throughput, Trial
from ampbench.record.rates import rates_from, trial_rate


def throughput(steps: list[StepRecord], counts: dict[str, int] | None = None,
               window_s: float | None = None) -> Throughput:
    """Samples/s over the measured (non-warm-up) steps; `counts` adds e.g. tokens/s.

    Computed from the stored per-step records (never from running averages), over the measured
    window only: the median per-step rate, the trial figure judge/measure.py defines for every surface."""
    measured = [s for s in steps if not s.warmup]
    if not measured:
        return Throughput(window_s=window_s)
    times = np.array([s.time_s for s in measured], dtype=float)
    total = float(times.sum())
    extra = {k: v / total for k, v in (counts or {}).items()} if total > 0 else {}
    rate = trial_rate(rates_from(list(times), [s.samples for s in measured]))
    return Throughput(
        samples_per_s=rate or 0.0,  # the median per-step rate: judge/measure.py's trial figure
        step_time_median_s=float(np.median(times)),
        step_time_p90_s=float(np.percentile(times, 90)),
        measured_steps=len(measured),
        extra_per_s=extra,
        window_s=window_s,
    )


def energy_per_sample(trial: Trial) -> float | None:
    """Joules per measured sample: the window's energy (NVML; summed over ranks) over the samples the
    measured steps recorded; None when either is missing."""
    samples = trial.measured_samples()
    energy = trial.memory.energy_j
    return energy / samples if energy is not None and samples else None


class TrialAssembler:
    """The record of one trial as its producer builds it: steps fed in order, derived fields at `finish`."""

    def __init__(self, trial: Trial) -> None:
        self.trial = trial

    def feed(self, step: StepRecord) -> None:
        """One finished optimizer step, in step order."""
        self.trial.steps.append(step)

    def feed_all(self, steps: Iterable[StepRecord]) -> None:
        for step in steps:
            self.feed(step)

    def finish(self, counts: dict[str, int] | None = None, window_s: float | None = None) -> Trial:
        """Set the derived fields, after every measured figure (memory, energy, every rank's) is in.
        `counts`: extra units over the measured steps (tokens); `window_s`: the measured window's wall time."""
        t = self.trial
        t.throughput = throughput(t.steps, counts, window_s=window_s)
        per_sample = energy_per_sample(t)
        if per_sample is not None:
            t.memory.energy_j_per_sample = per_sample
        return t
