"""The tuning ladder's decisions (pure): what a judged rung failed on, and which change to try next.

`ampbench tune` (commands/tune.py) runs a rung, judges it with the same rules as `ampbench check`,
and asks this module two questions: what kind of failure the verdict is (`classify`), and which
documented change answers it next (`next_rung`).  Each ladder follows the order the Paddle threads
converged on by hand (docs/tune.md cites each rung's source); a rung that does not apply to the
current configuration (master_grad at O1, no overflowing ops known) is skipped with the reason, never
run.  No I/O and no Paddle here, so every decision is tested against simulated outcomes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ampbench.config import ModeConfig
from ampbench.judge.rules import registry
from ampbench.judge.rules.traits import TuneKind
from ampbench.results.verdicts import ModeVerdict, RuleResult

# the kinds a rule's result declares (`tune` on its rule object: judge/rules/traits.py) and the ladder's own
Failure = Literal[TuneKind, "pass", "undecided", "data-bound", "launch-bound"]

# Evidence thresholds that stop the speed ladder: no precision setting shortens a step that waits
# for data or for the host (Paddle #42436: O1 no faster on V100, GPU under 50% busy, loader-bound).
DATA_BOUND_SHARE = 0.5
LAUNCH_BOUND_HOST_SHARE = 0.9

# Layers Paddle's AMP guide and PaddleDetection PR #8305 keep in FP32 under O2.
EXCLUDED_LAYERS = ("Embedding", "LayerNorm", "BatchNorm", "BatchNorm1D", "BatchNorm2D", "GroupNorm")
# Scaler settings for sparse / fragile gradients (the seed article; PaddleOCR #6848, #10874).
SCALING = {"init_loss_scaling": 1024.0, "decr_every_n_nan_or_inf": 1, "incr_every_n_steps": 1000}


@dataclass(frozen=True)
class Facts:
    """What the use-case knows beyond the verdict: ops diagnose flagged, the device, the probe."""

    overflow_ops: tuple[str, ...] = ()      # diagnose: NaN/Inf in AMP only or beyond the float16 range
    diverging_ops: tuple[str, ...] = ()     # diagnose: first ops whose AMP output drifts from FP32
    bf16_supported: bool = False
    max_batch: int | None = None            # `ampbench probe`'s largest batch for the mode, if one ran
    data_wait_share: float | None = None    # of the AMP trials' measured steps (speed evidence)
    host_share: float | None = None
    gpu: bool = False


@dataclass(frozen=True)
class Step:
    """A rung's decision: its name, the change (ModeConfig fields) and why; `skip` when it does not apply."""

    rung: str
    changes: dict[str, Any] = field(default_factory=dict)
    why: str = ""
    skip: str = ""


def classify(verdict: ModeVerdict, facts: Facts) -> tuple[Failure, str]:
    """The failure a rung's verdict shows, first the one that makes the others meaningless, and its reason.
    Each result that did not pass is the kind its rule declares (`tune`: amp-active inactive, completeness
    error, stability, accuracy-parity parity, speedup and memory speed); the first of each kind counts."""
    bad: dict[TuneKind, RuleResult] = {}
    for r in verdict.rules:
        kind = registry.result(r.rule).tune
        if r.status != "PASS" and kind is not None:
            bad.setdefault(kind, r)
    if "inactive" in bad:
        return "inactive", bad["inactive"].message
    if "error" in bad or verdict.verdict == "ERROR":
        err = bad.get("error")
        return "error", err.message if err else "a trial could not be judged"
    if "stability" in bad:
        return "stability", bad["stability"].message
    if "parity" in bad:
        return _decided("parity", bad["parity"])
    speed = bad.get("speed")
    if speed is not None:
        if facts.data_wait_share is not None and facts.data_wait_share >= DATA_BOUND_SHARE:
            return "data-bound", (f"{facts.data_wait_share:.0%} of each step waits for data: no precision setting "
                                  "can help; raise the loader's num_workers or prefetch")
        if facts.gpu and facts.host_share is not None and facts.host_share >= LAUNCH_BOUND_HOST_SHARE:
            return "launch-bound", (f"the host is busy {facts.host_share:.0%} of each step: the GPU waits for kernel "
                                    "launches; a larger batch or fused ops help, precision does not")
        return _decided("speed", speed)
    if verdict.verdict != "PASS":
        return "error", "; ".join(r.message for r in verdict.rules if r.status != "PASS") or verdict.verdict
    return "pass", "every rule passed"


def _decided(kind: Failure, r: RuleResult) -> tuple[Failure, str]:
    """A FAIL is the kind's; an INCONCLUSIVE is not evidence against the configuration (too few seeds,
    a disturbed measurement): changing it would chase noise, so the ladder stops undecided."""
    if r.status == "INCONCLUSIVE":
        return "undecided", f"{r.rule} not decided: {r.message}"
    return kind, r.message


# ---------------------------------------------------------------- the rungs


def _black_list(what: Literal["overflow", "diverging"]) -> Callable[[ModeConfig, Facts], Step]:
    """A rung that black-lists the ops diagnose found (`what`: overflowing or first diverging)."""
    def rung(m: ModeConfig, f: Facts) -> Step:
        name = f"black-list-{what}"
        ops = f.overflow_ops if what == "overflow" else f.diverging_ops
        new = [op for op in ops if op not in m.custom_black_list]
        if not new:
            return Step(name, skip=f"diagnose named no {what} op not already black-listed")
        return Step(name, {"custom_black_list": [*m.custom_black_list, *new]},
                    f"keep {', '.join(new)} in FP32 (custom_black_list)")
    return rung


def _scaling(m: ModeConfig, f: Facts) -> Step:
    if not m.scaler_wanted:
        return Step("dynamic-scaling", skip=f"no loss scaler in {m.dtype} (bfloat16 has FP32's range)")
    cur = m.scaler.model_dump()
    want = {**cur, **SCALING, "use_dynamic_loss_scaling": True}
    if want == cur:
        return Step("dynamic-scaling", skip="the scaler already has these settings")
    return Step("dynamic-scaling", {"scaler": want}, "dynamic loss scaling from 1024, halved at every overflow")


def _master_grad(m: ModeConfig, f: Facts) -> Step:
    if m.level != "O2":
        return Step("master-grad", skip="master_grad applies to O2 only")
    if m.master_grad:
        return Step("master-grad", skip="master_grad is already on")
    return Step("master-grad", {"master_grad": True}, "FP32 weight gradients (no underflow, clipping in FP32)")


def _bf16(m: ModeConfig, f: Facts) -> Step:
    if m.dtype == "bfloat16":
        return Step("bf16", skip="already bfloat16")
    if not f.bf16_supported:
        return Step("bf16", skip="the device has no bfloat16 (compute capability below 8.0)")
    return Step("bf16", {"dtype": "bfloat16"}, "bfloat16: FP32's exponent range, no overflow to scale away")


def _o1(m: ModeConfig, f: Facts) -> Step:
    if m.level != "O2":
        return Step("o1", skip="already O1")
    return Step("o1", {"level": "O1", "master_grad": False, "excluded_layers": []},
                "O1: only white-list ops in low precision, weights stay FP32")


def _excluded(m: ModeConfig, f: Facts) -> Step:
    if m.level != "O2":
        return Step("excluded-layers", skip="excluded_layers applies to O2 only")
    new = [n for n in EXCLUDED_LAYERS if n not in m.excluded_layers]
    if not new:
        return Step("excluded-layers", skip="Embedding and the norms are already excluded")
    return Step("excluded-layers", {"excluded_layers": [*m.excluded_layers, *new]},
                "Embedding and normalisation layers kept FP32 by decorate")


def _fp32_eval(m: ModeConfig, f: Facts) -> Step:
    return Step("fp32-eval", skip="ampbench's workloads evaluate the trained weights without EMA; for a command "
                "suite keep the program's EMA/eval copy in FP32 (docs/tune.md)")


def _o2(m: ModeConfig, f: Facts) -> Step:
    if m.level == "O2":
        return Step("o2-master-weights", skip="already O2")
    return Step("o2-master-weights", {"level": "O2", "master_weight": True},
                "O2: the whole model in low precision, FP32 master weights in the optimizer")


def _no_promote(m: ModeConfig, f: Facts) -> Step:
    if not m.use_promote:
        return Step("use-promote-off", skip="use_promote is already off")
    return Step("use-promote-off", {"use_promote": False}, "no FP32 promotion of mixed-dtype ops (fewer casts)")


def _max_batch(m: ModeConfig, f: Facts) -> Step:
    if f.max_batch is None:
        return Step("max-batch", skip="no finished `ampbench probe` of this suite (run it to enable this rung)")
    if m.batch_size is not None and m.batch_size >= f.max_batch:
        return Step("max-batch", skip=f"already at the probe's largest batch {f.max_batch}")
    return Step("max-batch", {"batch_size": f.max_batch}, f"the largest batch that fits: {f.max_batch}")


RungFn = Callable[[ModeConfig, Facts], Step]
LADDERS: dict[str, tuple[RungFn, ...]] = {
    "stability": (_black_list("overflow"), _scaling, _master_grad, _bf16),
    "parity": (_o1, _black_list("diverging"), _excluded, _fp32_eval),
    "speed": (_o2, _no_promote, _max_batch),
}
# No `fp16_allreduce` rung (issue 43.4): in dynamic graph Paddle offers no compressed all-reduce (fleet skips
# the static-graph FP16AllReduceOptimizer), and DataParallel already reduces each gradient in its own dtype,
# bucketed and overlapped with the backward: O2 (float16/bfloat16 parameters) is Paddle's half-precision
# all-reduce, and the o2 rung tries it.  ampbench's own fp16 path runs after the whole backward (no overlap)
# with full-model buffers, so as a speed rung it would measure the lost overlap, not the compression.
# Failures no rung answers: the ladder stops with the cause.
STOPS: tuple[Failure, ...] = ("pass", "inactive", "error", "undecided", "data-bound", "launch-bound")


def next_rung(kind: Failure, mode: ModeConfig, facts: Facts, tried: set[str]) -> tuple[Step | None, list[Step]]:
    """The first rung of `kind`'s ladder not tried yet that applies (None: the ladder is spent), and the
    rungs skipped on the way (with why)."""
    skipped: list[Step] = []
    for fn in LADDERS.get(kind, ()):
        step = fn(mode, facts)
        if step.rung in tried:
            continue
        if step.skip:
            skipped.append(step)
            continue
        return step, skipped
    return None, skipped


def apply(mode: ModeConfig, step: Step, name: str) -> ModeConfig:
    """The mode with the rung's change on top (cumulative), renamed; validated as any suite mode is."""
    data = mode.model_dump()
    data.update(step.changes, name=name)
    return ModeConfig.model_validate(data)

