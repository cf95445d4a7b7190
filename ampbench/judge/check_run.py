"""Judge a run folder (against a baseline or the history when given) and write its check file: the one
use of the judge that `ampbench check`, `ampbench run` and bisect share (commands.check re-exports it as
the stable `ampbench.commands.check.check_run`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from ampbench.core.errors import ResultsError
from ampbench.judge import changepoint, pooled
from ampbench.judge.check import judge_run
from ampbench.judge.series import kind_of
from ampbench.record.models import Trial
from ampbench.results.accepts import AcceptRecord, load_accepts
from ampbench.results.baselines import device_slug, load_baseline, node_of
from ampbench.results.history import RunSummary, history_sources, load_history
from ampbench.results.previous import resolve_baseline
from ampbench.results.run_dir import OpenRun, RunDir, open_run
from ampbench.results.verdicts import CheckReport


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
              allow_mismatch: bool = False, history: Path | None = None,
              complete: Callable[[list[Trial]], object] = lambda trials: None) -> CheckReport:
    """Load a run folder, judge it, write check.json (check-vs-<baseline>.json against a baseline,
    check-vs-history.json against the history) next to the trials, return the report.  `history`: the
    nightly history (folder or jsonl); the history rules compare against every run of this suite, device
    and config since the last change point (judge.pooled), when it holds at least pooled.MIN_RUNS of them;
    otherwise against `baseline`, with the run-to-run drift estimated from the history's consecutive runs
    (judge.changepoint.drift).  `baseline` "last": the previous run of the same suite, device and config
    beside this one (results.previous).  To pin a reference on purpose, give `baseline` without `history`.
    `complete`: what the layers above fill in the trials in memory before they are judged (engine.op_lists:
    Paddle's effective op lists of a trial recorded before they were; this side never imports paddle); by
    default nothing."""
    run = open_run(Path(run_dir))
    complete(run.trials)
    ok = [t for t in run.trials if t.status == "ok"]
    series, kind, others, elsewhere = _series(run, history) if history is not None else ([], "", {}, 0)
    seg = pooled.select(series, min_change=run.suite.thresholds.history_min_change,
                        accepts=_accepts(run, history), kind=kind) if history is not None else None
    use_pool = seg if seg is not None and seg.enough else None
    base_path = resolve_baseline(run.path, baseline) if use_pool is None else None
    base = None
    if base_path is not None:
        base = load_baseline(base_path, suite=run.info.suite, device=device_slug(ok[0].env) if ok else None)
    drift = changepoint.drift([h.to_json() for h in series]) if history is not None and base is not None else None
    report = judge_run(run, base, strict=strict, allow_mismatch=allow_mismatch,
                       drift_sd=drift.sd if drift else None, pooled=use_pool)
    if seg is not None and use_pool is None:
        report.notes.append(_no_pool_note(len(series), kind, others, base is not None))
    if drift is not None:
        report.notes.append(f"History rules allow a {drift.describe()}.")
    if elsewhere:
        report.notes.append(f"{elsewhere} history run(s) of this suite, config and device left out: measured on "
                            f"another node than this run's ({', '.join(run_nodes(run))}).")
    target = run.dir.check_vs_path("history") if use_pool is not None else check_path(run.dir, base_path)
    try:
        report.write(target)
    except ResultsError as e:  # a read-only run folder is judged and printed all the same
        report.notes.append(f"{target.name} not written: {e}")
    return report


def _no_pool_note(nights: int, kind: str, others: dict[str, int], baseline: bool) -> str:
    """Why no pooled history baseline: too few nights of this kind, whatever other kinds hold (never borrowed)."""
    instead = "the --baseline instead" if baseline else "no baseline: the run is judged on its own"
    on = f" on device kind {kind}" if kind else ""
    besides = "; ".join(f"{n} on {k or 'no recorded device'}" for k, n in sorted(others.items()))
    borrow = f" (other kinds' nights are not borrowed: {besides})" if besides else ""
    return (f"No pooled history baseline: the history holds {nights} night(s) of this suite and config{on}, fewer "
            f"than {pooled.MIN_RUNS} that can join a pool{borrow}; {instead}.")


def _accepts(run: OpenRun, history: Path) -> list[AcceptRecord]:
    """The accepted new levels recorded beside this suite's history file (results.accepts)."""
    return [a for path in history_sources(Path(history), [run.info.suite])
            for a in load_accepts(path, run.info.suite)]


def _series(run: OpenRun, history: Path) -> tuple[list[RunSummary], str, dict[str, int], int]:
    """The history lines of this run's suite, config hash and device kind, oldest first, the run itself left
    out; the kind; how many nights of this suite and config the history holds on each other kind; how many
    lines of this kind were left out for having run on other nodes only (judge.pooled.other_node)."""
    lines = [h for path in history_sources(Path(history), [run.info.suite]) for h in load_history(path)]
    ok = [t for t in run.trials if t.status == "ok"] or run.trials
    env = ok[0].env if ok else run.info.env
    same = pooled.comparable(lines, run.info.suite, run.info.config_hash, env, run.info.run_id)
    found = [h for h in same if not pooled.other_node(h, run_nodes(run))]
    kind = device_slug(env) if env.device else ""
    others: dict[str, int] = {}
    for h in lines:
        mine = h.suite == run.info.suite and h.config_hash == run.info.config_hash and h.run_id != run.info.run_id
        if mine and (k := kind_of(h)) != kind:
            others[k] = others.get(k, 0) + 1
    return sorted(found, key=lambda h: (h.started or "", h.run_id)), kind, others, len(same) - len(found)


def run_nodes(run: OpenRun) -> list[str]:
    """The nodes the run's ok trials ran on (results.baselines.node_of)."""
    return sorted({n for t in run.trials if t.status == "ok" and (n := node_of(t))})
