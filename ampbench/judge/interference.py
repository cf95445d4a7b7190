"""Was a throughput change caused by the code, or by something else competing for the machine?

Evidence per trial (results.models.Interference): the process's CPU share over the measured steps
(CPU seconds / wall seconds, all threads), the CPU cores other processes used meanwhile, and on GPU the other processes seen on the device, the
SM clock and the throttle reasons (NVML).  A change is "explained" when the slower arm lost CPU share
roughly in proportion to its lost throughput, or ran while other processes used clearly more of the
machine, or beside a foreign GPU process, throttled, or clocked lower.  An equal share with a lower
throughput and no other evidence is not explained: that is a regression.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from ampbench.results.baselines import CompactTrial

SHARE_DROP = 0.10  # the slower arm lost at least this fraction of its CPU share
CLOCK_DROP = 0.05  # or its median SM clock is at least this much lower
OTHERS_MORE = 0.25  # or other processes used at least this many more CPU cores beside it
SATURATED = 0.5  # or other processes kept at least this share of the machine's cores busy
CPU_BOUND = 0.5  # ... which counts only for an arm busy on the CPU at least this share of its wall time
BENIGN_THROTTLE = {"none", "gpu_idle", "applications_clocks_setting", "ApplicationsClocksSetting", "GpuIdle"}


@dataclass(frozen=True)
class ArmEvidence:
    """What one arm (a mode in one run) says about its measurement conditions."""

    cpu_share: float | None
    others_cpu: float | None
    foreign: list[int]
    throttle: list[str]
    clock_mhz: float | None
    cpu_count: int = 0

    def describe(self) -> str:
        parts = [f"CPU share {self.cpu_share:.2f}" if self.cpu_share is not None else "CPU share not recorded"]
        if self.others_cpu is not None:
            parts.append(f"other processes {self.others_cpu:.2f} cores")
        if self.foreign:
            parts.append(f"other GPU processes {sorted(set(self.foreign))[:5]}")
        if self.throttle:
            parts.append(f"throttled ({', '.join(sorted(set(self.throttle)))})")
        if self.clock_mhz:
            parts.append(f"SM clock {self.clock_mhz:.0f} MHz")
        return ", ".join(parts)


def _median(v: list[float]) -> float | None:
    return float(statistics.median(v)) if v else None


def evidence(trials: list[CompactTrial]) -> ArmEvidence:
    inf = [t.interference for t in trials if t.interference is not None]
    return ArmEvidence(
        cpu_share=_median([i.cpu_share for i in inf if i.cpu_share is not None and i.cpu_share > 0]),
        others_cpu=_median([float(i.others_cpu) for i in inf if i.others_cpu is not None]),
        foreign=[p for i in inf for p in i.foreign_processes],
        throttle=[r for i in inf for r in i.throttle_reasons if r not in BENIGN_THROTTLE],
        clock_mhz=_median([i.sm_clock_mhz_median for i in inf if i.sm_clock_mhz_median]),
        cpu_count=max((t.cpu_count for t in trials), default=0),
    )


def _others_load(s: ArmEvidence, f: ArmEvidence) -> str | None:
    """Other processes' cores slow a process that runs on the CPU; one that mostly waits (sleeps, I/O, a
    blocking device sync: CPU share under CPU_BOUND) keeps its pace beside them, so their load does not explain
    its slowdown (a sleep-bound program 37% slower beside a loaded test run was withheld as disturbed)."""
    if s.others_cpu is None or (s.cpu_share is not None and s.cpu_share < CPU_BOUND):
        return None
    if f.others_cpu is not None and s.others_cpu >= f.others_cpu + OTHERS_MORE:
        return (f"other processes used {s.others_cpu:.2f} CPU cores beside it vs {f.others_cpu:.2f} "
                "(shared caches, memory bandwidth and SMT siblings slow a process that keeps its share)")
    if s.cpu_count and s.others_cpu >= SATURATED * s.cpu_count:
        return (f"other processes kept {s.others_cpu:.2f} of the machine's {s.cpu_count} cores busy: "
                "a saturated machine does not measure the code")
    return None


def explain(slow: list[CompactTrial], fast: list[CompactTrial], rate_ratio: float, tolerance: float) -> str | None:
    """Why the slower arm (throughput `rate_ratio` < 1 times the other's) was disturbed, or None when
    nothing explains it.  Lost CPU share explains the slowdown when the share fell by SHARE_DROP or more
    and at least as much as the throughput did (within `tolerance`)."""
    s, f = evidence(slow), evidence(fast)
    reasons = []
    # A share that fell with the throughput means lost CPU only for a program that was busy on the CPU: one
    # that mostly waits (sleep, I/O, a device sync) spends the same CPU over a longer wall when it slows.
    if s.cpu_share is not None and f.cpu_share and f.cpu_share >= CPU_BOUND:
        share_ratio = s.cpu_share / f.cpu_share
        if share_ratio <= 1 - SHARE_DROP and rate_ratio >= share_ratio * (1 - tolerance):
            reasons.append(f"CPU share {s.cpu_share:.2f} vs {f.cpu_share:.2f} CPU s per wall s "
                           f"({share_ratio:.0%} of the other side's, throughput {rate_ratio:.0%}): another "
                           "process took the processor")
    load = _others_load(s, f)
    if load:
        reasons.append(load)
    if s.foreign and not f.foreign:
        reasons.append(f"other processes used the GPU beside it (PIDs {sorted(set(s.foreign))[:5]})")
    if s.throttle and not f.throttle:
        reasons.append(f"the GPU throttled ({', '.join(sorted(set(s.throttle)))})")
    if s.clock_mhz and f.clock_mhz and s.clock_mhz < f.clock_mhz * (1 - CLOCK_DROP):
        reasons.append(f"median SM clock {s.clock_mhz:.0f} vs {f.clock_mhz:.0f} MHz")
    return "; ".join(reasons) or None


UNLIKE_SHARE = OTHERS_MORE / 2  # of the machine's cores: the others' load told apart on a machine of any size


def _against(x: ArmEvidence, y: ArmEvidence, who: str, other: str, ratio: float) -> list[str]:
    """What says side `x` was measured under worse conditions than side `y` (its throughput `ratio` times y's): the
    machine's load, a foreign GPU process, throttling, a lower clock, whichever came out faster; a lower CPU share
    only where x is also slower by as much (a GPU trial's share moves with how it waits, not with load)."""
    out = []
    if x.cpu_share is not None and y.cpu_share and (share := x.cpu_share / y.cpu_share) <= 1 - SHARE_DROP \
            and ratio <= 1 and ratio >= share * (1 - SHARE_DROP):
        out.append(f"{who}'s CPU share {x.cpu_share:.2f} vs {y.cpu_share:.2f} CPU s per wall s in {other}")
    cores = x.cpu_count or y.cpu_count
    if x.others_cpu is not None and cores and x.others_cpu >= SATURATED * cores:
        out.append(f"other processes kept {x.others_cpu:.2f} of the machine's {cores} cores busy beside {who}")
    elif x.others_cpu is not None and y.others_cpu is not None and \
            x.others_cpu >= y.others_cpu + max(OTHERS_MORE, UNLIKE_SHARE * cores):
        out.append(f"other processes used {x.others_cpu:.2f} CPU cores beside {who} vs {y.others_cpu:.2f} beside {other}")
    if x.foreign and not y.foreign:
        out.append(f"other processes used the GPU beside {who} (PIDs {sorted(set(x.foreign))[:5]})")
    if x.throttle and not y.throttle:
        out.append(f"the GPU throttled in {who} ({', '.join(sorted(set(x.throttle)))})")
    if x.clock_mhz and y.clock_mhz and x.clock_mhz < y.clock_mhz * (1 - CLOCK_DROP):
        out.append(f"median SM clock {x.clock_mhz:.0f} MHz in {who} vs {y.clock_mhz:.0f} in {other}")
    return out


def unlike(cur: list[CompactTrial], base: list[CompactTrial], names: tuple[str, str], ratio: float = 1.0) -> str | None:
    """The evidence sentence when two runs (this one, its baseline) were not measured alike, or None: either side
    loaded, saturated, throttled or beside a foreign GPU process, weighed the same way on both sides and whichever
    came out faster.  A comparison of runs judges absolute throughput, which load moves both ways (identical
    toy runs under a busy loop per core came out 17% slower and 34% faster than idle ones): a FAIL and a PASS
    alike are withheld.  `ratio`: this run's throughput over the baseline's (the CPU share counts on the slower
    side only).  (`explain` weighs only the slower side: two arms of one run, the speed rule.)"""
    a, b = evidence(cur), evidence(base)
    back = 1 / ratio if ratio > 0 else 0.0
    why = _against(a, b, names[0], names[1], ratio) + _against(b, a, names[1], names[0], back)
    return f"measurement disturbed (this run or its baseline, each weighed alike: {'; '.join(why)})" if why else None
