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


def tree_mark(pid: int) -> LoadMark:
    """A mark whose own CPU is the whole process tree's under `pid` (core.processes.tree_cpu_s): a command
    trial's worker, its program and the program's workers are "own"; everything else is another process."""
    from ampbench.core.processes import tree_cpu_s

    return LoadMark(_busy_seconds(), tree_cpu_s(pid), time.perf_counter())


class LoadSamples:
    """The machine's busy CPU and a process tree's own CPU, sampled by a command trial's worker at every poll while
    the program runs (and once after it is reaped): `others(start, end)` is the cores other processes used over
    the program's measured steps, read between the samples that enclose them (the hook's step ends and the
    worker's marks are on one monotonic clock), so a window shorter than a poll still has a rate."""

    def __init__(self, root_pid: int) -> None:
        self.root = root_pid
        self.marks: list[LoadMark] = []

    def sample(self) -> None:
        self.marks.append(tree_mark(self.root))

    def others(self, start: float | None, end: float | None) -> float | None:
        """Cores other processes used from the last sample at or before `start` to the first at or after `end`
        (perf_counter seconds); None without such samples."""
        if start is None or end is None or end < start:
            return None
        before = [m for m in self.marks if m.wall_s <= start]
        after = [m for m in self.marks if m.wall_s >= end]
        return others_cpu(before[-1], after[0]) if before and after else None
