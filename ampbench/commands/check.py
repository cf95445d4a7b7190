"""`ampbench check RUN_DIR`: open the run, judge it (against a baseline when given), write check.json
(check-vs-<baseline>.json against a baseline)."""

from __future__ import annotations

import re
from pathlib import Path

from rich.console import Console

from ampbench.core.errors import ResultsError
from ampbench.judge import changepoint
from ampbench.judge.check import judge_run
from ampbench.report.console import print_outcome, print_rules
from ampbench.report.view import view_of
from ampbench.results.baselines import device_slug, load_baseline
from ampbench.results.history import history_sources, load_history
from ampbench.results.previous import resolve_baseline
from ampbench.results.run_dir import OpenRun, RunDir, open_run
from ampbench.results.verdicts import CheckReport, load_check_optional


def check_path(run: RunDir, baseline: Path | None) -> Path:
    """check.json for the run's own check; check-vs-<baseline>.json for a check against a baseline, so a
    comparison never replaces the run's own record (and two baselines keep two files)."""
    if baseline is None:
        return run.check_path
    name = baseline.name if baseline.is_dir() else baseline.stem
    return run.check_vs_path(safe_slug(name))


def safe_slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:80] or "baseline"


def check_run(run_dir: Path, baseline: Path | str | None = None, strict: bool = False,
              allow_mismatch: bool = False, history: Path | None = None) -> CheckReport:
    """Load a run folder, judge it, write check.json (check-vs-<baseline>.json against a baseline) next
    to the trials, return the report.  `baseline` "last": the previous run of the same suite, device and
    config beside this one (results.previous).  `history`: the nightly history (folder or jsonl) whose
    consecutive runs estimate the run-to-run drift the history rules allow (judge.changepoint.drift)."""
    run = open_run(Path(run_dir))
    base_path = resolve_baseline(run.path, baseline)
    base = None
    if base_path is not None:
        ok = [t for t in run.trials if t.status == "ok"]
        base = load_baseline(base_path, suite=run.info.suite, device=device_slug(ok[0].env) if ok else None)
    drift = _history_drift(run, history) if history is not None and base is not None else None
    report = judge_run(run, base, strict=strict, allow_mismatch=allow_mismatch,
                       drift_sd=drift.sd if drift else None)
    if drift is not None:
        report.notes.append(f"History rules allow a {drift.describe()}.")
    target = check_path(run.dir, base_path)
    try:
        report.write(target)
    except ResultsError as e:  # a read-only run folder is judged and printed all the same
        report.notes.append(f"{target.name} not written: {e}")
    return report


def recorded_check(run_dir: Path) -> CheckReport:
    """The verdict of record (the newest check file), without judging again: what a script needs to know
    how a run that was checked elsewhere ended (nightly.sh combining collected runs)."""
    run = RunDir(Path(run_dir))
    run.load_run()  # a folder that is not a run is named as such
    found = load_check_optional(run.latest_check_path())
    if found is None:
        raise ResultsError(f"{run.check_path}: not found; judge the run first: ampbench check {run.path}")
    return found


def print_outcome_of(run_dir: Path, report: CheckReport, console: Console, explain: bool = False) -> None:
    """What `ampbench check` prints: the outcome table and one next step per rule that did not pass;
    with `explain` (--explain, -v) every rule's full text before it."""
    if explain:
        print_rules(report, console)
    print_outcome(view_of(open_run(Path(run_dir)), report), console)


def _history_drift(run: OpenRun, history: Path) -> changepoint.Drift:
    """Drift from the history lines of this suite with this run's config hash (the run itself left out)."""
    entries = []
    for path in history_sources(Path(history), [run.info.suite]):
        entries += [h.to_json() for h in load_history(path)
                    if h.config_hash == run.info.config_hash and h.run_id != run.info.run_id]
    entries.sort(key=lambda e: (e.get("started") or "", e["run_id"]))
    return changepoint.drift(entries)
