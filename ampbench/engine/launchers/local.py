"""Local processes (`--launcher local`, the default): each trial in its own process tree on this machine.

Without `--devices` the plan runs in order, one trial after another.  With it the trials run side by side
on the device pool, each seed's modes at the same time on twin devices (launch/pool.py's scheduler:
batches of a seed's arms, rotated over the devices), each pinned by its worker's environment and, with
`--affinity`, to its device's share of the CPU set.  The pool and the CPU set are kept in run.json
(`devices`, `affinity`): `--resume` runs the rest on the same pool unless given another.  Both are parsed
and checked here before a run folder exists: a pool without the devices a trial needs, an --affinity set
smaller than the pool, a CPU this process may not use.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, ClassVar

from rich.console import Console
from rich.markup import escape

from ampbench.config import ConfigError, Suite
from ampbench.engine.display import Display, prior_costs
from ampbench.engine.launcher import Launcher
from ampbench.engine.plan import NodeRole
from ampbench.engine.trials import Trials
from ampbench.launch.pool import CPU, Job, Scheduler, batches, cpu_shares, device_env, parse_devices, run_jobs
from ampbench.launch.process import keep_signal_handlers
from ampbench.record.models import RunInfo, Trial

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


class LocalLauncher(Launcher):
    """Trials as local process trees, one at a time or side by side on `--devices`."""

    kind: ClassVar[str] = "local"
    devices: str | None = None           # --devices as typed (all, or 0,1,...)
    pool: list[str] | None = None        # the pool it names here (resolved()), or the run's recorded one
    affinity: list[int] | None = None    # --affinity: the CPU set every trial is pinned to

    def kept(self) -> dict[str, Any]:
        """Only the kind: the pool and the CPU set are run.json's own `devices` and `affinity`."""
        return {"kind": self.kind}

    def asked(self) -> bool:
        return self.devices is not None or self.affinity is not None

    def options_given(self) -> str:
        return "--devices and --affinity"

    def resolved(self) -> LocalLauncher:
        return self.model_copy(update={"pool": device_pool(self.devices)})

    def node(self) -> NodeRole | None:
        """This machine's part of a multi-node trial (none: every rank here)."""
        return None

    def check(self, suite: Suite, plan: list[tuple[str, int]], where: str) -> None:
        """A multi-node suite needs a way for its nodes to meet; the pool must fit a trial and --affinity."""
        dist = suite.distributed
        if dist.master and dist.nnodes > 1 and self.node() is None:
            check_master(where, "distributed.master", dist.master)
        if dist.nnodes > 1 and not (dist.master or dist.ips) and self.node() is None:
            raise ConfigError("suite", "distributed.nnodes", f"nnodes = {dist.nnodes}: start each node with --master "
                              "HOST:PORT --node-rank R (or set distributed.master), or run with --launcher slurm")
        if self.pool is not None:
            check_pool(suite, plan, self.pool, self.affinity)

    def start(self, run_path: Path, info: RunInfo) -> None:
        info.devices = self.pool
        if self.affinity:
            info.affinity = sorted(self.affinity)

    def announce(self, info: RunInfo, console: Console) -> None:
        pool = info.devices
        if pool == [CPU]:
            console.print("--devices: no GPU visible, one slot (the CPU): the trials run one after another")
        elif pool:
            console.print(f"--devices: {len(pool)} device(s) ({escape(', '.join(pool))}): trials side by side, "
                          "each seed's modes at the same time", soft_wrap=True)

    def unhonoured(self) -> list[str]:
        return ["--affinity"] if self.affinity is not None else []

    def resumed(self, given: Launcher, run_path: Path, info: RunInfo, suite: Suite,
                plan: list[tuple[str, int]]) -> Launcher:
        """The rest on the pool given now (--devices), else on the recorded one if still visible; a multi-node
        part started by hand may resume as one (its --master and --node-rank)."""
        if not isinstance(given, LocalLauncher):
            super().resumed(given, run_path, info, suite, plan)   # refuses a launcher that asks for another kind
            given = LocalLauncher()
        mine = given if type(given) is not LocalLauncher else self
        pool = device_pool(given.devices, info.devices)
        if pool is not None:
            check_pool(suite, plan, pool, info.affinity)
            info.devices = pool
        return mine.model_copy(update={"devices": given.devices, "pool": pool, "affinity": info.affinity})

    def run(self, trials: Trials) -> list[Trial]:
        """`trials.todo` through the device pool (none: one slot, the plan's order), one progress task per
        running trial."""
        pool = trials.info.devices or [CPU]
        shares = cpu_shares(trials.info.affinity, len(pool))
        suite = trials.suite
        sched = Scheduler(batches(trials.todo, trial_width(suite, pool), len(pool)), len(pool))
        prior = prior_costs(trials.run.path, trials.info.suite, trials.info.config_hash)   # the time left
        with Display(trials.console, len(trials.plan), len(trials.todo), len(pool), trials.status_every,
                     prior) as shown:
            def start(job: Job, slots: tuple[int, ...], stop: threading.Event) -> Trial:
                devices = tuple(pool[d] for d in slots)
                cpus = sorted({c for d in slots for c in shares[d] or []}) if trials.info.affinity else None
                spec = trials.spec(job.mode, job.seed, cpus, self.node())
                with shown.trial(job.mode, job.seed, suite.train.steps, _where(devices)) as on_event:
                    return trials.launch(spec, on_event=on_event, stop=stop,
                                         env=device_env(devices, suite.distributed.multi_process))

            def finished(job: Job, trial: Trial) -> None:
                shown.ended()
                trials.finished(job.mode, job.seed, trial,
                                _where(tuple(trial.interference.devices) if trial.interference else ()))

            run_jobs(sched, start, finished)
        return trials.ended


def check_master(where: str, key: str, text: str) -> None:
    """A rendezvous HOST:PORT refused up front when it cannot be one (no port, a port out of range), not
    after a run folder exists and a trial failed at Paddle's launcher."""
    host, colon, port = text.rpartition(":")
    if not colon or not host or any(c.isspace() for c in host) or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(where, key, f"{text!r}: expected HOST:PORT, a port from 1 to 65535 (e.g. 10.0.0.1:29400)")


def _where(devices: tuple[str, ...]) -> str:
    return f" on device {escape(','.join(devices))}" if devices and devices != (CPU,) else ""
