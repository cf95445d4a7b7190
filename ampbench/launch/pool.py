"""Trials side by side on a pool of devices (`run --devices`): which trial starts when, and where.

Each seed's trials (FP32 and every AMP mode the plan holds for it) form one batch, started only when
devices for the whole batch are free: the arms of a matched pair run at the same time on twin devices,
so machine drift (clocks, load, a neighbour) hits both alike.  The order in which a batch's trials take
the free devices rotates from batch to batch, so no mode always gets the same device.  A data-parallel
trial takes `nproc_per_node` devices.  A batch wider than the pool is cut into pieces that fit, so a
pool of one runs the plan in order, one trial at a time, exactly as a run without --devices.

A trial is pinned through its worker's environment (CUDA_VISIBLE_DEVICES, the entry of the device as
the ampbench process sees it: an ordinal, or its own CUDA_VISIBLE_DEVICES entry, a UUID or a MIG
instance).  `run_jobs` runs one thread per running trial, each waiting on its worker, so the thread
that spawned a worker outlives it (the kernel's parent-death signal is tied to that thread).  Ctrl-C
and SIGTERM reach the main thread: every running worker tree is stopped before they propagate.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ampbench.core.errors import ConfigError
from ampbench.launch.process import deferred_interrupts

CPU = "cpu"  # the pool of a machine without a GPU: one slot, no device environment
VISIBLE_ENV = "CUDA_VISIBLE_DEVICES"


@dataclass(frozen=True)
class Job:
    """One planned trial and the devices it takes."""

    mode: str
    seed: int
    width: int = 1


def parse_devices(text: str, visible: list[str]) -> list[str]:
    """`--devices all|0,1,...` -> the pool, as the CUDA_VISIBLE_DEVICES entries of the chosen devices
    (numbered as Paddle counts them in this process); without a GPU, `all` is one CPU slot."""
    if text.strip() == "all":
        return list(visible) or [CPU]
    try:
        chosen = [int(p) for p in text.split(",")]
    except ValueError:
        raise ConfigError("--devices", text, "expected all or comma-separated device numbers, e.g. --devices 0,1") \
            from None
    seen: set[int] = set()
    for i in chosen:
        if i in seen:
            raise ConfigError("--devices", text, f"device {i} is given twice")
        seen.add(i)
        if not 0 <= i < len(visible):
            where = f"{len(visible)} GPU(s) visible to Paddle here (0..{len(visible) - 1})" if visible else \
                "no GPU is visible to Paddle here (--devices all runs the trials on the CPU, one at a time)"
            raise ConfigError("--devices", text, f"device {i} is not visible: {where}")
    return [visible[i] for i in chosen]


def batches(plan: list[tuple[str, int]], width: int, size: int) -> list[list[Job]]:
    """The plan (seed-major) as batches: every mode of a seed together, cut into pieces of at most
    `size` devices; a trial wider than the pool is refused."""
    if width > size:
        raise ConfigError("--devices", str(size), f"a data-parallel trial takes {width} devices; the pool has {size}")
    by_seed: dict[int, list[Job]] = {}
    for mode, seed in plan:
        by_seed.setdefault(seed, []).append(Job(mode, seed, width))
    out: list[list[Job]] = []
    for jobs in by_seed.values():
        piece: list[Job] = []
        for job in jobs:
            if sum(j.width for j in piece) + job.width > size:
                out.append(piece)
                piece = []
            piece.append(job)
        out.append(piece)
    return out


class Scheduler:
    """Which batch starts on which free devices (pure: the caller says when devices come free)."""

    def __init__(self, work: list[list[Job]], size: int):
        self._pending = deque(work)
        self.free = list(range(size))
        self._turn = 0

    def ready(self) -> list[tuple[Job, tuple[int, ...]]]:
        """Start every next batch (in order) whose trials all fit on the free devices now."""
        started: list[tuple[Job, tuple[int, ...]]] = []
        while self._pending and sum(j.width for j in self._pending[0]) <= len(self.free):
            batch = self._pending.popleft()
            k = self._turn % len(batch)
            free = sorted(self.free)
            for job in batch[k:] + batch[:k]:  # rotated: the first devices go to another mode each batch
                started.append((job, tuple(free[:job.width])))
                free = free[job.width:]
            self.free = free
            self._turn += 1
        return started

    def release(self, devices: tuple[int, ...]) -> None:
        self.free.extend(devices)


def device_env(devices: tuple[str, ...], data_parallel: bool) -> dict[str, str]:
    """The worker environment that pins a trial to its devices (nothing for the CPU slot); a single
    process uses ordinal 0 of what it sees, the ranks of a data-parallel trial get theirs from Paddle's launcher."""
    if devices == (CPU,):
        return {}
    env = {VISIBLE_ENV: ",".join(devices)}
    if not data_parallel:
        env["FLAGS_selected_gpus"] = "0"
    return env


def cpu_shares(cpus: list[int] | None, size: int) -> list[list[int] | None]:
    """`--affinity` over a pool: each device slot its own contiguous share of the CPU set (the same for
    every trial on that slot, for the whole run); a pool of one keeps the whole set."""
    if not cpus or size <= 1:
        return [cpus or None] * size
    if len(cpus) < size:
        raise ConfigError("--affinity", ",".join(map(str, cpus)),
                          f"{len(cpus)} CPU(s) cannot give each of the {size} devices its own; give at least {size}")
    step = len(cpus) / size
    return [cpus[round(i * step):round((i + 1) * step)] for i in range(size)]


Start = Callable[[Job, tuple[int, ...], threading.Event], Any]


def run_jobs(sched: Scheduler, start: Start, finished: Callable[[Job, Any], None]) -> None:
    """Start what the scheduler says, one thread per trial (`start(job, device slots, stop)` returns its
    result); `finished(job, result)` runs in this thread as each ends.  An error in one trial's launch
    stops new starts and lets the running ones end before it is raised; an interrupt (noted in this, the
    main thread, and raised between waits: `deferred_interrupts`) sets `stop`, which makes every running
    launch kill its worker tree, and waits for them."""
    done: queue.Queue[tuple[Job, tuple[int, ...], Any, BaseException | None]] = queue.Queue()
    stop = threading.Event()
    threads: list[threading.Thread] = []
    error: BaseException | None = None

    def work(job: Job, slots: tuple[int, ...]) -> None:
        try:
            done.put((job, slots, start(job, slots, stop), None))
        except BaseException as e:  # noqa: BLE001  whatever ends a launch is the main thread's to handle
            done.put((job, slots, None, e))

    running = 0
    with deferred_interrupts() as check:  # an interrupt is raised here, never inside the queue's lock
        try:
            while True:
                check()
                for job, slots in sched.ready() if error is None else []:
                    threads.append(threading.Thread(target=work, args=(job, slots), daemon=True,
                                                    name=f"trial {job.mode} seed {job.seed}"))
                    threads[-1].start()
                    running += 1
                if running == 0:
                    break
                try:
                    job, slots, result, exc = done.get(timeout=0.5)
                except queue.Empty:
                    continue
                running -= 1
                sched.release(slots)
                if exc is not None:
                    error = error or exc
                else:
                    finished(job, result)
        except BaseException:
            stop.set()
            for t in threads:
                t.join()
            raise
    if error is not None:
        raise error
