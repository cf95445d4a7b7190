"""`ampbench check RUN_DIR`: open the run, judge it (against a baseline when given), write check.json
(check-vs-<baseline>.json against a baseline)."""

from __future__ import annotations

import re
from pathlib import Path

from rich.console import Console

from ampbench.core.errors import ResultsError
from ampbench.judge import changepoint, pooled
from ampbench.judge.check import judge_run
from ampbench.judge.recorded import recorded_verdict
from ampbench.report.console import print_outcome, print_rules
from ampbench.report.view import view_of
from ampbench.results.accepts import AcceptRecord, load_accepts
from ampbench.results.baselines import device_slug, load_baseline, node_of
from ampbench.results.history import RunSummary, history_sources, load_history
from ampbench.results.previous import resolve_baseline
from ampbench.results.run_dir import OpenRun, RunDir, open_run
from ampbench.results.verdicts import CheckReport, claims_exit


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
    """Load a run folder, judge it, write check.json (check-vs-<baseline>.json against a baseline,
    check-vs-history.json against the history) next to the trials, return the report.  `history`: the
    nightly history (folder or jsonl); the history rules compare against every run of this suite, device
    and config since the last change point (judge.pooled), when it holds at least pooled.MIN_RUNS of them;
    otherwise against `baseline`, with the run-to-run drift estimated from the history's consecutive runs
    (judge.changepoint.drift).  `baseline` "last": the previous run of the same suite, device and config
    beside this one (results.previous).  To pin a reference on purpose, give `baseline` without `history`."""
    run = open_run(Path(run_dir))
    ok = [t for t in run.trials if t.status == "ok"]
    series, elsewhere = _series(run, history) if history is not None else ([], 0)
    seg = pooled.select(series, min_change=run.suite.thresholds.history_min_change,
                        accepts=_accepts(run, history)) if history is not None else None
    use_pool = seg if seg is not None and len(seg.runs) >= pooled.MIN_RUNS else None
    base_path = resolve_baseline(run.path, baseline) if use_pool is None else None
    base = None
    if base_path is not None:
        base = load_baseline(base_path, suite=run.info.suite, device=device_slug(ok[0].env) if ok else None)
    drift = changepoint.drift([h.to_json() for h in series]) if history is not None and base is not None else None
    report = judge_run(run, base, strict=strict, allow_mismatch=allow_mismatch,
                       drift_sd=drift.sd if drift else None, pooled=use_pool)
    report.notes += _history_notes(run, seg, use_pool is not None, base is not None, drift, elsewhere)
    target = run.dir.check_vs_path("history") if use_pool is not None else check_path(run.dir, base_path)
    try:
        report.write(target)
    except ResultsError as e:  # a read-only run folder is judged and printed all the same
        report.notes.append(f"{target.name} not written: {e}")
    return report


def _history_notes(run: OpenRun, seg: pooled.PooledBaseline | None, used: bool, based: bool,
                   drift: changepoint.Drift | None, elsewhere: int) -> list[str]:
    """What check's notes say of the history: no pool (and what was used instead), the drift allowed, the lines
    of other nodes left out."""
    out = []
    if seg is not None and not used:
        instead = "the --baseline instead" if based else "no baseline: the run is judged on its own"
        out.append(f"No pooled history baseline: {seg.describe()}, fewer than {pooled.MIN_RUNS}; {instead}.")
    if drift is not None:
        out.append(f"History rules allow a {drift.describe()}.")
    if elsewhere:
        out.append(f"{elsewhere} history run(s) of this suite, config and device left out: measured on another "
                   f"node than this run's ({', '.join(run_nodes(run))}).")
    return out


def check_exit(report: CheckReport, claims: bool = False) -> int:
    """The verb's exit code: the verdicts' (check.json `exit_code`); with --claims, 1 when a published claim of
    the suite is refuted (results.verdicts.claims_exit)."""
    return claims_exit(report) if claims else report.exit_code


def recorded_check(run_dir: Path) -> CheckReport:
    """The verdict of record (the newest check file): what a script needs to know how a run that was checked
    elsewhere ended (nightly.sh combining collected runs).  Nothing is written; the file is read back only
    when its trials give it (judge.recorded: an edited check.json is refused, exit 2)."""
    run = open_run(Path(run_dir))   # a folder that is not a run is named as such; its trials as recorded
    found = recorded_verdict(run)
    if found is None:
        raise ResultsError(f"{run.dir.check_path}: not found; judge the run first: ampbench check {run.path}")
    return found


def print_outcome_of(run_dir: Path, report: CheckReport, console: Console, explain: bool = False) -> None:
    """What `ampbench check` prints: the outcome table and one next step per rule that did not pass;
    with `explain` (--explain, -v) every rule's full text before it."""
    if explain:
        print_rules(report, console)
    print_outcome(view_of(open_run(Path(run_dir)), report), console)


def _accepts(run: OpenRun, history: Path) -> list[AcceptRecord]:
    """The accepted new levels recorded beside this suite's history file (results.accepts)."""
    return [a for path in history_sources(Path(history), [run.info.suite])
            for a in load_accepts(path, run.info.suite)]


def _series(run: OpenRun, history: Path) -> tuple[list[RunSummary], int]:
    """The history lines of this run's suite, config hash and device, oldest first, the run itself left out,
    and how many of them were left out for having run on other nodes only (judge.pooled.other_node)."""
    lines = [h for path in history_sources(Path(history), [run.info.suite]) for h in load_history(path)]
    ok = [t for t in run.trials if t.status == "ok"] or run.trials
    env = ok[0].env if ok else run.info.env
    same = pooled.comparable(lines, run.info.suite, run.info.config_hash, env, run.info.run_id)
    found = [h for h in same if not pooled.other_node(h, run_nodes(run))]
    return sorted(found, key=lambda h: (h.started or "", h.run_id)), len(same) - len(found)


def run_nodes(run: OpenRun) -> list[str]:
    """The nodes the run's ok trials ran on (results.baselines.node_of)."""
    return sorted({n for t in run.trials if t.status == "ok" and (n := node_of(t))})
