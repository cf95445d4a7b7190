"""The `Launcher` interface: how a run's trials are started, watched and recorded.

A launcher gets the trials to run (`Trials`: specs, files, where results go) and returns when each has a
record; local processes, Slurm jobs, a Slurm array and nodes started by hand are one class each in
launchers/.  The run records its launcher in run.json (`launcher`: its kind and options), so `--resume`
goes on with the launcher the run started with, whatever the command line says by default, and refuses
one that asks for another.  A run.json of an earlier version has no `launcher`: its slurm.json, when
there is one, says Slurm (an array with --slurm-parallel), else it ran locally.

A new launcher (Kubernetes, Ray) is one file in launchers/ with one class: its `kind`, its options as
fields, and `run`; `ampbench run --launcher KIND` finds it there.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from rich.console import Console

from ampbench.config import ConfigError, Suite
from ampbench.core.store import RunPaths
from ampbench.engine.policy import Policy
from ampbench.record.models import RunInfo, Trial

if TYPE_CHECKING:
    from ampbench.engine.trials import Trials


class Launcher(Policy, ABC):
    """How trials run.  The defaults are those of a launcher with nothing to check, keep or say."""

    PACKAGE: ClassVar[str] = "ampbench.engine.launchers"
    _kinds: ClassVar[dict[str, type[Policy]]] = {}

    @classmethod
    def of_folder(cls, run_path: Path) -> Launcher | None:
        """This launcher, when the files it keeps in a run folder say it ran the run (a run.json of an
        earlier version records no launcher); None: not this one."""
        return None

    def kept(self) -> dict[str, Any]:
        """What run.json keeps of the launcher (`launcher`): by default its whole record."""
        return self.record()

    def resolved(self) -> Launcher:
        """The launcher with what it needs of this machine read (the local one: its device pool)."""
        return self

    def check(self, suite: Suite, plan: list[tuple[str, int]], where: str) -> None:
        """What this launcher cannot run, refused before a run folder exists (exit 2)."""

    def start(self, run_path: Path, info: RunInfo) -> None:
        """A new run folder exists: what the launcher keeps of itself beside run.json (its `info` fields)."""

    def announce(self, info: RunInfo, console: Console) -> None:
        """One line on where the trials will run, once the run folder is known (new or resumed)."""

    def asked(self) -> bool:
        """Whether the command line asked for anything of this launcher (the local default asks nothing)."""
        return True

    def unhonoured(self) -> list[str]:
        """The options given that would change a resumed run's plan (refused with --resume)."""
        return []

    def resumed(self, given: Launcher, run_path: Path, info: RunInfo, suite: Suite,
                plan: list[tuple[str, int]]) -> Launcher:
        """--resume: `self` is the launcher run.json recorded, `given` the command line's; the run goes on
        with the recorded one, and a given one that asks for something else is refused."""
        if given.kind == self.kind and given != self:
            raise ConfigError("--resume", f"--launcher {given.kind}", f"not honoured: --resume finishes {run_path} "
                              f"with the launcher options in its run.json; drop the {given.kind} options")
        if given.kind != self.kind and given.asked():
            raise ConfigError("--launcher", given.kind, f"{run_path} was run by the {self.kind} launcher; --resume "
                              f"finishes it the same way (drop {given.options_given()})")
        return self

    def options_given(self) -> str:
        """How the command line asked for this launcher, as a user would drop it."""
        return f"--launcher {self.kind} and its options"

    @abstractmethod
    def run(self, trials: Trials) -> list[Trial]:
        """Every trial of `trials.todo`, each handed to `trials.finished` as it ends; the trials this process
        saw end (a launcher whose jobs record themselves may return none)."""

    def part_done(self, run_path: Path, ended: list[Trial], console: Console) -> int | None:
        """The exit code when this machine's part is all there is to do here (a follower node of a trial
        started by hand: node 0 judges); None: the run is judged here."""
        return None

    def cancel_left(self, run_path: Path, console: Console) -> None:
        """After the process that ran `run_path` was killed: stop what it left running elsewhere."""


def recorded_launcher(run_path: Path, info: RunInfo | None) -> Launcher:
    """The launcher a run started with: run.json's `launcher`, else (earlier versions, or a run.json not
    written yet) Slurm's when the run folder holds a slurm.json, else the local one."""
    if info is not None and info.launcher is not None:
        return Launcher.from_record(info.launcher, f"{RunPaths(run_path).run_json}: launcher")
    found = (kind.of_folder(run_path) for kind in Launcher.kinds().values())
    return next((f for f in found if f is not None), None) or Launcher.named("local", "--resume")
