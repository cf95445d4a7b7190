"""The seed planner: how many seeds each rule needs, from a run's observed spreads.

For each rule whose result declares it seeded with a `plan` (judge/rules/traits.py), the planner takes the
between-trial spread the run showed (log per-trial median throughput; for history-throughput the log fast
floor where every trial has one; the metric's seed sd) and the effect the rule must detect (the issue's
acceptance sizes: a speedup 10% below min_speedup, a throughput drop of 2 x history_min_change, a metric
drop of twice the parity margin), both computed by the rule's own `plan` function, and returns the seeds
per mode at which the rule's one-sided bound gives <= 1% false alarms and >= 95% detection
(inference.seeds_needed; normal theory, checked by simulation in docs/checks.md).  `ampbench plan RUN` prints it; the report calls `plan_for`.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from ampbench.config import Suite
from ampbench.core.errors import ResultsError
from ampbench.judge.rules import registry
from ampbench.record.models import Trial
from ampbench.results.run_dir import open_run


class PlanRow(BaseModel):
    """One rule of one mode: observed spread, the effect it must detect, seeds needed vs run."""

    mode: str
    rule: str
    spread: float | None  # sd between trials (log scale for throughput, metric units for parity)
    effect: str
    seeds_needed: int | None  # None: spread unknown (one seed) or beyond the planner's limit
    seeds_run: int


def plan_for(suite: Suite, trials: list[Trial]) -> list[PlanRow]:
    """Per mode, a row for each result its rule declares seeded with a `plan` (judge/rules/traits.py): speedup
    and accuracy-parity in the AMP modes, history-throughput in every mode, in registry order."""
    ok = {m.name: [t for t in trials if t.mode == m.name and t.status == "ok"] for m in suite.modes}
    planned = [(r.name, r.seeds.plan) for r in registry.results() if r.seeds is not None and r.seeds.plan is not None]
    rows: list[PlanRow] = []
    for mode, ts in ok.items():
        if not ts:
            continue
        for name, plan in planned:
            size = plan(suite, mode, ok)
            if size is not None:
                rows.append(PlanRow(mode=mode, rule=name, spread=size.spread, effect=size.effect,
                                    seeds_needed=size.seeds_needed, seeds_run=len(ts)))
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
