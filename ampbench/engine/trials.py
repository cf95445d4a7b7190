"""What the engine hands a launcher: the trials to run and how each is specified, laid out, recorded and
said (`Trials`), and one trial through the local process launcher (`launch_trial`, probe and diagnose too).

Whatever the launcher, a trial's spec, its files and its line in the console are made here, so local
processes and Slurm jobs run the same worker on the same spec and read the same in a log.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from ampbench.config import Suite
from ampbench.core.errors import ResultsError
from ampbench.core.protocol import Fault
from ampbench.engine.display import status_text
from ampbench.engine.plan import NodeRole, make_spec
from ampbench.engine.request import STATUS_EVERY_S
from ampbench.launch.forkserver import ForkServer
from ampbench.launch.launcher import TrialFiles, launch
from ampbench.record.models import RunInfo, Trial, trial_key
from ampbench.results.manifest import Manifest
from ampbench.results.run_dir import RunDir
from ampbench.trial.spec import TrialSpec


def trial_files(run: RunDir, mode: str, seed: int) -> TrialFiles:
    return TrialFiles(spec=run.spec_path(mode, seed), log=run.log_path(mode, seed), ranks=run.ranks_dir(mode, seed),
                      root=run.path)


def launch_trial(spec: TrialSpec, run: RunDir, on_event: Callable[[dict[str, Any]], None] | None = None,
                 env: dict[str, str] | None = None, stop: threading.Event | None = None,
                 forks: ForkServer | None = None) -> Trial:
    """One trial of a run folder in a local process (its files where the store lays them out)."""
    return launch(spec, trial_files(run, spec.mode, spec.seed), on_event, env, stop, forks)


@dataclass
class Trials:
    """The trials of one round of a run (`todo`, out of the whole `plan`) and everything a launcher needs to
    run them: their specs and files, the manifest their records go into, the console their lines go to."""

    run: RunDir
    info: RunInfo
    suite: Suite
    plan: list[tuple[str, int]]
    todo: list[tuple[str, int]]
    faults: dict[str, Fault]
    console: Console
    manifest: Manifest
    status_every: float = STATUS_EVERY_S
    ended: list[Trial] = field(default_factory=list)
    forks: ForkServer | None = None      # the run's fork server (launch/forkserver.py); None: every worker spawned

    def spec(self, mode: str, seed: int, cpus: list[int] | None = None, node: NodeRole | None = None,
             here: bool = True) -> TrialSpec:
        """The trial's spec (`here`: its worker runs on this machine; see plan.make_spec)."""
        return make_spec(self.info, self.suite, self.run, mode, seed, self.faults.get(trial_key(mode, seed)), cpus,
                         node, here=here)

    def files(self, mode: str, seed: int) -> TrialFiles:
        return trial_files(self.run, mode, seed)

    def launch(self, spec: TrialSpec, on_event: Callable[[dict[str, Any]], None] | None = None,
               env: dict[str, str] | None = None, stop: threading.Event | None = None) -> Trial:
        """One trial in a local process tree; its trial file recorded in the manifest once the tree exited."""
        try:
            trial = launch_trial(spec, self.run, on_event=on_event, env=env, stop=stop, forks=self.forks)
        except ResultsError:
            self.manifest.still_there()   # a run folder the program removed: say what was lost
            raise
        if Path(spec.trial_path).is_file():   # (a follower node writes none: node 0 records the trial)
            self.manifest.record(Path(spec.trial_path))   # the program's tree has exited: this file is the record
        return trial

    def recorded(self, mode: str, seed: int) -> None:
        """A trial file written elsewhere (a Slurm job's worker) into the manifest, as the runner finds it."""
        if self.run.trial_path(mode, seed).is_file():
            self.manifest.record(self.run.trial_path(mode, seed))

    def finished(self, mode: str, seed: int, trial: Trial, where: str = "", metric: bool = True) -> None:
        """A trial ended: its line (`where` it ran, already escaped) and its place among the ended ones."""
        self.ended.append(trial)
        shown = status_text(trial, self.suite.suite.metric if metric else "")
        self.console.print(f"  {escape(mode)} seed {seed}{where}: {shown}")

    def say(self, text: str) -> None:
        """A launcher's own line (plain text: nothing in it is markup)."""
        self.console.print(f"  {text}", markup=False, highlight=False)
