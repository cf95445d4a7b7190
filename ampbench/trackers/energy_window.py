"""Energy and peak memory of a window known only afterwards, from an NVML poller's timeline.

A command trial's measured window (its first measured step's start to its last step's end) is
learnt from the start-up hook's step events, after the program ran; NVML was polled the whole time
by the worker (`nvml.Poller(timeline=True)`), one sample every ~0.1 s with its time. Both sides
read `time.perf_counter()`: CLOCK_MONOTONIC on Linux, one clock for every process of the machine.
The energy counter is interpolated linearly at the window's bounds (and at the bounds of each
evaluation inside it, whose energy is left out, as the built-in workloads pause NVML for one); a
bound outside the samples gives no energy (None, "not measured"), never a guess.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

Sample = tuple[float, float | None, int | None, int | None]   # (time, energy mJ, own memory, device used)


def counter_at(points: Sequence[tuple[float, float]], t: float) -> float | None:
    """The counter at time `t`, linear between the samples around it; None outside them."""
    if not points or t < points[0][0] or t > points[-1][0]:
        return None
    for (t0, e0), (t1, e1) in pairwise(points):
        if t0 <= t <= t1:
            return e0 if t1 == t0 else e0 + (e1 - e0) * (t - t0) / (t1 - t0)
    return points[-1][1]   # a single sample exactly at t


def window_energy_j(timeline: Sequence[Sample], start: float, end: float,
                    gaps: Sequence[tuple[float, float]] = ()) -> float | None:
    """Joules spent from `start` to `end` minus the `gaps` inside it; None when a bound is not covered."""
    points = [(t, e) for t, e, _, _ in timeline if e is not None]
    e0, e1 = counter_at(points, start), counter_at(points, end)
    if e0 is None or e1 is None or end < start:
        return None
    spent = e1 - e0
    for a, b in gaps:
        a, b = max(a, start), min(b, end)
        ea, eb = counter_at(points, a), counter_at(points, b)
        if b > a and ea is not None and eb is not None:
            spent -= eb - ea
    return max(0.0, spent) / 1000.0


def window_peaks(timeline: Sequence[Sample], start: float, end: float) -> tuple[int | None, int | None]:
    """(own processes' peak, device-used peak) over the samples inside the window; (None, None) if none is."""
    inside = [x for x in timeline if start <= x[0] <= end]
    own = [o for _, _, o, _ in inside if o]
    dev = [d for _, _, _, d in inside if d is not None]
    return (max(own) if own else None), (max(dev) if dev else None)
