"""`run --until-decided`: may another matched seed still decide a rule?  (The runner asks after each look.)

Seeds are added while a rule that more seeds can decide is INCONCLUSIVE: speedup, accuracy-parity,
history-throughput and history-metric (memory is close to deterministic and INCONCLUSIVE only when not
recorded; informational rules, i.e. AMP inactive, and "measurement disturbed" ones cannot be decided by
more of the same measurement).  A rule is given up when the seed planner (planner.plan_for, from the
spreads seen so far) needs more seeds than the cap for the effect it must detect: adding seeds would
spend GPU-hours on a decision the cap cannot reach.  The error rates over all looks are those of the
sequential levels (judge.sequential), simulated in tests/test_verdict_sim.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from ampbench.judge.planner import PlanRow
from ampbench.results.verdicts import ModeVerdict, RuleResult

SEEDED_RULES = ("speedup", "accuracy-parity", "history-throughput", "history-metric")
PLANNER_RULE = {"history-metric": "accuracy-parity"}  # the same test; the planner sizes the parity one


@dataclass(frozen=True)
class Need:
    """One undecided rule and whether more seeds can decide it."""

    mode: str
    rule: str
    more_seeds_help: bool
    why: str


def _details(r: RuleResult) -> dict:
    return r.details


def needs(verdicts: list[ModeVerdict], rows: list[PlanRow], seeds: int, max_seeds: int) -> list[Need]:
    """Every INCONCLUSIVE seeded rule, with whether another seed (within `max_seeds`) can decide it."""
    plan = {(r.mode, r.rule): r for r in rows}
    out = []
    for v in verdicts:
        for r in v.rules:
            if r.rule not in SEEDED_RULES or r.status != "INCONCLUSIVE":
                continue
            if r.informational:
                out.append(Need(v.mode, r.rule, False, "informational (AMP inactive)"))
                continue
            if _details(r).get("disturbed"):
                out.append(Need(v.mode, r.rule, False, "measurement disturbed: more seeds measure the same machine"))
                continue
            row = plan.get((v.mode, PLANNER_RULE.get(r.rule, r.rule)))
            if row is None or row.spread is None:
                out.append(Need(v.mode, r.rule, True, "spread not known yet"))
            elif row.seeds_needed is None or row.seeds_needed > max_seeds:
                need = "> 64" if row.seeds_needed is None else str(row.seeds_needed)
                out.append(Need(v.mode, r.rule, False, f"the planner needs {need} seeds, beyond the cap of {max_seeds}"))
            else:
                out.append(Need(v.mode, r.rule, True, f"the planner needs {row.seeds_needed} seeds (cap {max_seeds})"))
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


def parse_duration(text: str) -> float:
    """`90s`, `30m`, `2h`, `1h30m`, `45` (seconds) -> seconds; ValueError otherwise."""
    t = text.strip().lower()
    if not t:
        raise ValueError("empty duration")
    total, num = 0.0, ""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    for ch in t:
        if ch.isdigit() or ch == ".":
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
    return total
