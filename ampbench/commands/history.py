"""The nightly history: a finished run's summary line added to results/history/<suite>.jsonl."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from ampbench.config import ConfigError, Thresholds
from ampbench.core.errors import ResultsError
from ampbench.judge import pooled, series
from ampbench.judge.pooled import OpenRegression
from ampbench.judge.recorded import recorded_verdict
from ampbench.judge.summary import summarize_run
from ampbench.results import history
from ampbench.results.accepts import AcceptRecord, add_accept, load_accepts
from ampbench.results.history import RunSummary, load_history
from ampbench.results.history import history_file as hist_file
from ampbench.results.run_dir import open_run

DEFAULT_MIN_CHANGE = Thresholds().history_min_change


def summarize_run_dir(run_dir: Path) -> RunSummary:
    """A run folder as its history line (check.json's verdicts included when it was checked)."""
    run = open_run(Path(run_dir))
    return summarize_run(run.info, run.suite, run.trials, recorded_verdict(run), str(run.path))


def append_history(run_dir: Path, history_dir: Path) -> Path:
    """Add (or replace) the run's line in HISTORY_DIR/<suite>.jsonl; returns that file."""
    return history.append_history(summarize_run_dir(run_dir), Path(history_dir))


def append_run(run_dir: Path, history_dir: Path, archive: bool = False) -> list[tuple[str, Path]]:
    """`ampbench history append RUN HISTORY [--archive-report]`: the run's line in HISTORY/<suite>.jsonl and,
    with `archive`, its self-contained report.html kept beside the history for the dashboard."""
    from ampbench.report.site_reports import archive_report

    done = [("history", append_history(run_dir, history_dir))]
    if archive:
        done.append(("report", archive_report(Path(run_dir), Path(history_dir))))
    return done


def _lines_of(history: Path, suite: str | None) -> tuple[Path, str, list[RunSummary]]:
    """(the history file, its suite, its lines oldest first): HISTORY is a <suite>.jsonl or a folder of them
    (then `suite` names the file)."""
    path = Path(history)
    if path.is_dir():
        if not suite:
            raise ResultsError(f"{path}: a history folder; name the suite with --suite")
        path = hist_file(path, suite)
    lines = load_history(path)
    suites = sorted({h.suite for h in lines})
    name = suite or (suites[0] if len(suites) == 1 else "")
    if not name:
        raise ResultsError(f"{path}: holds suites {', '.join(suites) or 'none'}; name one with --suite")
    return path, name, [h for h in lines if h.suite == name]


def open_regressions(lines: list[RunSummary], min_change: float, accepts: list[AcceptRecord]) -> list[OpenRegression]:
    """The open regression of each series (config hash and device kind) of one suite's lines (judge.series)."""
    found = [pooled.select(g, min_change=min_change, accepts=accepts, kind=key[2]).open_regression
             for key, g in series.group(lines).items()]
    return [r for r in found if r is not None]


def accept_level(history_path: Path, by: str, why: str, suite: str | None = None, run: str | None = None,
                 min_change: float = DEFAULT_MIN_CHANGE) -> tuple[AcceptRecord, Path]:
    """`ampbench history accept`: record that the level from `run` on (default: the first night of the open
    regression) is intended; the nights from it on join the pooled baseline, whose segment starts there."""
    for key, text in (("--by", by), ("--why", why)):
        if not text.strip():
            raise ConfigError(key, repr(text), "is blank: say who accepts the new level and why (both are recorded)")
    path, name, lines = _lines_of(history_path, suite)
    accepts = load_accepts(path, name)
    if run is None:
        found = open_regressions(lines, min_change, accepts)
        if len(found) != 1:
            what = "no open regression" if not found else \
                f"{len(found)} open regressions (since runs {', '.join(r.since for r in found)})"
            raise ResultsError(f"{path}: {what} at min_change {min_change:.0%}; name the first run of the level "
                               "to accept with --run")
        run = found[0].since
    ids = [h.run_id for h in lines]
    if run not in ids:
        raise ResultsError(f"{path}: --run {run!r} is not a run of suite {name} in this history")
    try:
        rec = AcceptRecord(suite=name, run_id=run, cleared=ids[ids.index(run):], by=by, why=why,
                           at=datetime.now(UTC).isoformat(timespec="seconds"))
    except ValidationError as e:
        err = e.errors()[0]
        raise ResultsError(f"--{'.'.join(str(x) for x in err['loc'])}: {err['msg']}") from None
    return rec, add_accept(path, rec)


def open_after_append(run_dir: Path, history_dir: Path) -> list[str]:
    """What `history append` adds to its output: the open regression of the run's series, if any."""
    run = open_run(Path(run_dir))
    path = hist_file(Path(history_dir), run.info.suite)
    lines = [h for h in load_history(path) if h.suite == run.info.suite]
    mine = next((h for h in lines if h.run_id == run.info.run_id), None)
    if mine is None:
        return []
    mine_key = series.series_key(mine)
    same = [h for h in lines if series.series_key(h) == mine_key]
    found = pooled.select(same, min_change=run.suite.thresholds.history_min_change,
                          accepts=load_accepts(path, run.info.suite), kind=mine_key[2]).open_regression
    return [found.describe()] if found else []
