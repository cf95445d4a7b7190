"""After the last step: AMP evidence, memory and energy, throughput, final evaluation, replicas."""

from __future__ import annotations

from typing import Any

from ampbench.trial.context import TrialContext
from ampbench.trial.evaluation import evaluate, time_to_target
from ampbench.trial.loop import LoopResult
from ampbench.trial.setup import Parts


def finish(tr: TrialContext, p: Parts, res: LoopResult) -> None:
    from ampbench.trackers import placement
    from ampbench.trackers.nvml import interference_sample

    p.numerics.close()
    t = tr.trial
    t.memory = res.memory
    amp_evidence(tr, p, res)
    attach_interference(t, {"cpu_share": t.cpu_share(), "others_cpu": res.others_cpu,
                            **placement.merge(res.placement, placement.sample())})
    if res.nvml_window:
        attach_interference(t, interference_sample(res.nvml_window))
    if t.status != "diverged":
        t.metrics = evaluate(tr, p, len(t.steps), res.train_wall, final=True)
        t.status = "ok"
    time_to_target(tr, p.wl)
    t.workload_info = p.wl.describe()  # counts from training too
    p.replicas.finish(t, p.model)      # per-rank memory (maxima, energy summed), weight digests
    tr.record.finish(res.counts_total, window_s=res.window_s)   # throughput, energy per sample


def amp_evidence(tr: TrialContext, p: Parts, res: LoopResult) -> None:
    """Whether a low-precision op really ran, and if not, whether the device or the lists are why."""
    from ampbench.trackers import device
    from ampbench.trial.precision import low_precision_calls

    amp, mode = p.amp, tr.mode
    amp.op_calls = dict(res.op_counts)
    amp.optimizer_op_calls = {op: c for op, c in res.ops_apart.calls.items() if any(c.values())}
    low = low_precision_calls(amp.op_calls)
    amp.active = bool(mode.amp and low > 0)
    if p.prec.emu is not None:   # emulated: float32 kernels by design; the emulator says what it emulated
        from ampbench.core.records import Emulation

        amp.emulation = Emulation.model_validate(p.prec.emu.record())
        amp.evidence = f"emulated {mode.dtype} {mode.level}: " + emulated_evidence(amp.emulation)
        return
    n = min(tr.suite.train.op_stats_steps(), len(tr.trial.steps))
    amp.evidence = f"{low} low-precision op calls of {sum(sum(c.values()) for c in amp.op_calls.values())} " \
                   f"in the first {n} step(s), the optimizer step's " \
                   f"{sum(sum(c.values()) for c in amp.optimizer_op_calls.values())} apart"
    if mode.amp and not amp.active:
        rule = device.amp_unsupported_reason(mode.dtype)
        on_device = bool(rule) or not device.amp_supported(mode.dtype, mode.amp_level)
        amp.inactive_code = "device" if on_device else "op-lists"
        amp.inactive_reason = (
            f"AMP inactive on this device ({tr.trial.env.device}): {rule}" if rule else
            f"AMP inactive on this device ({tr.trial.env.device}): {mode.dtype} AMP is unsupported here "
            f"(a probe matmul/conv2d under auto_cast {mode.level} stayed float32), every op ran in float32"
            if not device.amp_supported(mode.dtype, mode.amp_level) else
            "AMP requested but no op ran in low precision (check the custom op lists)"
        )


def emulated_evidence(e: Any) -> str:
    """`412 of 530 op calls emulated in float16; 3 overflowed, 12 flushed` (the trial's evidence line)."""
    low = sum(c.get("low", 0) for c in e.op_calls.values())
    total = low + sum(c.get("float32", 0) for c in e.op_calls.values())
    t = e.totals
    lost = ", ".join(f"{t[k]} {k.replace('_', ' ')}" for k in ("overflow", "underflow", "grad_overflow",
                                                                "grad_underflow", "lost_updates") if t.get(k))
    return f"{low} of {total} op calls under auto_cast in the low dtype over {e.steps} step(s)" + \
        (f"; lost values: {lost}" if lost else "; no value lost")


def attach_interference(trial: Any, fields: dict[str, Any]) -> None:
    """Merge evidence of a disturbed measurement (CPU share, other processes, NVML) into
    `Trial.interference`."""
    from ampbench.core.records import Interference

    current = trial.interference.model_dump() if trial.interference is not None else {}
    trial.interference = Interference.model_validate({**current, **fields})
