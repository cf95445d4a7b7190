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
    run_dir: str
    suite: str
    config_hash: str = ""


class Significance(BaseModel):
    """The current run's change in one mode as history-throughput decided it (current / other - 1)."""

    mark: Mark
    change: float | None = None     # the figure the test decided on (each trial's fast floor, else median)
    ci_low: float | None = None     # its two-sided interval at the suite's confidence, as changes
    ci_high: float | None = None
    min_change: float = 0.0         # history_min_change: a smaller change is never called significant
    why: str = ""                   # why not significant (too few trials, within the spread, the disturbance)


class CompareRow(BaseModel):
    """One run's trials of one mode: pytest-benchmark's statistics over each trial's median samples/s."""

    mode: str
    run_id: str
    role: Literal["current", "other"]
    min: float
    max: float
    mean: float
    stddev: float | None            # None with one trial
    median: float
    iqr: float
    trials: int
    samples_per_s: float            # the mode's figure: the geometric mean of the trials' medians
    change: float | None = None     # samples_per_s against the other run's (None on the other run's rows)
    significance: Significance | None = None   # on the current run's rows
    emulated: bool = False          # the mode's AMP was emulated (docs/emulation.md): not an AMP timing


class CompareFile(VersionedDoc):
    SCHEMA: ClassVar[str] = COMPARE_SCHEMA
    schema_: str = Field(COMPARE_SCHEMA, alias="schema")
    current: ComparedRun
    other: ComparedRun
    warning: str = ""               # why the two runs' numbers are not only the code's change ("" when none)
    modes: list[str] = []           # the current run's modes in its suite's order
    rows: list[CompareRow] = []     # in the order asked for (--sort)

    def marks(self) -> dict[str, Significance]:
        """Each judged mode's significance, in the suite's mode order."""
        got = {r.mode: r.significance for r in self.rows if r.significance is not None}
        return {m: got[m] for m in [*self.modes, *got] if m in got}
