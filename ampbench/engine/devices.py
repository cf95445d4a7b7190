"""The local launcher's machine: the device pool of `--devices` and the CPU set of `--affinity`.

Parsed and checked here, before a run folder exists: a pool without the devices a trial needs, an
--affinity set smaller than the pool, a CPU this process may not use.
"""

from __future__ import annotations

import os

from ampbench.config import ConfigError, Suite
from ampbench.launch.pool import CPU, batches, cpu_shares, parse_devices
from ampbench.launch.process import keep_signal_handlers

MAX_CPU = 2**16  # no machine has more CPUs; a larger number is a typo, never a range to expand


def parse_cpus(text: str) -> list[int]:
    """`--affinity 0-3,6` -> [0, 1, 2, 3, 6]; every CPU must be one this process may use (each bound is
    checked before a range is expanded: `0-99999999999` is refused, not a MemoryError)."""
    cpus: set[int] = set()
    try:
        allowed = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        allowed = set(range(os.cpu_count() or 1))
    shown = ",".join(map(str, sorted(allowed)))
    for part in (p.strip() for p in text.split(",")):
        lo, dash, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi) if dash else int(lo)
        except ValueError:
            raise ConfigError("--affinity", text, "expected CPU numbers or ranges, e.g. --affinity 2 or "
                              "0-3,6" + (" (an empty item)" if not part else "")) from None
        if a < 0 or b < a:
            raise ConfigError("--affinity", text, f"{part}: a range runs from a CPU number up to a larger one")
        if b > MAX_CPU or not set(range(a, b + 1)) <= allowed:
            bad = min(set(range(a, min(b, MAX_CPU) + 1)) - allowed, default=b)
            raise ConfigError("--affinity", text, f"CPU {bad} is not available to this process (allowed: {shown})")
        cpus.update(range(a, b + 1))
    return sorted(cpus)


def device_pool(text: str | None, recorded: list[str] | None = None) -> list[str] | None:
    """`--devices` -> the pool (None: not given, trials one after another as always).  `--resume` without
    --devices runs the rest on the run's recorded pool, if its devices are still visible."""
    if text is None and not recorded:
        return None
    from ampbench.trackers.cuda import visible_devices

    with keep_signal_handlers():  # with a GPU, counting imports paddle, which would take over SIGTERM
        visible = visible_devices()
    if text is not None:
        return parse_devices(text, visible)
    assert recorded is not None
    gone = [d for d in recorded if d != CPU and d not in visible]
    if gone:
        raise ConfigError("--resume", ",".join(recorded), f"the run's device pool is not visible here now (device "
                          f"{gone[0]}); give the pool to use with --devices")
    return recorded


def trial_width(suite: Suite, pool: list[str]) -> int:
    """Devices one trial takes: a data-parallel trial one per rank of this node; on the CPU slot, one."""
    return suite.distributed.nproc_per_node if suite.distributed.multi_process and pool != [CPU] else 1


def check_pool(suite: Suite, plan: list[tuple[str, int]], pool: list[str], affinity: list[int] | None) -> None:
    """What the pool cannot run, refused before a run folder exists: a trial wider than the pool, an
    --affinity set smaller than it."""
    batches(plan, trial_width(suite, pool), len(pool))
    cpu_shares(affinity, len(pool))
