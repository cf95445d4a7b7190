"""amp-compared: a run whose plan holds no AMP mode compared nothing, so it can never be PASS.

Without it an fp32-only suite (an import of a config that never set AMP, `--mode fp32`) judged
fp32's own completeness and stability, printed PASS and exited 0: a green nightly that compared
nothing.  This rule makes the reference INCONCLUSIVE (exit 3) and says why.
"""

from __future__ import annotations

from ampbench.judge.rules.context import Ctx, Rule
from ampbench.judge.rules.reasons import R
from ampbench.judge.rules.traits import Result, ResultName
from ampbench.results.verdicts import RuleResult

# the result name(s) this rule emits: typed, so mypy checks every use (judge/rules/traits.py)
AMP_COMPARED_NAME = ResultName("amp-compared")

# a command program runs FP32 unless something turns AMP on: a level alone would be FP32 again, called AMP inactive
_COMMAND_ADVICE = ("the suite defines no AMP mode: add a [[modes]] entry with level = \"O1\" and the program's own "
                   "AMP switch in `args`, or, for a program without one, amp = \"inject\" (ampbench's start-up "
                   "hook applies Paddle's auto_cast and GradScaler itself)")


def _planned_amp_modes(c: Ctx) -> list[str]:
    planned = {m for m, _ in c.plan}
    return [m.name for m in c.suite.modes if m.amp and m.name in planned]


def _no_amp_planned(c: Ctx) -> bool:
    """The fp32 mode of a run that planned no AMP mode."""
    return c.is_ref and not _planned_amp_modes(c)


def rule_amp_compared(c: Ctx) -> list[RuleResult]:
    """The run compared nothing (no AMP mode planned or defined): INCONCLUSIVE, never a PASS, naming what to add.

    observed = {"amp_modes": AMP modes in the plan (0 here: the rule only reports this case)}."""
    defined = [m.name for m in c.suite.modes if m.amp]
    how = (f"the suite defines {', '.join(defined)} but the run planned only fp32 (--mode?)" if defined else
           _COMMAND_ADVICE if c.suite.suite.workload == "command" else
           "the suite defines no AMP mode: add a [[modes]] entry with level = \"O1\" or \"O2\"")
    return [c.rule(AMP_COMPARED_NAME, "INCONCLUSIVE", {"amp_modes": 0}, {"amp_modes": 1},
                   f"Nothing was compared: no AMP mode was judged ({how}). FP32 alone says nothing about AMP.",
                   reasons=["not-planned" if defined else "none-defined"], defined=defined)]


AMP_COMPARED = Rule("amp-compared", rule_amp_compared, _no_amp_planned, results=(Result(AMP_COMPARED_NAME, reasons=(
    (R.NOT_PLANNED, "the suite has AMP modes, the run planned none"), (R.NONE_DEFINED, ""))),))
