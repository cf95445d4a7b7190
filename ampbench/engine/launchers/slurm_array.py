"""One Slurm array job (`--launcher slurm --slurm-parallel N`): one task per seed running its arms in
turn, at most N at once (launch/slurm_array.py).  Everything else is the Slurm launcher's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from ampbench.engine.launchers.slurm import SlurmLauncher
from ampbench.launch.slurm_array import run_array
from ampbench.launch.slurm_run import Hooks, SlurmRun


class SlurmArrayLauncher(SlurmLauncher):
    """The run as one array job, a task per seed."""

    kind: ClassVar[str] = "slurm-array"
    array: ClassVar[bool] = True

    def submit(self) -> Callable[[list[tuple[str, int]], Path, SlurmRun, str, Hooks], None]:
        return run_array
