"""After the last step: AMP evidence, memory and energy, throughput, final evaluation, replicas."""

from __future__ import annotations

from ampbench.record.models import InactiveCode
from ampbench.trial.context import TrialContext
from ampbench.trial.evaluation import evaluate, time_to_target
from ampbench.trial.loop import LoopResult
from ampbench.trial.setup import Parts


def finish(tr: TrialContext, p: Parts, res: LoopResult) -> None:
    from ampbench.trackers import placement
    from ampbench.trackers.nvml import interference_sample

    p.numerics.close()
    t = tr.trial
    tr.record.memory(res.memory)
    amp_evidence(tr, p, res)
    tr.record.interference({"cpu_share": t.cpu_share(), "others_cpu": res.others_cpu,
                            **placement.merge(res.placement, placement.sample())})
    if res.nvml_window:
        tr.record.interference(interference_sample(res.nvml_window))
    if t.status != "diverged":
        t.metrics = evaluate(tr, p, len(t.steps), res.train_wall, final=True)
        tr.record.outcome("ok")
    time_to_target(tr, p.wl)
    t.workload_info = p.wl.describe()  # counts from training too
    p.replicas.finish(tr.record, p.model)   # per-rank memory (maxima, energy summed), weight digests
    tr.record.finish(res.counts_total, window_s=res.window_s)   # throughput, energy per sample


def amp_evidence(tr: TrialContext, p: Parts, res: LoopResult) -> None:
    """Whether a low-precision op really ran, and if not, whether the device or the lists are why."""
    from ampbench.trial.precision import low_precision_calls

    calls = dict(res.op_counts)
    apart = {op: c for op, c in res.ops_apart.calls.items() if any(c.values())}
    low = low_precision_calls(calls)
    n = min(tr.suite.train.op_stats_steps(), len(tr.trial.steps))
    evidence = (f"{low} low-precision op calls of {sum(sum(c.values()) for c in calls.values())} "
                f"in the first {n} step(s), the optimizer step's {sum(sum(c.values()) for c in apart.values())} apart")
    tr.record.amp_evidence(calls, apart, low, evidence, lambda: why_inactive(tr))
    if p.prec.emu is not None:   # emulated: float32 kernels by design; the emulator says what it emulated
        tr.record.emulation(p.prec.emu.record())


def why_inactive(tr: TrialContext) -> tuple[InactiveCode, str]:
    """Why AMP requested ran no op in low precision: the device (or its build) cannot, or the op lists."""
    from ampbench.trackers import device

    mode = tr.mode
    rule = device.amp_unsupported_reason(mode.dtype)
    supported = device.amp_supported(mode.dtype, mode.amp_level)
    on_device = bool(rule) or not supported
    return ("device" if on_device else "op-lists"), (
        f"AMP inactive on this device ({tr.trial.env.device}): {rule}" if rule else
        f"AMP inactive on this device ({tr.trial.env.device}): {mode.dtype} AMP is unsupported here "
        f"(a probe matmul/conv2d under auto_cast {mode.level} stayed float32), every op ran in float32"
        if not supported else
        "AMP requested but no op ran in low precision (check the custom op lists)"
    )
