"""Several run requests at once (bisect's k-section, `bisect --parallel K --devices ...`): each request's run
in its own child process, on its own share of the device pool, side by side.

Why processes, not threads: `execute` owns the signals of its process and stops its workers on Ctrl-C /
SIGTERM; k of them in one process could not all be stopped.  Each child is
`python -m ampbench.engine.child OPTIONS.json`, which runs `execute` on the request and policies written
for it, with CUDA_VISIBLE_DEVICES set to its devices.  The children are started through the device
pool's scheduler (launch.pool.run_jobs: one thread a running child, an interrupt in the main thread stops
them all) and through launch.process.run_worker (own session, parent-death guard, the whole tree killed on
stop or error), so no child outlives bisect; a child's run folder keeps what it finished for `--resume`.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from ampbench.core.errors import ConfigError, ResultsError
from ampbench.core.files import atomic_write_text
from ampbench.engine.execute import Policies
from ampbench.engine.launcher import recorded_launcher
from ampbench.engine.request import RunRequest
from ampbench.launch.pool import CPU, VISIBLE_ENV, Job, Scheduler, run_jobs
from ampbench.launch.process import Interrupted, Limits, run_worker
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


def run_side_by_side(runs: list[SideRun], pool: list[str], per: int, visible: bool = True) -> dict[int, int | None]:
    """Every run on its `per` devices of `pool`, at most len(pool) // per at a time; returns each index's
    exit code (None: the child was killed).  An interrupt stops every child and propagates.  `visible`
    False: the pool is only slots (Slurm's candidates), no CUDA_VISIBLE_DEVICES is set for a child."""
    for r in runs:
        atomic_write_text(r.options_path, json.dumps(r.options))
    by_index = {r.index: r for r in runs}
    sched = Scheduler([[Job("candidate", r.index, per)] for r in runs], len(pool))
    codes: dict[int, int | None] = {}

    def start(job: Job, slots: tuple[int, ...], stop: threading.Event) -> int | None:
        r = by_index[job.seed]
        env = {VISIBLE_ENV: ",".join(pool[s] for s in slots)} if pool != [CPU] and visible else {}
        out = run_worker(child_command(r.options_path), env, r.log_path, Limits(timeout_s=float("inf")),
                         lambda _ev: None, stop=stop)
        return out.returncode

    def finished(job: Job, code: int | None) -> None:
        codes[job.seed] = code

    run_jobs(sched, start, finished)
    return codes
