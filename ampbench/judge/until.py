"""`run --until-decided`: may another matched seed still decide a rule?  (The runner asks after each look.)

Seeds are added while a rule that more seeds can decide is INCONCLUSIVE: each result that declares `seeds`
on its rule object (judge/rules/traits.py: speedup, accuracy-parity, history-throughput and history-metric;
memory is close to deterministic and INCONCLUSIVE only when not recorded; informational rules, i.e. AMP
inactive, "measurement disturbed" ones, and history-throughput against the pooled history, whose interval
is the series' run-to-run spread (PER_RUN_WHY), cannot be decided by more of the same measurement).  A rule is given up when the seed planner (planner.plan_for, from the
spreads seen so far) needs more seeds than the cap for the effect it must detect AND the effect seen so
far would not be decided within the cap either (`projected_seeds`: a large slowdown is decided with
far fewer seeds than the planner's design effect needs); adding seeds would spend GPU-hours on a
decision the cap cannot reach.  A history comparison is also bounded by its baseline's trials, which
this run cannot add to: when they alone keep the interval too wide, the stop says so (save a baseline
with more seeds).  Stopping early only removes chances to decide, so the error rates over all looks
are at most those of the sequential levels (judge.sequential), simulated in tests/test_verdict_sim.py
with every look up to the cap.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass

from ampbench.config import Thresholds
from ampbench.judge.distributions import norm_ppf, t_ppf
from ampbench.judge.planner import PlanRow
from ampbench.judge.rules import registry
from ampbench.results.verdicts import ModeVerdict, RuleResult

# history-throughput against the pooled history judges this run's value (the median of its trials' floors /
# trimmed means) against the spread of the series' run values, V (1 + 1/R): the trials of this run do not
# enter that interval, so no number of seeds narrows it (issue 40: --until-decided spent 8.8 trials where 3
# decide as well).  The rule is judged at the fixed levels and never asks for a seed.
PER_RUN_WHY = ("judged per run against the history's run-to-run spread, V (1 + 1/R), which more seeds of this "
               "run do not narrow: more nights in the history do")


@dataclass(frozen=True)
class Need:
    """One undecided rule and whether more seeds can decide it."""

    mode: str
    rule: str
    more_seeds_help: bool
    why: str


def _details(r: RuleResult) -> dict:
    return r.details


@dataclass(frozen=True)
class Projection:
    """Seeds per mode at which the effect seen so far would be decided (None: never), and why not."""

    seeds: int | None
    effect: float          # the log ratio seen
    baseline_bound: bool   # the baseline's own trials keep the interval too wide, whatever this run adds


def projected_seeds(r: RuleResult, spread: float | None, th: Thresholds, limit: int = 64) -> Projection | None:
    """For the log-ratio rules (those whose `Seeding` declares an `effect`: speedup, history-throughput): the
    fewest seeds per mode n at which a one-sided bound around the estimate seen so far would clear the
    threshold, at the nominal levels (PASS at `confidence`, FAIL at 1 - alpha; t quantiles on the two arms'
    degrees of freedom, the final looks' levels being close to these).  Both arms growing (speedup):
    se^2 = sd^2 * 2/n.  A baseline's n_b trials fixed (history): se^2 = sd^2 * (1/n + 1/n_b) + drift^2.
    None when the rule has no estimate or spread yet."""
    if spread is None or spread <= 0:
        return None
    seeding = registry.result(r.rule).seeds
    seen = seeding.effect(r, th) if seeding is not None and seeding.effect is not None else None
    if seen is None:
        return None
    est, thr, alpha, fixed, drift = seen.estimate, seen.threshold, seen.alpha, seen.fixed, seen.drift
    eff = math.log(est)
    gap = abs(eff - math.log(thr))
    level = th.confidence if eff > math.log(thr) else 1 - alpha
    if fixed is not None:   # even infinitely many seeds here leave the baseline's share of the variance
        z = float(norm_ppf(level))
        if gap <= z * math.sqrt(spread ** 2 / fixed + drift ** 2):
            return Projection(None, eff, gap > 0)
    for n in range(2, limit + 1):
        var = spread ** 2 * (2 / n if fixed is None else 1 / n + 1 / fixed) + drift ** 2
        df = 2 * n - 2 if fixed is None else n + fixed - 2
        if float(t_ppf(level, df)) * math.sqrt(var) < gap:
            return Projection(n, eff, False)
    return Projection(None, eff, False)


def _judge_need(mode: str, r: RuleResult, row: PlanRow | None, max_seeds: int, th: Thresholds | None) -> Need:
    """Whether more seeds can decide one INCONCLUSIVE, non-informational, undisturbed rule."""
    if row is None or row.spread is None:
        return Need(mode, r.rule, True, "spread not known yet")
    proj = projected_seeds(r, row.spread, th) if th is not None else None
    if proj is not None and proj.baseline_bound:
        n_b = _details(r)["seeds"][1]
        return Need(mode, r.rule, False, f"the baseline's {n_b} trials keep this comparison undecided at spread "
                                         f"{row.spread:.3g}, whatever this run adds: save a baseline with more seeds")
    if row.seeds_needed is not None and row.seeds_needed <= max_seeds:
        return Need(mode, r.rule, True, f"the planner needs {row.seeds_needed} seeds (cap {max_seeds})")
    if proj is not None and proj.seeds is not None and proj.seeds <= max_seeds:
        return Need(mode, r.rule, True, f"the change seen ({math.exp(proj.effect) - 1:+.1%}) would be decided at "
                                        f"about {proj.seeds} seeds (cap {max_seeds})")
    need = "> 64" if row.seeds_needed is None else str(row.seeds_needed)
    seen = "" if proj is None else (f"; the change seen ({math.exp(proj.effect) - 1:+.1%}) needs "
                                    f"{'> 64' if proj.seeds is None else proj.seeds}")
    return Need(mode, r.rule, False, f"the planner needs {need} seeds{seen}, beyond the cap of {max_seeds}")


def needs(verdicts: list[ModeVerdict], rows: list[PlanRow], seeds: int, max_seeds: int,
          th: Thresholds | None = None, rules: Collection[str] = (), modes: Collection[str] = ()) -> list[Need]:
    """Every INCONCLUSIVE seeded rule, with whether another seed (within `max_seeds`) can decide it;
    `th` (the suite's thresholds) lets the effect seen so far count (projected_seeds).  `rules` / `modes`, when
    given, are the only ones a caller decides on (bisect: the rule it searches, in the modes it judges): another
    rule left undecided is no reason for a seed (a history-metric search spent 6 seeds a candidate on
    history-throughput, where 3 decided the metric)."""
    plan = {(r.mode, r.rule): r for r in rows}
    out = []
    for v in verdicts:
        if modes and v.mode not in modes:
            continue
        for r in v.rules:
            seeding = registry.result(r.rule).seeds
            if seeding is None or r.status != "INCONCLUSIVE" or (rules and r.rule not in rules):
                continue
            if r.informational:
                out.append(Need(v.mode, r.rule, False, "informational (AMP inactive)"))
                continue
            if not r.counted or (r.emulated and registry.result(r.rule).device):
                out.append(Need(v.mode, r.rule, False, "not measured under emulation"))
                continue
            if _details(r).get("disturbed"):
                out.append(Need(v.mode, r.rule, False, "measurement disturbed: more seeds measure the same machine"))
                continue
            if _details(r).get("per_run"):
                out.append(Need(v.mode, r.rule, False, PER_RUN_WHY))
                continue
            row = plan.get((v.mode, seeding.sized_by or r.rule))   # history-metric: parity's row, the same test
            out.append(_judge_need(v.mode, r, row, max_seeds, th))
    if seeds >= max_seeds:
        out = [Need(n.mode, n.rule, False, f"seed cap {max_seeds} reached") for n in out]
    return out


def want_more(needs_: list[Need]) -> bool:
    return any(n.more_seeds_help for n in needs_)


def summary(needs_: list[Need]) -> str:
    """One line per undecided rule, for the console and run.json."""
    if not needs_:
        return "every speed and parity rule is decided"
    return "; ".join(f"{n.mode} {n.rule}: {n.why}" for n in needs_)


@dataclass(frozen=True)
class SeedAdvice:
    """The one seed recommendation of a run, said alike wherever seeds are suggested (the outcome table's note,
    `check --explain`, `ampbench plan`): the seeds per mode that decide every undecided rule more seeds can
    decide, the planner's figure for the rule that needs most."""

    seeds: int
    mode: str
    rule: str

    def option(self) -> str:
        """How to run it: the seeds listed, or, past 16, the run adding them until decided."""
        if self.seeds <= 16:
            return "--seeds " + ",".join(map(str, range(self.seeds)))
        return f"--until-decided --max-seeds {self.seeds}"

    def text(self) -> str:
        return (f"{self.seeds} seeds per mode decide every rule (the most any needs: {self.rule} in {self.mode}): "
                f"{self.option()}")


def recommend(verdicts: list[ModeVerdict], rows: list[PlanRow], th: Thresholds | None = None) -> SeedAdvice | None:
    """The run's one recommendation (None when no undecided rule is one more seeds can decide): over the
    INCONCLUSIVE rules `needs` says seeds help (informational, disturbed and per-run ones never), the planner's
    seeds for the one that needs most (a rule beyond the planner's limit of 64 is left out: no count decides it)."""
    plan = {(r.mode, r.rule): r for r in rows}
    best: SeedAdvice | None = None
    for n in needs(verdicts, rows, 0, 10**6, th):
        if not n.more_seeds_help:
            continue
        seeding = registry.result(n.rule).seeds
        row = plan.get((n.mode, (seeding.sized_by if seeding else None) or n.rule))
        if row is None or row.seeds_needed is None:
            continue
        seeds = max(row.seeds_needed, row.seeds_run + 1)   # still undecided at the planner's count: more than ran
        if best is None or seeds > best.seeds:
            best = SeedAdvice(seeds, n.mode, n.rule)
    return best


MAX_DURATION_S = 366 * 86400.0   # a budget longer than a year is a typo (and inf is not JSON)


def parse_duration(text: str) -> float:
    """`90s`, `30m`, `2h`, `1h30m`, `45` (seconds) -> seconds; ValueError otherwise."""
    t = text.strip().lower()
    if not t:
        raise ValueError("empty duration")
    total, num = 0.0, ""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    for ch in t:
        if ch in "0123456789.":   # ASCII only: `²` passes isdigit() but is no digit to float()
            num += ch
        elif ch in units and num:
            total += float(num) * units[ch]
            num = ""
        else:
            raise ValueError(f"not a duration: {text!r} (e.g. 90s, 30m, 2h, 1h30m)")
    if num:
        total += float(num)
    if total <= 0:
        raise ValueError(f"duration must be positive: {text!r}")
    if not math.isfinite(total) or total > MAX_DURATION_S:   # 401 digits are inf: never a budget
        raise ValueError(f"duration over {MAX_DURATION_S // 86400:.0f} days: {text[:40]!r}...")
    return total
