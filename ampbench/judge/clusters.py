"""Do the trial levels cluster?  Identical trials landing on a fast or a slow CPU and staying there.

On the measured toy machine identical trials ran at ~10.5k or ~14k samples/s: two clusters, not a
spread.  A t bound on a handful of such trials can be fooled (tests/verdict_sim.py, "bimodal"), so the
rules say so when they see it.  Each arm's per-trial log levels are centred on the arm's mean (the arms
may truly differ) and pooled; the best split of the pooled residuals into two contiguous groups (the
1-D two-means optimum) is a clustering when Ashman's D = sqrt(2) |m1 - m2| / sqrt(s1^2 + s2^2) is at
least D_MIN, each group holds at least MIN_GROUP trials, and the groups are at least MIN_GAP apart.
D > 2 separates a mixture of two normals, but the best split of a few normal values reaches D 3-4 by
itself; with D_MIN 6 and groups of 3, a normal spread over 2 x 5 trials is called clustered 0.75% of
the time (2 x 10: 0.05%), and the measured machine's two clusters (29% apart, ~2% inside) 59% of the
time with 5 trials per arm (with 3 per arm a cluster of fewer than 3 cannot be seen).  When the trials
recorded where they ran (trackers.placement), the main thread's CPU of each cluster is named: that is
the interference evidence, and `run --affinity` the remedy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

D_MIN = 6.0
MIN_GAP = 0.03  # log scale: clusters closer than ~3% are noise for a 5% threshold
MIN_GROUP = 3  # trials per cluster: two close trials alone make any split look separated


@dataclass(frozen=True)
class Clusters:
    gap: float  # log-scale distance between the two groups' means
    ashman_d: float
    sizes: tuple[int, int]  # (slow group, fast group)
    cpus: tuple[list[int], list[int]]  # main CPUs seen in the slow and the fast group

    def describe(self) -> str:
        where = ""
        if self.cpus[0] or self.cpus[1]:
            where = (f"; the slow trials' main thread ran on CPU {_cpus(self.cpus[0])}, the fast ones' on "
                     f"CPU {_cpus(self.cpus[1])}")
        return (f"trial levels cluster: {self.sizes[0]} trials ~{math.exp(self.gap) - 1:.0%} slower than the other "
                f"{self.sizes[1]} (Ashman's D {self.ashman_d:.1f}), as when processes land on faster and slower "
                f"CPUs{where}; pin the run with --affinity, or add seeds (--until-decided)")


def _cpus(v: list[int]) -> str:
    return ",".join(map(str, v)) if v else "unknown"


def find(arms: Sequence[Sequence[float]], cpus: Sequence[Sequence[list[int]]] | None = None) -> Clusters | None:
    """`arms`: per-trial log levels of each arm; `cpus`: per trial, the main CPUs it ran on (optional)."""
    res: list[float] = []
    where: list[list[int]] = []
    for i, a in enumerate(arms):
        if len(a) < 2:
            continue
        m = float(np.mean(a))
        for j, val in enumerate(a):
            res.append(float(val) - m)
            where.append(list(cpus[i][j]) if cpus is not None and i < len(cpus) and j < len(cpus[i]) else [])
    if len(res) < 4:
        return None
    order = np.argsort(res)
    x = np.asarray(res)[order]
    best: tuple[float, int] | None = None
    for cut in range(MIN_GROUP, len(x) - MIN_GROUP + 1):
        lo, hi = x[:cut], x[cut:]
        ss = float(((lo - lo.mean()) ** 2).sum() + ((hi - hi.mean()) ** 2).sum())
        if best is None or ss < best[0]:
            best = (ss, cut)
    if best is None:
        return None
    cut = best[1]
    lo, hi = x[:cut], x[cut:]
    s = math.sqrt(max(float(lo.var(ddof=1)) + float(hi.var(ddof=1)), 1e-12))
    gap = float(hi.mean() - lo.mean())
    d = math.sqrt(2) * gap / s
    if d < D_MIN or gap < MIN_GAP:
        return None
    slow = sorted({c for k in order[:cut] for c in where[k]})
    fast = sorted({c for k in order[cut:] for c in where[k]})
    return Clusters(gap=gap, ashman_d=d, sizes=(cut, len(x) - cut), cpus=(slow, fast))
