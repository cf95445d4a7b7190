"""The seed planner: how many seeds each rule needs, from a run's observed spreads.

For each rule the planner takes the between-trial spread the run showed (log per-trial median
throughput; for history-throughput the log fast floor where every trial has one; the metric's seed sd), the effect the rule must detect (the issue's acceptance sizes:
a speedup 10% below min_speedup, a throughput drop of 2 x history_min_change, a metric drop of twice
the parity margin) and returns the seeds per mode at which the rule's one-sided bound gives <= 1%
false alarms and >= 95% detection (inference.seeds_needed; normal theory, checked by simulation in
docs/checks.md).  `ampbench plan RUN` prints it; the report calls `plan_for`.
"""

from __future__ import annotations

import math
from pathlib import Path

from pydantic import BaseModel

from ampbench.config import REFERENCE_MODE, Suite, Thresholds
from ampbench.core.errors import ResultsError
from ampbench.core.records import Trial
from ampbench.judge import inference, measure, stats
from ampbench.results.baselines import compact
from ampbench.results.run_dir import open_run


class PlanRow(BaseModel):
    """One rule of one mode: observed spread, the effect it must detect, seeds needed vs run."""

    mode: str
    rule: str
    spread: float | None  # sd between trials (log scale for throughput, metric units for parity)
    effect: str
    seeds_needed: int | None  # None: spread unknown (one seed) or beyond the planner's limit
    seeds_run: int


def _log_medians(trials: list[Trial], metric: str) -> list[float]:
    return measure.log_rates([compact(t, metric).rates() for t in trials])


def _log_history_figures(trials: list[Trial]) -> list[float] | None:
    """Log fast floors of the trials, the figure history-throughput decides on when every trial has one
    (judge.rules.history); None when one has not (then the median figure decides and is planned for)."""
    floors = [measure.judged_floor(t.step_rates()) for t in trials]
    return [math.log(f) for f in floors if f] if all(floors) else None


def _pooled_sd(*groups: list[float]) -> float | None:
    return stats.pooled_sd(groups)[0]


def _metric(trials: list[Trial], metric: str) -> list[float]:
    return [float(t.metrics[metric]) for t in trials if metric in t.metrics and math.isfinite(t.metrics[metric])]


def _margin_k(th: Thresholds, sd: float | None) -> float:
    """The margin's sigma factor when the noise term sets it (then the margin itself is estimated)."""
    return th.metric_sigma_k if sd is not None and th.metric_sigma_k * sd >= 0.8 * th.metric_abs_tol else 0.0


def plan_for(suite: Suite, trials: list[Trial]) -> list[PlanRow]:
    """Rows for speedup, accuracy-parity (AMP modes) and history-throughput (every mode)."""
    th, metric, conf = suite.thresholds, suite.suite.metric, suite.thresholds.confidence
    ok = {m.name: [t for t in trials if t.mode == m.name and t.status == "ok"] for m in suite.modes}
    ref = ok.get(REFERENCE_MODE, [])
    rows: list[PlanRow] = []
    m = th.history_min_change
    hist_gap = math.log((1 - m) / (1 - 2 * m)) if m < 0.5 else m
    floors = [_log_history_figures(ts) for ts in ok.values() if ts]
    groups = floors if all(f is not None for f in floors) else [_log_medians(ts, metric) for ts in ok.values()]
    all_sd = _pooled_sd(*[g for g in groups if g is not None])  # history pools every mode
    for mode, ts in ok.items():
        if not ts:
            continue
        sd = all_sd
        rows.append(PlanRow(mode=mode, rule="history-throughput", spread=sd, effect=f"{2 * m:.0%} slowdown",
                            seeds_needed=inference.seeds_needed(sd, hist_gap, conf, drift_sd=inference.RUN_DRIFT_SD,
                                                                         fail_confidence=1 - th.history_alpha),
                            seeds_run=len(ts)))
        if mode == REFERENCE_MODE:
            continue
        sd = _pooled_sd(_log_medians(ts, metric), _log_medians(ref, metric))
        rows.append(PlanRow(mode=mode, rule="speedup", spread=sd, effect="speedup 10% below min_speedup",
                            seeds_needed=inference.seeds_needed(sd, -math.log(0.9), conf,
                                                                fail_confidence=1 - th.fail_alpha),
                            seeds_run=len(ts)))
        sd = _pooled_sd(_metric(ts, metric), _metric(ref, metric))
        margin = max(th.metric_abs_tol, th.metric_sigma_k * sd) if sd is not None else th.metric_abs_tol
        rows.append(PlanRow(mode=mode, rule="accuracy-parity", spread=sd, effect=f"{metric} drop of 2 x margin",
                            seeds_needed=inference.seeds_needed(sd, margin, conf, margin_k=_margin_k(th, sd),
                                                                fail_confidence=1 - th.fail_alpha),
                            seeds_run=len(ts)))
    return rows


def plan_run(run_dir: Path) -> list[PlanRow]:
    """The plan of a run folder; a run with no ok trial has no spread to plan from (an error, not silence)."""
    run = open_run(Path(run_dir))
    rows = plan_for(run.suite, run.trials)
    if not rows:
        states = sorted({t.status for t in run.trials})
        raise ResultsError(f"{run_dir}: no ok trial to plan from ({len(run.trials)} trial(s)"
                           + (f", status {', '.join(states)}" if states else "")
                           + "); fix what `ampbench check` reports and run again")
    return rows


def plan_lines(rows: list[PlanRow]) -> list[str]:
    """Plain text, one line per row (the CLI prints these; the report may render rows itself)."""
    out = []
    for r in rows:
        sd = "unknown (one seed)" if r.spread is None else f"{r.spread:.3g}"
        need = "n/a (need >= 2 seeds to see the spread)" if r.spread is None else (
            "> 64" if r.seeds_needed is None else str(r.seeds_needed))
        out.append(f"{r.mode:14} {r.rule:19} spread {sd:>10}  detect {r.effect:32} seeds needed {need} "
                   f"(this run: {r.seeds_run})")
    return out
