"""Emulated AMP in the verdicts: a mode whose trials ran AMP's numerics in float32 kernels (trial/emulate,
a mode's `emulate = true`) is judged on its numerics for real (parity, stability, loss scale, the metric's
history), and never on the device: its speed, memory, energy and time to target say "not measured under
emulation" (INCONCLUSIVE), whatever the rule computed from the emulated trials' slower steps.

Whether those device results count in the verdict is the suite's choice (`[suite] judges`): under "all"
they do, so an emulated mode is at best INCONCLUSIVE (exit 3); under "numerics" they are shown and not
counted, so an emulated mode whose numerics pass is "PASS (emulated)" and the run may exit 0.  A mode's
verdict is marked emulated in check.json, the console and report.md alike (ModeVerdict.verdict_text).
"""

from __future__ import annotations

from ampbench.judge.rules import registry
from ampbench.judge.rules.context import Ctx
from ampbench.judge.rules.traits import ResultName
from ampbench.results.verdicts import RuleResult

NOT_MEASURED = ("Not measured under emulation: this mode's trials ran AMP's {dtype} numerics in float32 kernels "
                "(emulate = true), so their time, memory and energy say nothing of real AMP; run the mode without "
                "emulate on a GPU to measure them.")


def is_device(r: RuleResult) -> bool:
    return registry.result(r.rule).device


def mark(c: Ctx, results: list[RuleResult]) -> list[RuleResult]:
    """The mode's results as judged: an emulated mode's device results replaced by "not measured", every
    result of it marked emulated; where the suite judges numerics alone, device results not counted."""
    emulated, numerics_only = c.emulated, c.suite.suite.judges == "numerics"
    if not emulated and not numerics_only:
        return results
    out = []
    for r in results:
        device = is_device(r)
        if emulated and device:
            r = c.rule(ResultName(r.rule), "INCONCLUSIVE", None, r.threshold,
                       NOT_MEASURED.format(dtype=c.suite.mode(c.mode).dtype), trials=r.trials, reasons=["emulated"])
        out.append(r.model_copy(update={"emulated": emulated, "counted": not (numerics_only and device)}))
    return out
