"""The nightly history: a finished run's summary line added to results/history/<suite>.jsonl."""

from __future__ import annotations

from pathlib import Path

from ampbench.judge.summary import summarize_run
from ampbench.results import history
from ampbench.results.history import RunSummary
from ampbench.results.run_dir import open_run
from ampbench.results.verdicts import load_check_optional


def summarize_run_dir(run_dir: Path) -> RunSummary:
    """A run folder as its history line (check.json's verdicts included when it was checked)."""
    run = open_run(Path(run_dir))
    return summarize_run(run.info, run.suite, run.trials, load_check_optional(run.dir.latest_check_path()), str(run.path))


def append_history(run_dir: Path, history_dir: Path) -> Path:
    """Add (or replace) the run's line in HISTORY_DIR/<suite>.jsonl; returns that file."""
    return history.append_history(summarize_run_dir(run_dir), Path(history_dir))


def append_run(run_dir: Path, history_dir: Path, archive: bool = False) -> list[tuple[str, Path]]:
    """`ampbench history append RUN HISTORY [--archive-report]`: the run's line in HISTORY/<suite>.jsonl and,
    with `archive`, its self-contained report.html kept beside the history for the dashboard."""
    from ampbench.report.publish import archive_report

    done = [("history", append_history(run_dir, history_dir))]
    if archive:
        done.append(("report", archive_report(Path(run_dir), Path(history_dir))))
    return done
