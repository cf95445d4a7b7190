"""`ampbench compare RUN OTHER --format json` (**contract**): two runs per mode, machine-readable.

The same figures the two-run table prints, one row per run and mode, with each current-run row's change
judged by `check --baseline`'s history-throughput test both ways (judge/run_change.py): a CI or a
pull-request bot reads this instead of scraping the table.  `schemas/compare.schema.json` is generated
from these models (`ampbench schema compare`).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, Field

from ampbench.core.docs import VersionedDoc

COMPARE_SCHEMA = "ampbench.compare/1"
Mark = Literal["slower", "faster", "disturbed", "not significant", "not compared"]


class ComparedRun(BaseModel):
    run_id: str
    """The run's id."""
    run_dir: str
    """Its folder."""
    suite: str
    """Its suite."""
    config_hash: str = ""
    """Its config hash."""


class Significance(BaseModel):
    """The current run's change in one mode as history-throughput decided it (current / other - 1)."""

    mark: Mark
    """`slower`, `faster`, `disturbed`, `not significant` or `not compared`."""
    change: float | None = None
    """The figure the test decided on (each trial's fast floor, else median)"""
    ci_low: float | None = None
    """Its two-sided interval at the suite's confidence, as changes."""
    ci_high: float | None = None
    """Its upper end."""
    min_change: float = 0.0
    """The suite's history_min_change: a smaller change is never called significant."""
    why: str = ""
    """Why not significant (too few trials, within the spread, the disturbance)"""


class CompareRow(BaseModel):
    """One run's trials of one mode: pytest-benchmark's statistics over each trial's median samples/s."""

    mode: str
    """The mode."""
    run_id: str
    """The run."""
    role: Literal["current", "other"]
    """`current` or `other`."""
    min: float
    """Slowest trial's median samples/s."""
    max: float
    """Fastest trial's."""
    mean: float
    """Their mean."""
    stddev: float | None
    """None with one trial."""
    median: float
    """Their median."""
    iqr: float
    """Their interquartile range."""
    trials: int
    """Trials it is over."""
    samples_per_s: float
    """The mode's figure: the geometric mean of the trials' medians."""
    change: float | None = None
    """`samples_per_s` against the other run's (null on the other run's rows)."""
    significance: Significance | None = None
    """On the current run's rows."""
    emulated: bool = False
    """The mode's AMP was emulated (docs/emulation.md): not an AMP timing."""


class CompareFile(VersionedDoc):
    SCHEMA: ClassVar[str] = COMPARE_SCHEMA
    schema_: str = Field(COMPARE_SCHEMA, alias="schema")
    """The file's kind and version: `ampbench.compare/1`."""
    current: ComparedRun
    """The run compared."""
    other: ComparedRun
    """The run it is compared with."""
    warning: str = ""
    """Why the two runs' numbers are not only the code's change ("" when none)"""
    modes: list[str] = []
    """The current run's modes in its suite's order."""
    rows: list[CompareRow] = []
    """In the order asked for (--sort)"""

    def marks(self) -> dict[str, Significance]:
        """Each judged mode's significance, in the suite's mode order."""
        got = {r.mode: r.significance for r in self.rows if r.significance is not None}
        return {m: got[m] for m in [*self.modes, *got] if m in got}
