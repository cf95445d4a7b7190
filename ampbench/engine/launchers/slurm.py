"""Slurm jobs (`--launcher slurm`): every trial one batch job, a seed's arms chained on one node
(launch/slurm_run.py submits, watches, records and cancels them).

The run folder must be on a filesystem the nodes share.  The Slurm options are kept in run.json (the
launcher's record) and in slurm.json beside the job ids, so `--resume` submits the rest alike and waits
for the jobs still queued or running instead of submitting them again.
"""

from __future__ import annotations

import contextlib
import os
import pwd
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from rich.console import Console
from rich.markup import escape

from ampbench.config import ConfigError, Suite
from ampbench.core.errors import ResultsError
from ampbench.engine.launcher import Launcher
from ampbench.engine.trials import Trials
from ampbench.launch import slurm
from ampbench.launch.slurm import SlurmOptions
from ampbench.launch.slurm_run import Hooks, SlurmRun, load_state, run_trials, save_state
from ampbench.record.models import RunInfo, Trial


class SlurmLauncher(Launcher):
    """Every trial a Slurm job."""

    kind: ClassVar[str] = "slurm"
    array: ClassVar[bool] = False   # one array job for the run (--slurm-parallel): launchers/slurm_array.py
    options: SlurmOptions

    @classmethod
    def of_folder(cls, run_path: Path) -> Launcher | None:
        """A run whose run.json predates the `launcher` record ran under Slurm if it holds a slurm.json (as
        one array job when its options say --slurm-parallel)."""
        state = load_state(run_path)
        if state is None or bool(state.options.parallel) != cls.array:
            return None
        return cls(options=state.options)

    @staticmethod
    def require_commands() -> None:
        """Refused up front (exit 2) where Slurm's client commands are not on PATH."""
        slurm.require_commands()

    def check(self, suite: Suite, plan: list[tuple[str, int]], where: str) -> None:
        slurm.require_commands()
        slurm.check_partition(self.options.partition, suite.distributed.nnodes)

    def start(self, run_path: Path, info: RunInfo) -> None:
        save_state(run_path, SlurmRun(options=self.options))

    def resumed(self, given: Launcher, run_path: Path, info: RunInfo, suite: Suite,
                plan: list[tuple[str, int]]) -> Launcher:
        """The rest with the run's own Slurm options; other ones given are refused, not silently dropped."""
        if isinstance(given, SlurmLauncher):
            if given.options != self.options:
                raise ConfigError("--resume", "--launcher slurm", f"not honoured: --resume submits the rest of "
                                  f"{run_path} with the Slurm options in its slurm.json; drop the Slurm options")
        else:
            super().resumed(given, run_path, info, suite, plan)
        slurm.require_commands()
        slurm.require_controller(run_path)   # slurmctld down: one line, before any job is asked about
        return self

    def submit(self) -> Callable[[list[tuple[str, int]], Path, SlurmRun, str, Hooks], None]:
        return run_trials

    def run(self, trials: Trials) -> list[Trial]:
        """`trials.todo` as Slurm jobs; progress and results said as a local run says them."""
        run = trials.run
        state = load_state(run.path) or SlurmRun(options=self.options)

        def finished(mode: str, seed: int, trial: Trial) -> None:
            where = f" (job {trial.slurm.job_id} on {trial.slurm.node or trial.slurm.nodes})" if trial.slurm else ""
            trials.finished(mode, seed, trial, escape(where), metric=False)

        hooks = Hooks(spec=lambda mode, seed: trials.spec(mode, seed, here=False), files=trials.files,
                      say=trials.say, finished=finished)
        o = state.options
        how = f"one array job, at most {o.parallel} seed(s) at once" if o.parallel else "jobs"
        trials.console.print(f"Slurm: {len(trials.todo)} trial(s) as {how} (partition {escape(o.partition or 'default')}, "
                             f"status every {o.poll_s:g} s)")
        self.submit()(trials.todo, run.path, state, trials.info.suite, hooks)
        for mode, seed in trials.todo:   # written by the Slurm jobs: recorded as the runner finds them
            trials.recorded(mode, seed)
        return []

    def cancel_left(self, run_path: Path, console: Console) -> None:
        """Any job of the run slurm.json still records and Slurm still runs or queues, cancelled: only the
        run's own, by user and by the run's token in the job's comment."""
        me = pwd.getpwuid(os.getuid()).pw_name
        with contextlib.suppress(ResultsError, OSError):
            state = load_state(run_path)
            if state is None:
                return
            live = []
            for job in sorted(set(state.jobs.values())):
                with contextlib.suppress(slurm.SlurmError):
                    st = slurm.job_info(job)
                    if st is not None and not st.ended and st.user == me and st.comment == state.comment:
                        live.append(job)
            if live:
                with contextlib.suppress(slurm.SlurmError):
                    slurm.scancel(live)
                    console.print(f"cancelled Slurm job(s) {', '.join(live)} of {Path(run_path).name}", markup=False)
