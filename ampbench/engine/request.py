"""What a run is asked to train (`RunRequest`), and what it writes and says once the trials ended (`Output`).

How the trials run is not here: the launcher, the seed policy and the batch policy are objects of their
own (`Policies`), so a verb states what it wants trained and picks how, and the request travels to a
child process (bisect's candidates side by side) or into run.json as plain data.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ampbench.core.store import RUNS_DIR

DEFAULT_OUT = RUNS_DIR
STATUS_EVERY_S = 15.0   # a piped run's status line: at least every 30 s (issue 45), twice as often here


class RunRequest(BaseModel):
    """What to train: a suite (file or bundled name) at a profile, its modes and seeds, `--set` overrides,
    and where the run folder goes; or `resume`, the rest of a run folder as its run.json plans it."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    suite_file: Path | None = None
    profile: str | None = None
    modes: tuple[str, ...] = ()          # only these (fp32 is kept); empty: every mode of the suite
    seeds: str | None = None             # --seeds as typed ("0,1,2"); None: the suite's
    overrides: tuple[str, ...] = ()      # --set KEY=VALUE
    out_dir: Path = DEFAULT_OUT
    run_id: str | None = None            # the run folder's name (default: a new time-stamped id)
    resume: Path | None = None           # finish this run folder instead of starting one
    resume_hint: str = ""                # how the caller continues after an interrupt (default: run --resume)


class Output(BaseModel):
    """What the run writes and says once its trials ended: summary.csv, check.json and the outcome table
    (`judge`), report.md (`report`), against a baseline (`baseline`; `last`: the previous run), and how
    often a piped run prints a status line while trials run."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    judge: bool = True
    strict: bool = False
    report: bool = True
    baseline: Path | None = None
    verbose: bool = False
    status_every: float = STATUS_EVERY_S
