"""Several run requests at once (bisect's k-section, `bisect --parallel K --devices ...`): each request's run
in its own child process, on its own share of the device pool, side by side.

Why processes, not threads: `execute` owns the signals of its process and stops its workers on Ctrl-C /
SIGTERM; k of them in one process could not all be stopped.  Each child is
`python -m ampbench.engine.child OPTIONS.json`, which runs `execute` on the request and policies written
for it, with CUDA_VISIBLE_DEVICES set to its devices.  The children are started through the device
pool's scheduler (launch.pool.run_jobs: one thread a running child, an interrupt in the main thread stops
them all) and through launch.process.run_worker (own session, parent-death guard, the whole tree killed on
stop or error), so no child outlives bisect; a child's run folder keeps what it finished for `--resume`.

Like with like (issue 58.3): every look of a round, the good endpoint (the reference) included, runs with K runs
side by side on the node, sharing its CPUs, PCIe and power as every other look does. A round with fewer looks
than K (the endpoints, the last rechecks) fills its empty shares with ballast (`ballast`: runs of the reference,
kept out of the search), and a look that ends before the others is followed by ballast on its share until the
round's last look ends. Each look's share (`devices`) and the runs side by side while it ran (`crowding`, the
time-weighted mean count, itself included) are recorded in bisect.json.

With `--launcher slurm` the pool is K slots, not devices (no CUDA_VISIBLE_DEVICES: Slurm places each
candidate's jobs): each child submits its candidate's trials and waits for them as `run --launcher slurm`
does, and cancels them when stopped; `cancel_left` then has each run's launcher stop what a child stopped
too early left (the Slurm launcher: the run's own jobs still queued or running).
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from ampbench.core.errors import ConfigError, ResultsError
from ampbench.core.files import atomic_write_text
from ampbench.engine.execute import Policies
from ampbench.engine.launcher import recorded_launcher
from ampbench.engine.request import RunRequest
from ampbench.launch.pool import CPU, VISIBLE_ENV, Job, Scheduler, run_jobs
from ampbench.launch.process import Cancelled, Interrupted, Limits, run_worker
from ampbench.results.run_dir import RunDir

INTERRUPTS = (KeyboardInterrupt, Interrupted)   # what run_side_by_side raises once every child is stopped


def exit_code_of(e: BaseException) -> int:
    """The exit code of an interrupt: 143 for SIGTERM, 130 for Ctrl-C."""
    return e.exit_code if isinstance(e, Interrupted) else 130


@dataclass(frozen=True)
class SideRun:
    """One run of the round: the options its child runs `execute` with (`options_json`), where its options
    file and its log go."""

    index: int
    options: dict[str, Any]
    options_path: Path
    log_path: Path


def share(pool: list[str], k: int) -> int:
    """Devices per candidate for k candidates over `pool`; a pool without k devices is refused (candidates
    sharing a device, or the CPU, would skew each other's figures)."""
    if pool == [CPU] or len(pool) < k:
        where = "no GPU is visible here" if pool == [CPU] else f"--devices gives {len(pool)} device(s)"
        raise ConfigError("--parallel", str(k), f"needs at least {k} devices, one per candidate side by side: "
                          f"{where} (without --parallel the candidates run one after another)")
    return len(pool) // k


def options_json(request: RunRequest, policies: Policies) -> dict[str, Any]:
    """The request and its policies as the child reads them back (engine.child.options_from)."""
    return {"request": request.model_dump(mode="json"), **policies.to_json()}


def cancel_left(run_dirs: list[Path], console: Console) -> None:
    """After an interrupt stopped a round's children: each run's launcher stops what its child left running
    elsewhere (Slurm jobs a child was killed too early to cancel), so none outlives the verb."""
    for run_dir in run_dirs:
        info = None
        with contextlib.suppress(ResultsError, OSError):
            info = RunDir(run_dir).load_run()
        with contextlib.suppress(ResultsError, OSError, ConfigError):
            recorded_launcher(run_dir, info).cancel_left(run_dir, console)


def child_command(options_path: Path) -> list[str]:
    return [sys.executable, "-m", "ampbench.engine.child", str(options_path)]


@dataclass
class Placed:
    """Where one look ran: its share of the pool and the runs side by side while it ran (itself included)."""

    devices: list[str] = field(default_factory=list)
    crowding: float | None = None


class Crowd:
    """The children alive over time (looks and ballast), to measure each look's crowding."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._moves: list[tuple[float, int]] = []

    def move(self, delta: int) -> float:
        now = time.monotonic()
        with self._lock:
            self._moves.append((now, delta))
        return now

    def mean(self, t0: float, t1: float) -> float | None:
        """The time-weighted mean count of live children over [t0, t1]."""
        if t1 <= t0:
            return None
        alive, area, at = 0, 0.0, t0
        for t, d in sorted(self._moves):
            if t > t0:
                area += alive * (min(t, t1) - at)
                at = min(t, t1)
            if t >= t1:
                break
            alive += d
        area += alive * (t1 - at)
        return area / (t1 - t0)


class _Either(threading.Event):
    """Set when any of `events` is (the round's interrupt, the round's end): a ballast child stops on either."""

    def __init__(self, *events: threading.Event) -> None:
        super().__init__()
        self._events = events

    def is_set(self) -> bool:
        return any(e.is_set() for e in self._events)


Ballast = Callable[[int, int], SideRun]   # (slot, n) -> the n-th filler run on that slot's share


def run_side_by_side(runs: list[SideRun], pool: list[str], per: int, visible: bool = True,
                     ballast: Ballast | None = None) -> tuple[dict[int, int | None], dict[int, Placed]]:
    """Every run on its `per` devices of `pool`, at most len(pool) // per at a time; returns each index's
    exit code (None: the child was killed) and where it ran.  An interrupt stops every child and propagates.
    `visible` False: the pool is only slots (Slurm's candidates), no CUDA_VISIBLE_DEVICES is set for a child.
    `ballast`: every share of the pool runs something until the last look ends (see the module docstring)."""
    for r in runs:
        atomic_write_text(r.options_path, json.dumps(r.options, default=str))
    rnd = _Round(runs, pool, per, visible, ballast)
    shares = len(pool) // per
    pads = [Job("ballast", -1 - j, per) for j in range(max(0, shares - len(runs)))] if ballast else []
    sched = Scheduler([[Job("candidate", r.index, per)] for r in runs] + [[b] for b in pads], len(pool))
    run_jobs(sched, rnd.start, rnd.finished)
    for index, p in rnd.placed.items():
        mean = rnd.crowd.mean(*rnd.spans[index])
        p.crowding = round(mean, 2) if mean is not None else None
    return rnd.codes, rnd.placed


class _Round:
    """One round's children (launch.pool.run_jobs calls `start` in a thread per share, `finished` as each ends)."""

    def __init__(self, runs: list[SideRun], pool: list[str], per: int, visible: bool, ballast: Ballast | None):
        self.by_index = {r.index: r for r in runs}
        self.pool, self.per, self.visible, self.ballast = pool, per, visible, ballast
        self.codes: dict[int, int | None] = {}
        self.placed: dict[int, Placed] = {}
        self.spans: dict[int, tuple[float, float]] = {}
        self.crowd, self.round_done = Crowd(), threading.Event()
        self._left, self._lock = len(runs), threading.Lock()

    def child(self, r: SideRun, env: dict[str, str], stop: threading.Event) -> int | None:
        atomic_write_text(r.options_path, json.dumps(r.options, default=str))
        self.crowd.move(+1)
        try:
            return run_worker(child_command(r.options_path), env, r.log_path, Limits(timeout_s=float("inf")),
                              lambda _ev: None, stop=stop).returncode
        finally:
            self.crowd.move(-1)

    def fill(self, slot: int, env: dict[str, str], stop: threading.Event) -> None:
        """Ballast on this share until the round's last look ended (or the round is interrupted); a filler
        that cannot run is not retried (its log says why, and the looks' crowding shows it)."""
        until = _Either(stop, self.round_done)
        n = 0
        while self.ballast is not None and not until.is_set():
            try:
                code = self.child(self.ballast(slot, n), env, until)
            except Cancelled:
                return
            if code != 0:
                return
            n += 1

    def start(self, job: Job, slots: tuple[int, ...], stop: threading.Event) -> int | None:
        pool = self.pool
        env = {VISIBLE_ENV: ",".join(pool[s] for s in slots)} if pool != [CPU] and self.visible else {}
        slot = slots[0] // self.per
        if job.mode == "ballast":
            self.fill(slot, env, stop)
            return None
        t0 = time.monotonic()
        try:
            code = self.child(self.by_index[job.seed], env, stop)
        finally:
            self.spans[job.seed] = (t0, time.monotonic())
            self.placed[job.seed] = Placed([pool[s] for s in slots] if self.visible and pool != [CPU] else [])
            with self._lock:
                self._left -= 1
                if self._left == 0:
                    self.round_done.set()
        self.fill(slot, env, stop)
        return code

    def finished(self, job: Job, code: int | None) -> None:
        if job.mode != "ballast":
            self.codes[job.seed] = code
