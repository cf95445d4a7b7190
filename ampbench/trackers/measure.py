"""Measurement: step timing, peak memory, and the throughput summary of a trial.

Throughput is computed from the stored per-step records (never from running averages), over the
measured window only (warm-up steps excluded), as pytest-benchmark computes from raw samples.
"""

from __future__ import annotations

import math
import resource
import time
from dataclasses import dataclass

import numpy as np

from ampbench.results import Memory, StepRecord, Throughput
from ampbench.trackers import device


class StepClock:
    """Times one optimizer step; `time.perf_counter` with a device sync only when asked.

    Each step ends with a host read of the loss (and, with a live GradScaler, of found_inf),
    which already waits for the device; so no extra synchronisation is needed per step. The
    measured window is bracketed by an explicit `device.synchronize()` instead.
    """

    def __init__(self) -> None:
        self._t0 = 0.0

    def start(self) -> None:
        self._t0 = time.perf_counter()

    def stop(self) -> float:
        return time.perf_counter() - self._t0


@dataclass
class MemoryTracker:
    """Peak memory over the measured window, from the best source this device has."""

    _dev: device.DeviceMemory | None = None
    _host_stat: bool = False

    def start(self) -> None:
        self._dev = device.DeviceMemory()
        if self._dev.gpu:
            device.synchronize()
            self._dev.reset()
            return
        try:
            from paddle.base import core

            core.host_memory_stat_reset_peak_value("Allocated", 0)
            self._host_stat = True
        except Exception:
            self._host_stat = False

    def stop(self) -> Memory:
        rss = rss_peak_bytes()
        if self._dev is not None and self._dev.gpu:
            device.synchronize()
            return Memory(source="cuda", rss_peak_bytes=rss, **self._dev.peaks())
        if self._host_stat:
            from paddle.base import core

            peak = int(core.host_memory_stat_peak_value("Allocated", 0))
            return Memory(source="host", peak_allocated_bytes=peak, rss_peak_bytes=rss)
        return Memory(source="none", rss_peak_bytes=rss)


def rss_peak_bytes() -> int:
    """Peak resident set of this process (Linux reports KiB)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def throughput(steps: list[StepRecord], counts: dict[str, int] | None = None) -> Throughput:
    """Samples/s over the measured (non-warm-up) steps; `counts` adds e.g. tokens/s."""
    measured = [s for s in steps if not s.warmup]
    if not measured:
        return Throughput()
    times = np.array([s.time_s for s in measured], dtype=float)
    total = float(times.sum())
    samples = sum(s.samples for s in measured)
    extra = {k: v / total for k, v in (counts or {}).items()} if total > 0 else {}
    return Throughput(
        samples_per_s=samples / total if total > 0 else 0.0,
        step_time_median_s=float(np.median(times)),
        step_time_p90_s=float(np.percentile(times, 90)),
        measured_steps=len(measured),
        extra_per_s=extra,
    )


def is_finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)
