"""Is the throughput change between two runs significant? `check --baseline`'s test, both ways.

`ampbench compare` prints a change per mode; a number such as "+35.6%" means nothing without knowing
whether the two runs' trial-to-trial spread could produce it. There is one comparison model, the
history-throughput rule (judge.rules.history): per-trial figures, the spread pooled over every mode of
both runs, a run-to-run drift allowance, a slowdown beyond `history_min_change` shown at
1 - `history_alpha`, and a change the interference evidence explains marked as disturbed. This module
only applies it in both directions, the current run against the other (a slowdown) and the other
against the current (a speed-up), so "significant" means the same in `compare` as in `check`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ampbench.judge.check import judge_run
from ampbench.judge.rules.history import HISTORY_THROUGHPUT
from ampbench.results.baselines import from_trials
from ampbench.results.compare_file import Significance
from ampbench.results.run_dir import OpenRun
from ampbench.results.verdicts import RuleResult

RULE = HISTORY_THROUGHPUT
Mark = Literal["slower", "faster", "disturbed", "not significant"]


@dataclass(frozen=True)
class Change:
    """One mode's throughput change, current run against the other, as history-throughput judged it."""

    mode: str
    mark: Mark
    ratio: float | None      # current / other, the mode's level in the figure the rule decided on
    ci_low: float | None     # its two-sided interval at the suite's confidence
    ci_high: float | None
    min_change: float        # history_min_change: a smaller change is never called significant
    why: str                 # why not significant (too few trials, undecided, the disturbance), or ""

    @property
    def significant(self) -> bool:
        return self.mark in ("slower", "faster")

    @property
    def change(self) -> float | None:
        return None if self.ratio is None else self.ratio - 1


def _rules(run: OpenRun, other: OpenRun) -> dict[str, RuleResult]:
    """history-throughput of every mode of `run` with `other` as its baseline (nothing is written)."""
    base = from_trials(other.info, other.suite, other.trials, source=str(other.path))
    report = judge_run(run, base, allow_mismatch=True)
    return {r.mode: r for v in report.verdicts for r in v.rules if r.rule == RULE}


def _num(x: object) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _why(r: RuleResult | None, back: RuleResult | None) -> str:
    codes = set((r.details.get("reasons") if r else None) or []) | set((back.details.get("reasons") if back else None) or [])
    if "few-seeds" in codes or "short-trials" in codes:
        return "too few trials or measured steps to decide"
    seeds = (r.details.get("seeds") if r else None) or []
    if seeds and min(seeds) < 3:
        return f"{min(seeds)} trials on a side: a significant change needs 3"
    return "within the runs' spread"


def _own_fail(r: RuleResult) -> bool:
    """A FAIL of the mode's own throughput: not one its AMP/FP32 ratio alone decided (judge.gate: FP32 got faster,
    the AMP mode did not), which says nothing of the mode being slower or faster."""
    return r.status == "FAIL" and r.details.get("basis") != "ratio"


def changes(current: OpenRun, other: OpenRun) -> dict[str, Change]:
    """Per mode present in both runs: slower (the rule FAILs current vs other), faster (it FAILs other vs
    current), disturbed (either direction explained by interference), else not significant."""
    fwd, back = _rules(current, other), _rules(other, current)
    out = {}
    for mode, r in fwd.items():
        rb = back.get(mode)
        d = r.details
        disturbed = bool(d.get("disturbed")) or bool(rb is not None and rb.details.get("disturbed"))
        mark: Mark
        if _own_fail(r):
            mark, why = "slower", ""
        elif rb is not None and _own_fail(rb):
            mark, why = "faster", ""
        elif disturbed:
            mark = "disturbed"
            msg = r.message if r.details.get("disturbed") else (rb.message if rb is not None else "")
            why = msg.split(". ", 1)[0]
        else:
            mark, why = "not significant", _why(r, rb)
        th = r.threshold if isinstance(r.threshold, dict) else {}
        # the mode's own change in the figure that decided (its level, where the rule decided on the AMP/FP32
        # ratio: judge.rules.history_one_run's level_*), beside the mark the rule gave
        lv = "level_" if _num(d.get("level_ratio")) is not None else ""
        out[mode] = Change(mode, mark, _num(d.get(f"{lv}ratio")), _num(d.get(f"{lv}ci_low")),
                           _num(d.get(f"{lv}ci_high")), _num(th.get("min_change")) or 0.0, why)
    return out


@dataclass(frozen=True)
class FailAbove:
    """`--fail-above PCT` over two runs' marks (compare's exit code, pr-check's and its comment's line): the
    modes significantly slower by more than PCT percent (exit 1), else those slower by more whose measurement
    was disturbed (exit 3: this machine cannot decide them, as check's INCONCLUSIVE), else none (exit 0).  A
    change that is not significant never fails: that is noise the runs' spread explains."""

    pct: float
    failed: list[str] = field(default_factory=list)
    unsure: list[str] = field(default_factory=list)

    @property
    def code(self) -> int:
        return 1 if self.failed else 3 if self.unsure else 0


def fail_above(marks: dict[str, Significance], pct: float) -> FailAbove:
    """The modes whose change is below -PCT %, split by their mark (FailAbove)."""
    beyond = {m: c for m, c in marks.items() if c.change is not None and c.change < -pct / 100}
    return FailAbove(pct, [m for m, c in beyond.items() if c.mark == "slower"],
                     [m for m, c in beyond.items() if c.mark == "disturbed"])
