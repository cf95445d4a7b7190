"""What the verbs beyond `check` need to know of a rule's result, declared on the rule object (issue 42).

A rule emits one or more results by name (history: history-throughput, history-metric, history-memory).
Each name's `Result` says what it is to the rest of ampbench, so that no other module decides by a rule's
name:

- `seeds`: more matched seeds can decide it while it is INCONCLUSIVE.  `run --until-decided`, tune and
  bisect add seeds for it (judge.until), sized by the seed planner's row for it (`plan`, judge.planner) or
  by another result's row (`sized_by`: history-metric is accuracy-parity's test); a log-ratio rule also
  says how the effect seen so far projects (`effect`, until.projected_seeds).
- `tune`: the failure kind a non-pass of it is to `ampbench tune`'s ladder (judge.ladder.classify).
- `outcome`: "cause" when its non-pass means AMP did not run: the mode's informational results join its
  next-step line in the outcome table (report.outcome), and check's notes say so (judge.check).
- `bisect`: "history" (judged against the good endpoint's baseline, in every mode) or "in-run" (judged
  inside each run, in the AMP modes): `ampbench bisect --rule` searches it (commands.bisect).
- `figure`: the mode figure its result gives: tune's rung record and the run summary read it (speedup's
  estimate and interval from its details, the others' `observed`).
- `device`: it measures the device (time, memory, energy): an emulated mode's result says "not measured
  under emulation" (judge/rules/emulated.py), and a suite that judges numerics alone does not count it.
- `reasons`: the reason codes it emits (judge/rules/reasons.py), each with what it says: its advice reads
  them, `Rule.run` refuses any other, docs/checks.md's table lists them.
- `reference`: its status can move with the run's reference besides its trials (accuracy-parity adds the
  pooled history's run-to-run spread; a bisect "history" result is judged against the reference outright):
  a verdict read back is checked against its trials without it (judge.recorded).
- `interval`: that figure's two-sided interval, as a published claim about it is judged (judge/rules/claims.py):
  the estimate and [low, high] at thresholds.confidence, from the result's details.

A result no rule declares has none of these: `check` judges it and the outcome table shows it, nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, NewType

from ampbench.config import Suite, Thresholds
from ampbench.judge.rules.reasons import Codes
from ampbench.record.models import Trial
from ampbench.results.verdicts import RuleResult

# A result's name, as a rule emits it (`Ctx.rule`) and declares it (`Result`): each rule's module declares its
# names as constants of this type (`SPEEDUP_NAME = ResultName("speedup")`), so mypy refuses a bare string where a
# result is named, a typo included, and a rename is one line; a name read from check.json is a plain str.
ResultName = NewType("ResultName", str)
TuneKind = Literal["inactive", "error", "stability", "parity", "speed"]
OutcomeRole = Literal["cause"]
BisectKind = Literal["history", "in-run"]
Figure = Literal["speedup", "memory_reduction", "metric_delta", "history_change", "time_to_target"]


@dataclass(frozen=True)
class PlanSize:
    """The seed planner's row for one result of one mode: the spread seen, the effect it must detect and
    the seeds per mode that detect it (None: spread unknown, or beyond the planner's limit)."""

    spread: float | None
    effect: str
    seeds_needed: int | None


@dataclass(frozen=True)
class Effect:
    """A log-ratio result's estimate so far against its threshold, at its FAIL alpha; `fixed`: trials that
    no seed of this run adds to (a baseline's; None: both arms grow), `drift`: a run-to-run allowance."""

    estimate: float
    threshold: float
    alpha: float
    fixed: int | None = None
    drift: float = 0.0


@dataclass(frozen=True)
class FigureInterval:
    """A mode figure's estimate and two-sided `confidence` interval, for judging a claim about it; `log`: ratios
    (their spread and projection on the log scale); `sd`, `n`: the between-trial spread on that scale and the
    trials per side it rests on (for how many seeds would narrow it), when known."""

    estimate: float
    low: float
    high: float
    log: bool = False
    sd: float | None = None
    n: int = 0


# (suite, mode, the ok trials of every mode) -> the mode's row, None where the result is not planned for it
PlanFn = Callable[[Suite, str, dict[str, list[Trial]]], PlanSize | None]
EffectFn = Callable[[RuleResult, Thresholds], Effect | None]
# (the result, the suite's thresholds) -> its figure's interval, None where the result holds none (too few seeds)
IntervalFn = Callable[[RuleResult, Thresholds], "FigureInterval | None"]


@dataclass(frozen=True)
class Seeding:
    """More seeds can decide the result: how the planner sizes it, and how its effect seen so far projects."""

    plan: PlanFn | None = None      # its own planner row
    sized_by: ResultName | None = None   # or another result's row sizes it (the same test)
    effect: EffectFn | None = None  # log-ratio rules: the estimate so far (until.projected_seeds)


@dataclass(frozen=True)
class Result:
    """One result name a rule emits and what the other verbs need of it (the module docstring)."""

    name: ResultName
    seeds: Seeding | None = None
    tune: TuneKind | None = None
    outcome: OutcomeRole | None = None
    bisect: BisectKind | None = None
    figure: Figure | None = None
    reasons: Codes = ()
    reference: bool = False
    interval: IntervalFn | None = None
    device: bool = False

    @property
    def needs_reference(self) -> bool:
        """Judged against the run's reference (a baseline, the pooled history), not from its trials alone."""
        return self.reference or self.bisect == "history"
