"""`ampbench run --until-decided`: add matched seeds (every planned mode) while a rule can still be decided.

After the suite's seeds, the run is judged (the same check as `ampbench check`, at the alpha-spending
levels of this look: judge.sequential); while judge.until says another seed can decide an INCONCLUSIVE
speed or parity rule, one new seed of every planned mode is run (FP32 and AMP of a seed side by side in
the plan, so machine drift hits both arms alike), the look is recorded in run.json, and the run is judged
again.  With `--devices`, a round adds as many matched seeds as the pool runs side by side (8 GPUs, 2
modes: 4 seeds), so no device idles while a decision waits; the alpha spending is computed for the
looks as they happened, whatever their spacing.  It stops when every such rule is decided, at `--max-seeds`, or when one more seed would not fit in
`--budget` (estimated from the wall time the seeds so far took).  A crash in a new trial is kept as that
trial's status, as in any run.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ampbench.commands.run_plan import trial_width
from ampbench.config import Suite
from ampbench.judge import until
from ampbench.judge.check import check_trials
from ampbench.judge.planner import plan_for
from ampbench.judge.sequential import Design
from ampbench.launch.pool import CPU
from ampbench.record.models import PlanEntry, RunInfo
from ampbench.results.baselines import device_slug, load_baseline
from ampbench.results.run_dir import RunDir, open_run


@dataclass(frozen=True)
class Sequential:
    """The options of a sequential run."""

    max_seeds: int = 12
    budget_s: float | None = None
    baseline: Path | None = None
    rules: tuple[str, ...] = ()   # only these rules (in these modes) ask for seeds; empty: every seeded rule
    modes: tuple[str, ...] = ()


def start(info: RunInfo, suite: Suite, opts: Sequential) -> Design:
    """The design before the first look: the suite's seeds, the cap."""
    k0 = len(suite.suite.seeds)
    design = Design(looks=[k0], max_seeds=max(opts.max_seeds, k0))
    info.sequential = design.model_dump()
    return design


def _next_seed(plan: list[tuple[str, int]]) -> int:
    return max(s for _, s in plan) + 1


def seeds_per_round(info: RunInfo, suite: Suite, modes: int) -> int:
    """Matched seeds one round runs side by side: the pool's devices over what one seed's trials take
    (1 without --devices, or when a seed's modes fill the pool)."""
    pool = info.devices or [CPU]
    return max(1, len(pool) // max(1, modes * trial_width(suite, pool)))


def extend(run: RunDir, info: RunInfo, suite: Suite, plan: list[tuple[str, int]], opts: Sequential,
           run_trials: Callable[[list[tuple[str, int]]], None], console: Console, started: float) -> Suite:
    """Look, and add a matched seed while it can decide something; returns the suite with its final seeds."""
    design = Design.model_validate(info.sequential)
    modes = list(dict.fromkeys(m for m, _ in plan))
    side_by_side = seeds_per_round(info, suite, len(modes))
    while True:
        trials = open_run(run.path).trials
        ok = [t for t in trials if t.status == "ok"]
        base = None
        if opts.baseline is not None:
            base = load_baseline(opts.baseline, suite=info.suite, device=device_slug(ok[0].env) if ok else None)
        verdicts = check_trials(suite, trials, plan, baseline=base, allow_mismatch=False, design=design)
        k = design.looks[-1]
        needs = until.needs(verdicts, plan_for(suite, trials), k, design.max_seeds, suite.thresholds, opts.rules,
                            opts.modes)
        if not until.want_more(needs):
            console.print(f"until-decided: stop at {k} seeds per mode: {escape(until.summary(needs))}", soft_wrap=True)
            return suite
        elapsed = time.monotonic() - started
        # a wave = the seeds the pool runs at once; the suite's seeds took ceil(k0 / side_by_side) waves
        waves = math.ceil(design.looks[0] / side_by_side) + len(design.looks) - 1
        per_round = elapsed / max(waves, 1)
        if opts.budget_s is not None and elapsed + per_round > opts.budget_s:
            console.print(f"until-decided: stop at {k} seeds per mode: one more round (~{per_round:.0f} s) would "
                          f"exceed the budget of {opts.budget_s:.0f} s ({escape(until.summary(needs))})", soft_wrap=True)
            return suite
        first = _next_seed(plan)
        added = list(range(first, first + min(side_by_side, design.max_seeds - k)))
        new = [(m, seed) for seed in added for m in modes]
        plan.extend(new)
        seeds = [*suite.suite.seeds, *added]
        suite = suite.model_copy(update={"suite": suite.suite.model_copy(update={"seeds": seeds})})
        design = Design(looks=[*design.looks, k + len(added)], max_seeds=design.max_seeds,
                        pass_spending=design.pass_spending, fail_spending=design.fail_spending)
        info.plan = [PlanEntry(mode=m, seed=s) for m, s in plan]
        info.config = suite.model_dump(mode="json")
        info.sequential = design.model_dump()
        run.write_run(info)
        helped = [f"{n.mode} {n.rule}" for n in needs if n.more_seeds_help]
        which = f"seed {added[0]}" if len(added) == 1 else f"seeds {added[0]}-{added[-1]} side by side"
        console.print(f"until-decided: adding {which} ({k + len(added)} per mode) for {escape(', '.join(helped))}",
                      soft_wrap=True)
        run_trials(new)
