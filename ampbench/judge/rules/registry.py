"""The rules in the order they run for each mode (each a `Rule`: name, applies(ctx), judge(ctx)).

Order matters once: baseline-quality leaves its finding for accuracy-parity.  A new rule is a new
module with a `Rule` object (its judge, advice and labels), listed here: one line.
"""

from __future__ import annotations

from ampbench.judge.rules.amp import AMP_ACTIVE, OP_LISTS
from ampbench.judge.rules.compared import AMP_COMPARED
from ampbench.judge.rules.completeness import COMPLETENESS
from ampbench.judge.rules.context import Rule
from ampbench.judge.rules.energy import ENERGY
from ampbench.judge.rules.history import HISTORY
from ampbench.judge.rules.memory import MEMORY
from ampbench.judge.rules.parity import ACCURACY_PARITY, BASELINE_QUALITY
from ampbench.judge.rules.speed import SPEEDUP
from ampbench.judge.rules.stability import STABILITY
from ampbench.judge.rules.target import TIME_TO_TARGET

RULES: tuple[Rule, ...] = (
    AMP_COMPARED, COMPLETENESS, AMP_ACTIVE, OP_LISTS, BASELINE_QUALITY, ACCURACY_PARITY, SPEEDUP, MEMORY, ENERGY, TIME_TO_TARGET,
    STABILITY, HISTORY,
)


def rule_for(result_name: str) -> Rule | None:
    """The registered rule that emits results of this name (history-throughput -> history)."""
    return next((r for r in RULES if r.emits(result_name)), None)
