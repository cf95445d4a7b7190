"""Where a trial ran: its CPU affinity, the CPUs its threads were seen on, their NUMA nodes, and the
devices it was given (`run --devices` pins each worker through CUDA_VISIBLE_DEVICES; NVML's record of
the device itself, index, UUID and bus id, is in `Env.gpu` and `Memory.nvml_device`).

On the measured toy machine identical trials ran at ~10.5k or ~14k samples/s depending on which virtual
CPU the process landed on (issue 23): trial levels cluster, and the placement is the evidence that
explains it.  `pin` applies `run --affinity` (one CPU set for every trial of a run, as pyperf's
--affinity) to every thread of the worker before the workload starts more, which inherit it.  Linux only; elsewhere the fields stay
empty and nothing is pinned.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

_SYS_CPU = Path("/sys/devices/system/cpu")


def affinity() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return []


def _tasks() -> list[Path]:
    try:
        return list(Path("/proc/self/task").iterdir())
    except OSError:
        return []


def pin(cpus: list[int] | None) -> list[int]:
    """Restrict every thread of this process to `cpus` (the threads it starts later inherit it); returns the
    affinity after.  Every thread, not only the caller: sched_setaffinity sets one thread's mask, and a
    worker already has threads before it pins (numpy's OpenBLAS pool starts at `import numpy`), which kept
    every CPU and ran on CPU 1 of a trial pinned to CPU 0."""
    if cpus:
        for tid in [0, *(int(t.name) for t in _tasks() if t.name.isdigit())]:
            try:
                os.sched_setaffinity(tid, set(cpus))
            except (AttributeError, OSError, ValueError):   # a thread that ended meanwhile; not Linux
                continue
    return affinity()


def thread_cpus() -> list[int]:
    """The CPU each thread of this process last ran on (/proc/self/task/*/stat, field 39), leaving out a
    field outside the thread's own affinity: the kernel moves a thread into its mask when it next runs, so
    such a field is stale, from before `pin`, of a thread that has not run since."""
    seen: set[int] = set()
    for t in _tasks():
        try:
            stat = (t / "stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            cpu = int(fields[36])  # field 39 overall; 3 fields precede the ones after the name
            if cpu in os.sched_getaffinity(int(t.name)):
                seen.add(cpu)
        except (OSError, ValueError, IndexError, AttributeError):
            continue
    return sorted(seen)


def main_cpu() -> int | None:
    try:
        stat = Path("/proc/self/stat").read_text()
        return int(stat[stat.rindex(")") + 2:].split()[36])
    except (OSError, ValueError, IndexError):
        return None


def numa_nodes(cpus: list[int]) -> list[int]:
    nodes: set[int] = set()
    for c in cpus:
        try:
            for d in (_SYS_CPU / f"cpu{c}").iterdir():
                if d.name.startswith("node") and d.name[4:].isdigit():
                    nodes.add(int(d.name[4:]))
        except OSError:
            continue
    return sorted(nodes)


def devices() -> list[str]:
    """The CUDA_VISIBLE_DEVICES entries this process was given ([]: not pinned, every device visible)."""
    return [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]


def sample() -> dict[str, Any]:
    """The Interference fields of placement, one snapshot."""
    cpus = thread_cpus()
    return {"cpu_affinity": affinity(), "cpus_seen": cpus, "main_cpu": main_cpu(), "numa_nodes": numa_nodes(cpus),
            "devices": devices()}


def merge(a: dict[str, Any] | None, b: dict[str, Any]) -> dict[str, Any]:
    """Two snapshots (window start, end): CPUs seen in either; the main thread's CPU at both."""
    if not a:
        return {**b, "main_cpus": [b["main_cpu"]] if b.get("main_cpu") is not None else []}
    seen = sorted(set(a.get("cpus_seen", [])) | set(b.get("cpus_seen", [])))
    mains = [x for x in (a.get("main_cpu"), b.get("main_cpu")) if x is not None]
    return {"cpu_affinity": b.get("cpu_affinity") or a.get("cpu_affinity") or [], "cpus_seen": seen,
            "main_cpu": b.get("main_cpu"), "main_cpus": sorted(set(mains)), "numa_nodes": numa_nodes(seen),
            "devices": b.get("devices") or a.get("devices") or []}
