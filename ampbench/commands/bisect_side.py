"""Several bisect candidates at once (k-section, `bisect --parallel K --devices ...`): each candidate's run
in its own child process, on its own share of the device pool, side by side.

Why processes, not threads: `execute` (the usual runner) owns the signals of its process and stops its
workers on Ctrl-C / SIGTERM; k of them in one process could not all be stopped.  Each child is
`python -m ampbench.commands.bisect_child OPTIONS.json`, which runs `execute` on the RunOptions bisect
wrote for it, with CUDA_VISIBLE_DEVICES set to its devices.  The children are started through the device
pool's scheduler (launch.pool.run_jobs: one thread a running child, an interrupt in the main thread stops
them all) and through launch.process.run_worker (own session, parent-death guard, the whole tree killed on
stop or error), so no child outlives bisect; a child's run folder keeps what it finished for `--resume`.

With `--launcher slurm` the pool is K slots, not devices (no CUDA_VISIBLE_DEVICES: Slurm places each
candidate's jobs): each child submits its candidate's trials and waits for them as `run --launcher slurm`
does, and cancels them when stopped; `cancel_left_jobs` then cancels what a child stopped too early left.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pwd
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from ampbench.commands.run_plan import RunOptions
from ampbench.core.errors import ConfigError, ResultsError
from ampbench.core.files import atomic_write_text
from ampbench.launch import slurm
from ampbench.launch.pool import CPU, VISIBLE_ENV, Job, Scheduler, run_jobs
from ampbench.launch.process import Limits, run_worker
from ampbench.launch.slurm_run import load_state


@dataclass(frozen=True)
class SideRun:
    """One candidate's run: the options its child runs `execute` with (RunOptions fields, JSON), where its
    options file and its log go."""

    index: int
    options: dict[str, object]
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


def options_json(opts: RunOptions) -> dict[str, object]:
    """RunOptions as the child reads them back (bisect_child.options_from): the Slurm options as their fields."""
    data = dataclasses.asdict(opts)
    data["slurm"] = opts.slurm.model_dump() if opts.slurm is not None else None
    return data


def cancel_left_jobs(run_dirs: list[Path], console: Console) -> None:
    """After an interrupt stopped a round's children: any Slurm job a candidate's run still records
    (slurm.json) and Slurm still runs or queues is cancelled here, so none outlives bisect even when a child
    was killed before its own `scancel` (launch.slurm_run.cancel) was through.  Only the run's own jobs:
    ours by user and by the run's token in the job's comment."""
    me = pwd.getpwuid(os.getuid()).pw_name
    for run_dir in run_dirs:
        with contextlib.suppress(ResultsError, OSError):
            state = load_state(run_dir)
            if state is None:
                continue
            live = []
            for job in sorted(set(state.jobs.values())):
                with contextlib.suppress(slurm.SlurmError):
                    st = slurm.job_info(job)
                    if st is not None and not st.ended and st.user == me and st.comment == state.comment:
                        live.append(job)
            if live:
                with contextlib.suppress(slurm.SlurmError):
                    slurm.scancel(live)
                    console.print(f"cancelled Slurm job(s) {', '.join(live)} of {run_dir.name}", markup=False)


def child_command(options_path: Path) -> list[str]:
    return [sys.executable, "-m", "ampbench.commands.bisect_child", str(options_path)]


def run_side_by_side(runs: list[SideRun], pool: list[str], per: int, visible: bool = True) -> dict[int, int | None]:
    """Every run on its `per` devices of `pool`, at most len(pool) // per at a time; returns each index's
    exit code (None: the child was killed).  An interrupt stops every child and propagates.  `visible`
    False: the pool is only slots (Slurm's candidates), no CUDA_VISIBLE_DEVICES is set for a child."""
    for r in runs:
        atomic_write_text(r.options_path, json.dumps(r.options, default=str))
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
