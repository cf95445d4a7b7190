"""The Python API for a notebook: run folders in, pandas DataFrames and the typed records out.

The command line prints tables; a notebook user wants the numbers behind them. Every function here
reads run folders through the same code the verbs use (results.open_run, judge.judge_run,
judge.run_change, report.compare's frames), so a DataFrame holds exactly what `ampbench check` and
`ampbench compare` print. Nothing here writes a file: `check` judges in memory (the verb writes
check.json), and none of it imports Paddle. docs/api.md walks through it; its example is run by
tests/test_api.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ampbench.config import Suite
from ampbench.judge.check import judge_run
from ampbench.judge.run_change import Change, changes
from ampbench.record.models import RunInfo, Trial
from ampbench.report.compare import compare_frame, trial_frame
from ampbench.results.baselines import load_baseline
from ampbench.results.run_dir import open_run
from ampbench.results.verdicts import CheckReport

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Run:
    """One run folder, validated: its run.json, its effective suite and its trials in plan order."""

    path: Path
    info: RunInfo
    suite: Suite
    trials: list[Trial]

    def frame(self) -> pd.DataFrame:
        """One row per trial (summary.csv's columns, the run id and the suite's metric)."""
        return trial_frame([self.path])


def load(run_dir: str | Path) -> Run:
    """A run folder as typed records (a folder that is not a run, or a changed record, raises ResultsError)."""
    run = open_run(Path(run_dir))
    return Run(run.path, run.info, run.suite, run.trials)


def summary(*run_dirs: str | Path) -> pd.DataFrame:
    """One row per run and mode: trials, samples/s, peak memory, metric mean and sd, change vs the first run."""
    return compare_frame([Path(p) for p in run_dirs])


def check(run_dir: str | Path, baseline: str | Path | None = None) -> CheckReport:
    """Judge a run as `ampbench check` does (against `baseline`, a run folder or baseline file, when given),
    in memory: nothing is written. The CheckReport is check.json's model; `verdicts` makes it a frame."""
    run = open_run(Path(run_dir))
    base = load_baseline(Path(baseline), suite=run.info.suite) if baseline is not None else None
    return judge_run(run, base)


def verdicts(report: CheckReport) -> pd.DataFrame:
    """One row per mode and rule: the mode's verdict, the rule's status, observed value, message."""
    import pandas as pd

    rows = [{"suite": report.suite, "mode": v.mode, "verdict": v.verdict, "rule": r.rule, "status": r.status,
             "informational": r.informational, "observed": r.observed, "message": r.message}
            for v in report.verdicts for r in v.rules]
    cols = ["suite", "mode", "verdict", "rule", "status", "informational", "observed", "message"]
    return pd.DataFrame(rows, columns=cols)


def compare(current: str | Path, other: str | Path) -> pd.DataFrame:
    """One row per mode of both runs: the throughput change of `current` against `other`, its interval, and
    whether it is significant by `check --baseline`'s test (judge.run_change; `changes` has the records)."""
    import pandas as pd

    rows = [{"mode": c.mode, "change": c.change, "ratio": c.ratio, "ci_low": c.ci_low, "ci_high": c.ci_high,
             "mark": c.mark, "significant": c.significant, "why": c.why}
            for c in changes_of(current, other).values()]
    return pd.DataFrame(rows, columns=["mode", "change", "ratio", "ci_low", "ci_high", "mark", "significant", "why"])


def changes_of(current: str | Path, other: str | Path) -> dict[str, Change]:
    """Per mode, the typed Change record behind `compare`'s row."""
    return changes(open_run(Path(current)), open_run(Path(other)))


__all__ = ["Change", "CheckReport", "Run", "changes_of", "check", "compare", "load", "summary", "verdicts"]
