"""The rules in the order they run for each mode (each a `Rule`: name, applies(ctx), judge(ctx)), and what the
other verbs ask of them: each result name's declared `Result` (judge/rules/traits.py).

Order matters once: baseline-quality leaves its finding for accuracy-parity.  A new rule is a new
module with a `Rule` object (its judge, advice and results, each declaring what it is to run
--until-decided, the planner, tune, bisect and the outcome table), listed here: one line.  The lookups
below read `RULES` when called, so a rule added to it is seen everywhere.
"""

from __future__ import annotations

from ampbench.config import Thresholds
from ampbench.judge.rules.amp import AMP_ACTIVE, OP_LISTS
from ampbench.judge.rules.compared import AMP_COMPARED
from ampbench.judge.rules.completeness import COMPLETENESS
from ampbench.judge.rules.context import Rule
from ampbench.judge.rules.energy import ENERGY
from ampbench.judge.rules.history import HISTORY
from ampbench.judge.rules.memory import MEMORY
from ampbench.judge.rules.parity import ACCURACY_PARITY, BASELINE_QUALITY
from ampbench.judge.rules.reasons import Codes, reason_table
from ampbench.judge.rules.speed import SPEEDUP
from ampbench.judge.rules.stability import STABILITY
from ampbench.judge.rules.target import TIME_TO_TARGET
from ampbench.judge.rules.traits import BisectKind, Figure, FigureInterval, Result, ResultName
from ampbench.results.verdicts import ModeVerdict, SpeedupDetails

RULES: tuple[Rule, ...] = (
    AMP_COMPARED, COMPLETENESS, AMP_ACTIVE, OP_LISTS, BASELINE_QUALITY, ACCURACY_PARITY, SPEEDUP, MEMORY, ENERGY, TIME_TO_TARGET,
    STABILITY, HISTORY,
)


def rule_for(result_name: str) -> Rule | None:
    """The registered rule that emits results of this name (history-throughput -> history)."""
    return next((r for r in RULES if r.emits(result_name)), None)


def result(name: str) -> Result:
    """What the rule that emits `name` declares of it; a name no registered rule emits has no role."""
    rule = rule_for(name)
    return rule.declared(name) if rule is not None else Result(ResultName(name))


def results() -> list[Result]:
    """Every result name the registered rules emit, as declared, in registry order."""
    return [rule.declared(name) for rule in RULES for name in (rule.labels or (rule.name,))]


def bisectable() -> dict[str, BisectKind]:
    """The results `ampbench bisect --rule` searches, and how each is judged (history / in-run)."""
    return {r.name: r.bisect for r in results() if r.bisect is not None}


def figures(v: ModeVerdict) -> dict[Figure, float | None]:
    """The mode figures the mode's results give (their `observed`, when a number), first result first."""
    out: dict[Figure, float | None] = {}
    for r in v.rules:
        fig = result(r.rule).figure
        if fig is not None and fig not in out:
            out[fig] = float(r.observed) if isinstance(r.observed, (int, float)) else None
    return out


def speedup_details(v: ModeVerdict) -> SpeedupDetails | None:
    """The estimate and interval of the result that gives the speedup figure, when it had enough data."""
    for r in v.rules:
        if result(r.rule).figure == "speedup" and all(isinstance(r.details.get(k), (int, float))
                                                      for k in ("estimate", "ci_low", "ci_high")):
            return SpeedupDetails.model_validate(r.details)
    return None


def reason_codes_table() -> str:
    """docs/checks.md's reason-code table: each result's declared codes, results with the same codes on one row
    (history-metric is accuracy-parity's test), in registry order."""
    rows: list[tuple[list[str], Codes]] = []
    for r in results():
        same = next((row for row in rows if row[1] == r.reasons), None)
        if same is not None:
            same[0].append(r.name)
        else:
            rows.append(([r.name], r.reasons))
    return reason_table(rows)


def interval(v: ModeVerdict, figure: Figure, th: Thresholds) -> FigureInterval | None:
    """A mode figure's interval, from the first result that gives the figure and declares how (a claim about it
    is judged on it: judge/rules/claims.py); None when no such result holds one."""
    for r in v.rules:
        declared = result(r.rule)
        if declared.figure == figure and declared.interval is not None:
            return declared.interval(r, th)
    return None


def traits_table() -> str:
    """docs/checks.md's table of what each result is to the other verbs, rendered from the declarations."""
    def seeds(r: Result) -> str:
        if r.seeds is None:
            return ""
        return f"yes, sized by {r.seeds.sized_by}'s row" if r.seeds.sized_by else "yes"

    lines = ["| result | more seeds decide it | tune's failure kind | outcome table | bisect | figure | measures the device |",
             "|---|---|---|---|---|---|---|"]
    for r in results():
        cells = [seeds(r), r.tune or "", r.outcome or "", r.bisect or "", f"`{r.figure}`" if r.figure else "",
                 "yes: not measured under emulation" if r.device else ""]
        lines.append(f"| {r.name} | " + " | ".join(c or "-" for c in cells) + " |")
    return "\n".join(lines)
