"""The `SeedPolicy` interface: which seeds a run trains, up front and after its first look.

A policy may give the seeds to plan (`initial`), refuse a suite it cannot serve (`check`), record itself in
a new run's run.json (`start`), and, once the planned trials ended, add seeds while they can decide
something (`more`).  The defaults are fixed seeds: the request's (--seeds) or the suite's, none added.
A new policy is one file in seeds/ with one class (its `kind`, its options as fields) plus its test.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from rich.console import Console

from ampbench.config import Suite
from ampbench.engine.policy import Policy
from ampbench.record.models import RunInfo
from ampbench.results.run_dir import RunDir

Plan = list[tuple[str, int]]


class SeedPolicy(Policy):
    """Which seeds a run trains; the base trains the planned ones and adds none."""

    PACKAGE: ClassVar[str] = "ampbench.engine.seeds"
    _kinds: ClassVar[dict[str, type[Policy]]] = {}

    def initial(self, suite: Suite) -> list[int] | None:
        """The seeds to plan (None: the request's --seeds, else the suite's)."""
        return None

    def check(self, suite: Suite, where: Path | str | None) -> None:
        """A suite this policy cannot serve, refused before a run folder exists (exit 2)."""

    def start(self, info: RunInfo, suite: Suite) -> None:
        """A new run: what the policy keeps in run.json before the first trial."""

    def unhonoured(self, info: RunInfo) -> list[str]:
        """--resume: what this policy asks that the run (as run.json records it) cannot give."""
        return []

    def more(self, run: RunDir, info: RunInfo, suite: Suite, plan: Plan, run_more: Callable[[Plan], None],
             console: Console, started: float, baseline: Path | None) -> Suite:
        """After the planned trials: run more (`run_more(new trials)`, `plan` grown in place) while the policy
        wants them; returns the suite with its final seeds."""
        return suite
