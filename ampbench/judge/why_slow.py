"""Why AMP was not faster: the causes a trial's evidence shows, ranked, each with its number.

A speedup that does not PASS is most often not a precision problem (Paddle #42436: O1 on a V100 no
faster, the GPU under 50% busy behind a data loader; Paddle #72050: ops left in FP32 because they
are on no list).  Each cause is read from what every trial records: the data wait and CPU time of
each measured step, the Tensor Core shape audit at the first step, and Paddle's operator stats per
dtype against the level's op lists.  The first cause is the one that bounds the step most.
"""

from __future__ import annotations

from dataclasses import dataclass

from ampbench.core.opstat import by_forward_op, forward_op, is_cast
from ampbench.record.models import Trial

DATA_NOTE = 0.1     # a data wait below a tenth of the step is not worth naming
HOST_BOUND = 0.9    # on a GPU: the host busy this share of each step -> the GPU waits for launches
UNLISTED_NOTE = 0.2  # at O1, a fifth of the op calls on neither list is worth naming
GPU_IDLE = 50.0     # NVML utilization.gpu under half the window: the device waits (Paddle #42436)


@dataclass(frozen=True)
class Cause:
    kind: str       # data-bound, launch-bound, gpu-idle, decorate-order, shapes, fp32-ops, unlisted, casts
    weight: float   # for ranking: the share of the step (or of op calls) it concerns
    text: str


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _data(trials: list[Trial]) -> Cause | None:
    share = _mean([x for t in trials if (x := t.data_wait_share()) is not None])
    if share is None or share < DATA_NOTE:
        return None
    tail = "no precision setting can help; raise the loader's num_workers (or prefetch / use_shared_memory)" \
        if share >= 0.5 else "a faster loader (num_workers) shortens every step whatever the precision"
    return Cause("data-bound", share, f"{share:.0%} of each step waits for data: {tail}")


def _host(trials: list[Trial]) -> Cause | None:
    if not any(t.amp.active for t in trials):
        return None  # on a CPU the host is the device: a full host share is the computation itself
    share = _mean([x for t in trials if (x := t.cpu_share()) is not None])
    if share is None or share < HOST_BOUND:
        return None
    return Cause("launch-bound", share, f"the host is busy {share:.0%} of each step: the GPU waits for kernel "
                 "launches; a larger batch or fused ops help, precision does not")


def _gpu_busy(trials: list[Trial]) -> Cause | None:
    busy = _mean([x for t in trials if t.interference is not None and (x := t.interference.gpu_busy_pct) is not None])
    if busy is None or busy >= GPU_IDLE:
        return None
    return Cause("gpu-idle", 1 - busy / 100, f"GPU busy {busy:.0f}% of the window (NVML): the device waits on the "
                 "host (data loading, Python, kernel launches): no precision setting shortens that")


def _shapes(trials: list[Trial]) -> Cause | None:
    if not any(t.env.device.startswith("gpu") for t in trials):
        return None  # Tensor Cores are a GPU's: on a CPU (or an XPU) the multiple-of-8 advice cannot apply
    audit = next((t.shape_audit for t in trials if t.shape_audit), None)
    if not audit:
        return None
    odd, layers = int(audit.get("odd_count", 0)), int(audit.get("layers", 0))
    parts = []
    if odd and layers:
        first = audit["odd"][0]
        parts.append(f"{odd} of {layers} matmul/conv layers have dimensions that are not multiples of "
                     f"{audit['multiple']} (first: `{first['layer']}` {first['type']} {first['dims']})")
    if not audit.get("batch_ok", True):
        parts.append(f"the batch size {audit['batch_size']} is not a multiple of {audit['multiple']}")
    if not parts:
        return None
    return Cause("shapes", odd / layers if layers else 0.05,
                 "; ".join(parts) + ": Tensor Cores need multiples of 8 (pad the hidden sizes, channels and batch)")


def _order(trials: list[Trial]) -> Cause | None:
    """O2 with data parallel and paddle.amp.decorate after paddle.DataParallel (recorded by the built-in
    loop and by the command hook): Paddle's AMP guide asks for decorate first."""
    if not any(t.amp.decorate_order == "data-parallel-first" for t in trials):
        return None
    return Cause("decorate-order", 1.0, "paddle.amp.decorate ran after paddle.DataParallel wrapped the model (O2 "
                 "with data parallel): decorate the model and optimizer first, then wrap it (Paddle's AMP guide), "
                 "DataParallel groups the gradients it all-reduces from the parameters as they were when it was built, "
                 "before decorate cast them")


def effective_lists(t: Trial) -> tuple[set[str], set[str]]:
    """The white and black lists the trial's auto_cast applied (Paddle's defaults with the custom lists merged,
    as the worker recorded them), in forward-op names; a file written before they were recorded: the custom
    lists only."""
    white = t.amp.effective_white_list or t.amp.white_list
    black = t.amp.effective_black_list or t.amp.black_list
    return {forward_op(o) for o in white}, {forward_op(o) for o in black}


def op_census(t: Trial) -> dict[str, int]:
    """Calls of the trial's op stats: total, low precision, casts, white-list ops in FP32, ops on no list.
    Op names compared through core/opstat.py (PIR's `pd_op.matmul` is `matmul_v2`, a backward op counts as
    its forward), lists the effective ones."""
    calls = t.amp.op_calls
    fwd = by_forward_op(calls)
    white, black = effective_lists(t)
    total = sum(sum(c.values()) for c in calls.values())
    casts = sum(sum(c.values()) for op, c in calls.items() if is_cast(op))
    low = sum(c.get("float16", 0) + c.get("bfloat16", 0) for op, c in calls.items() if not is_cast(op))
    white_fp32 = sum(c.get("float32", 0) for op, c in fwd.items() if op in white)
    unlisted = sum(sum(c.values()) for op, c in fwd.items() if op not in white | black and not is_cast(op))
    return {"total": total, "low_precision": low, "casts": casts, "white_list_fp32": white_fp32,
            "unlisted": unlisted}


def _ops(trials: list[Trial]) -> list[Cause]:
    """The op census's findings; none for a mode that ran in FP32 (AMP inactive: every op is FP32 whatever the
    lists say, so "on neither list" or "white-list ops in FP32" would be an alarm about nothing)."""
    t = next((t for t in trials if t.amp.active and t.amp.op_calls and any(effective_lists(t))), None)
    if t is None:
        return []
    c, out = op_census(t), []
    if c["total"] and c["white_list_fp32"]:
        out.append(Cause("fp32-ops", c["white_list_fp32"] / c["total"],
                         f"{c['white_list_fp32']} of {c['total']} op calls are white-list ops that still ran in FP32 "
                         "(an input kept FP32, or no low-precision kernel: Paddle PR #32543)"))
    if c["total"] and t.amp.level == "O1" and c["unlisted"] / c["total"] >= UNLISTED_NOTE:
        out.append(Cause("unlisted", c["unlisted"] / c["total"],
                         f"{c['unlisted']} of {c['total']} op calls are on neither list: at O1 they run in their "
                         "inputs' dtype, mostly FP32 (Paddle #72050); O2 runs them in low precision"))
    if c["total"] and c["casts"] / c["total"] >= 0.1:
        out.append(Cause("casts", c["casts"] / c["total"], f"{c['casts']} of {c['total']} op calls are casts: "
                         "O2 (FP16 weights) or fewer black-listed ops remove most of them"))
    return out


def rank(trials: list[Trial]) -> list[Cause]:
    """The causes the AMP mode's ok trials show, the heaviest first (the data wait and host share bound the
    step outright, so they rank above the shape and op findings whatever their weight)."""
    ok = [t for t in trials if t.status == "ok"]
    bound = [c for c in (_data(ok), _host(ok), _gpu_busy(ok)) if c is not None]
    rest = [c for c in (_order(ok), _shapes(ok), *_ops(ok)) if c is not None]
    return sorted(bound, key=lambda c: -c.weight) + sorted(rest, key=lambda c: -c.weight)
