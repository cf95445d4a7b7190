"""`ampbench run --launcher slurm`: the run's trials handed to launch/slurm_run.py, their progress and
results printed as a local run prints them (one line per state change and per finished trial)."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console
from rich.markup import escape

from ampbench.commands.run_plan import make_spec
from ampbench.config import Suite
from ampbench.core.protocol import Fault
from ampbench.launch.launcher import TrialFiles
from ampbench.launch.slurm_array import run_array
from ampbench.launch.slurm_run import Hooks, SlurmRun, run_trials
from ampbench.record.models import RunInfo, Trial, trial_key
from ampbench.results.run_dir import RunDir


def run_on_slurm(run: RunDir, info: RunInfo, suite: Suite, todo: list[tuple[str, int]], faults: dict[str, Fault],
                 state: SlurmRun, console: Console, trial_files: Callable[[RunDir, str, int], TrialFiles],
                 status_text: Callable[[Trial], str]) -> None:
    """`todo` as Slurm jobs; `trial_files` and `status_text` are the run command's (one layout, one wording)."""
    def finished(mode: str, seed: int, trial: Trial) -> None:
        where = f" (job {trial.slurm.job_id} on {trial.slurm.node or trial.slurm.nodes})" if trial.slurm else ""
        console.print(f"  {escape(mode)} seed {seed}{escape(where)}: {status_text(trial)}")

    hooks = Hooks(
        spec=lambda mode, seed: make_spec(info, suite, run, mode, seed, faults.get(trial_key(mode, seed)), here=False),
        files=lambda mode, seed: trial_files(run, mode, seed),
        say=lambda text: console.print(f"  {text}", markup=False, highlight=False),
        finished=finished,
    )
    o = state.options
    how = f"one array job, at most {o.parallel} seed(s) at once" if o.parallel else "jobs"
    console.print(f"Slurm: {len(todo)} trial(s) as {how} (partition {escape(o.partition or 'default')}, "
                  f"status every {o.poll_s:g} s)")
    (run_array if o.parallel else run_trials)(todo, run.path, state, info.suite, hooks)
