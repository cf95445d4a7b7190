"""Machine load over a measured window (Linux /proc/stat): how much CPU other processes took.

A worker that keeps its own CPU share can still slow down when other processes run on the other
cores (shared caches, memory bandwidth, SMT siblings, a hypervisor's steal time).  The checker uses
this figure as evidence of a disturbed measurement; None where /proc/stat is not available.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # user nice system irq softirq steal (idle=3, iowait=4 are not busy)


def _busy_seconds() -> float | None:
    try:
        first = Path("/proc/stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    if not first or first[0] != "cpu":
        return None
    vals = [int(v) for v in first[1:]]
    return sum(vals[i] for i in _BUSY_FIELDS if i < len(vals)) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class LoadMark:
    """A point in time: machine busy CPU seconds, this process's CPU seconds, wall clock."""

    busy_s: float | None
    own_s: float
    wall_s: float


def mark() -> LoadMark:
    return LoadMark(_busy_seconds(), time.process_time(), time.perf_counter())


def others_cpu(start: LoadMark | None, end: LoadMark | None = None) -> float | None:
    """CPU cores used by other processes (and steal) between two marks, or None when unknown."""
    end = end or mark()
    if start is None or start.busy_s is None or end.busy_s is None or end.wall_s <= start.wall_s:
        return None
    other = (end.busy_s - start.busy_s) - (end.own_s - start.own_s)
    return max(0.0, other / (end.wall_s - start.wall_s))
