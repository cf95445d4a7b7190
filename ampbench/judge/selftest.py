"""The self-test's checks (`ampbench selftest`): a rule set of its own over the trials of the gpu-smoke
profile, each check proving that one GPU-side measurement works, with names of its own (none is a judge
rule's: those judge AMP, these judge ampbench's instruments).

A check of one trial gives ok, not ok, or n/a (None) with the reason, where this machine cannot support the
measurement (Paddle turns fp16 AMP off below compute capability 7.0 and bf16 below 8.0; no NVML in the
container; NVML answers "Not Supported" for energy before Volta and in vGPU guests; Paddle 2.x has no
allocator peak reset): it fails only where the measurement is wrong.  A check that does not apply to a
trial at all (the low-precision calls of an fp32 trial) gives no row.  The machine's facts (`Machine`) are
asked by the verb (trackers/), so this module reads trials and facts only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ampbench.core.opstat import on_list
from ampbench.judge.interference import SATURATED
from ampbench.record.models import Trial

NVML_NOTES = {"nvml.pid"}   # our PID not in NVML's list (containers): device-wide memory recorded, not a failure
# a reading the device does not offer (NVML_ERROR_NOT_SUPPORTED: energy before Volta, vGPU guests): "not measured"
NOT_SUPPORTED = "nvml.not_supported."
ENERGY_NOT_SUPPORTED = NOT_SUPPORTED + "nvmlDeviceGetTotalEnergyConsumption"
STEP_SUM_RANGE = (0.8, 1.0 + 1e-6)
# Time outside the steps a step may take before a share under 80% fails: the loop's own bookkeeping between
# steps (reading the loss, the step record, the event line) is ~0.3-0.6 ms of Python a step on this project's
# CPUs, so a short step (a fast GPU, the self-test's small MLP) reads under 80% with nothing wrong, while a
# missed device sync leaves the step's device time in that gap (whole milliseconds on the self-test's sizes).
STEP_GAP_ALLOWANCE_S = 1e-3

@dataclass
class CheckResult:
    check: str
    subject: str
    ok: bool | None     # None: not applicable here (e.g. data-parallel on one GPU)
    detail: str


@dataclass(frozen=True)
class Machine:
    """What this machine can support, asked once in the selftest process (the trials run on the same GPU)."""

    gpus: int                              # GPUs Paddle can use (CUDA_VISIBLE_DEVICES, MIG)
    unsupported: dict[str, str]            # dtype -> why Paddle turns that AMP off here ("" = supported)
    nvml_error: str = ""                   # "" when NVML initialised and resolved this process's GPU
    allocator_reset: bool = True           # paddle.device.cuda.reset_max_memory_* exist (Paddle >= 3.0)
    paddle: str = ""
    device_name: str = ""
    compute_capability: list[int] | None = None
    # dtype -> Paddle's default white list at O1 (which O2 also runs in low precision): the ops whose
    # low-precision calls prove AMP ran (read from Paddle by the verb: the judge imports no Paddle)
    white_lists: dict[str, list[str]] = field(default_factory=dict)


# One check's outcome on one trial: ok (None: n/a here, the detail says why) and the detail.
Verdict = tuple[bool | None, str]


def _trial_ok(t: Trial, mc: Machine) -> Verdict:
    """The trial finished; a failed one shows the start of its error, which is what the reader needs first."""
    return t.status == "ok", t.status if t.status == "ok" else f"{t.status}: {(t.error or '')[:200]}"


def _low_precision(t: Trial, mc: Machine) -> Verdict | None:
    """An AMP mode ran low-precision calls of its evidence ops (None: an fp32 mode, nothing to prove).
    Where Paddle turns the dtype off on this GPU the check is n/a, and low-precision calls there would be
    the defect: Paddle said it would not run them."""
    if not t.amp.requested:
        return None
    low = _low_precision_calls(t, mc)
    unsupported = mc.unsupported.get(t.amp.dtype, "")
    if unsupported and low:
        return False, f"{unsupported}, yet {t.amp.dtype} calls {low}"
    if unsupported:
        return None, f"n/a: {unsupported}"
    return t.amp.active and sum(low.values()) > 0, f"{t.amp.dtype} calls {low or 'none'}"


def _low_precision_calls(t: Trial, mc: Machine) -> dict[str, int]:
    """The trial's calls in its AMP dtype of the ops that prove AMP ran (eager or PIR `pd_op.*` names),
    ops with no such call left out."""
    ops = set(mc.white_lists.get(t.amp.dtype, [])) | set(t.amp.white_list)
    return {op: c.get(t.amp.dtype, 0) for op, c in t.amp.op_calls.items()
            if on_list(op, ops) and c.get(t.amp.dtype, 0)}


def _loss_scale(t: Trial, mc: Machine) -> Verdict | None:
    """fp16 with a live GradScaler records a scale every step; bf16 must not keep a live scaler (Paddle
    switches it off: bf16's range needs none).  None: fp32, or fp16 with the scaler off by the suite."""
    if t.amp.requested and t.amp.dtype == "float16" and t.amp.scaler_enabled:
        missing = [s.step for s in t.steps if s.loss_scale is None]
        return not missing and bool(t.steps), f"steps without a loss scale: {missing[:5]}"
    if t.amp.requested and t.amp.dtype == "bfloat16":
        live = [s.step for s in t.steps if s.loss_scale is not None]
        why = "switched off by Paddle at step 1" if t.amp.scaler_built else "none built"
        return (not t.amp.scaler_enabled and not live,
                f"bf16: no live scaler ({why})" if not live else f"bf16 with a live loss scaler on steps {live[:5]}")
    return None


def _memory_order(t: Trial, mc: Machine) -> Verdict:
    """0 < peak allocated <= peak reserved <= driver-seen memory: each later reading contains the earlier.
    Without Paddle's allocator peak reset the peaks are not this trial's (n/a); without NVML the driver's
    side is left out and the allocator's order is still checked."""
    m = t.memory
    a, r, d = m.peak_allocated_bytes, m.peak_reserved_bytes, m.device_used_bytes
    if not mc.allocator_reset:
        return None, (f"n/a: Paddle {mc.paddle} has no reset_max_memory_* (needs >= 3.0): "
                      f"{m.errors.get('allocator', '')}"[:300])
    if mc.nvml_error:
        return (a is not None and r is not None and 0 < a <= r,
                f"allocated {a}, reserved {r}; driver-seen memory n/a ({mc.nvml_error})")
    return (a is not None and r is not None and d is not None and 0 < a <= r <= d,
            f"allocated {a}, reserved {r}, device {d} ({m.device_used_source})")


def _nvml_device(t: Trial, mc: Machine) -> Verdict:
    """NVML resolved the trial's own GPU with no errors; an NVML note ("not measured here", e.g. our PID
    hidden by a container) is shown but is no failure."""
    if mc.nvml_error:
        return None, f"n/a: {mc.nvml_error}"
    m = t.memory
    errs = {k: v for k, v in m.errors.items() if k.startswith("nvml") and not _nvml_note(k)}
    notes = {k: v for k, v in m.errors.items() if _nvml_note(k)}
    return (bool(m.nvml_device) and not errs,
            f"{m.nvml_device or 'none'}; errors {errs or 'none'}" + (f"; note {notes}" if notes else ""))


def _step_times(t: Trial, mc: Machine) -> Verdict:
    """The step-times check: the measured steps fill 80-100% of the window, or what is outside them is the
    loop's bookkeeping (under STEP_GAP_ALLOWANCE_S a step), never more than the window.  A short window on
    a machine other processes kept saturated (the interference rule's SATURATED share of its cores) is
    n/a: whichever side of the clock the trial waited for a core on decides the share, not the timing.
    Below saturation, other processes that used a share f of the cores (the trial's own others_cpu) may
    have held the trial off a core between its steps for about that share of the window: a share of at
    least 80% - f is n/a there, not a failure (a loaded host read 0.78, issue 62); a missing device sync,
    which leaves a step's device time outside its clock, reads far lower (40% on the self-test's sizes)."""
    measured = t.measured_steps()
    total, window = sum(s.time_s for s in measured), t.throughput.window_s
    detail = f"sum of steps {total:.3f} s of window {window or 0:.3f} s"
    if not window or not measured:
        return False, detail
    share, gap = total / window, (window - total) / len(measured)
    if STEP_SUM_RANGE[0] <= share <= STEP_SUM_RANGE[1]:
        return True, detail
    if share <= STEP_SUM_RANGE[1] and gap <= STEP_GAP_ALLOWANCE_S:
        return True, f"{detail}; {gap * 1e3:.2f} ms a step outside"
    others, cores = (t.interference.others_cpu if t.interference else None), t.env.cpu_count
    if share <= STEP_SUM_RANGE[1] and others is not None and cores and others >= SATURATED * cores:
        return None, (f"n/a: {detail}, while other processes kept {others:.2f} of the {cores} cores busy "
                      "(a saturated machine does not time steps; run selftest on an idle machine)")
    if share <= STEP_SUM_RANGE[1] and others is not None and cores and share >= STEP_SUM_RANGE[0] - others / cores:
        return None, (f"n/a: {detail} ({share:.0%}), while other processes used {others:.2f} of the {cores} cores "
                      f"(the trial may have waited for a core up to {others / cores:.0%} of the window; run selftest "
                      "on an idle machine)")
    return False, f"{detail}; {gap * 1e3:.2f} ms a step outside"


def _nvml_energy(t: Trial, mc: Machine) -> Verdict:
    """The NVML energy check: n/a without NVML or where NVML says the device does not offer it."""
    m = t.memory
    if mc.nvml_error:
        return None, f"n/a: {mc.nvml_error}"
    if ENERGY_NOT_SUPPORTED in m.errors and m.energy_j is None:
        return None, f"n/a: {m.errors[ENERGY_NOT_SUPPORTED]}"
    return (m.energy_j or 0) > 0, f"{m.energy_j} J, {m.energy_j_per_sample} J/sample"


def _nvml_note(key: str) -> bool:
    """An NVML entry of Memory.errors that says "not measured here", not "measured wrong"."""
    return key in NVML_NOTES or key.startswith(NOT_SUPPORTED)



@dataclass(frozen=True)
class GpuCheck:
    """One check of the rule set: its name (in selftest.json and the table), what it proves, and its judge of
    one trial on this machine (None: does not apply to that trial)."""

    name: str
    proves: str
    judge: Callable[[Trial, Machine], Verdict | None] | None = None   # None: not a per-trial check


TRIAL_OK = GpuCheck("trial-ok", "every trial of every bundled suite's gpu-smoke profile finished "
                          "(status ok)", _trial_ok)
DATA_PARALLEL = GpuCheck("data-parallel", "with >= 2 GPUs: a 2-rank trial with per-rank memory measured on two "
                         "different NVML devices")
DEADLINE = GpuCheck("deadline", "n/a rows only: a suite that was running when the 10 minutes passed (it finished; "
                    "nothing started later)")
EMULATION_FIDELITY = GpuCheck("emulation-fidelity", "the toy suite's AMP modes trained both ways, real AMP and "
                              "emulate = true (same seed): loss curves, skipped steps and loss scales agree within "
                              "docs/emulation.md's tolerance")
EMULATED = "-emulated"   # the emulated twin of a mode in the fidelity run
CHECKS: tuple[GpuCheck, ...] = (
    TRIAL_OK,
    GpuCheck("low-precision-calls", "every AMP mode ran float16/bfloat16 calls of an op on Paddle's default white "
             "list for its dtype (paddle.amp.amp_lists.white_list(); e.g. conv2d, matmul_v2, linear_v2) or its "
             "custom white list", _low_precision),
    GpuCheck("loss-scale", "every fp16 mode with a live GradScaler recorded a loss scale on every step", _loss_scale),
    GpuCheck("memory-order", "0 < peak allocated <= peak reserved <= driver-seen (NVML) memory in every trial",
             _memory_order),
    GpuCheck("nvml-device", "NVML resolved the trial's own GPU (PCI bus id, UUID or MIG) with no NVML errors",
             _nvml_device),
    GpuCheck("step-times", "per-step times add up to 80-100% of the measured window's wall time in every trial "
             "(below 80% only where the time outside the steps is under 1 ms a step: the loop's bookkeeping; n/a "
             "where other processes' share of the cores explains the rest)",
             _step_times),
    GpuCheck("nvml-energy", "NVML energy over the measured window > 0 J in every trial (n/a where NVML answers "
             "Not Supported)", _nvml_energy),
    DATA_PARALLEL,
    EMULATION_FIDELITY,
    DEADLINE,
)


def check_trial(t: Trial, mc: Machine) -> list[CheckResult]:
    """Every check of the rule set that applies to one trial, in the set's order."""
    subject = f"{t.suite}/{t.mode}"
    out = []
    for check in CHECKS:
        got = check.judge(t, mc) if check.judge is not None else None
        if got is not None:
            out.append(CheckResult(check.name, subject, *got))
    return out


def figures(t: Trial) -> dict[str, Any]:
    """The raw figures a GPU profile's thresholds are set from (min_speedup, min_memory_reduction,
    metric tolerance, max_skipped_fraction, loss_scale_floor, min_baseline_metric, target)."""
    m, tp = t.memory, t.throughput
    scales = [s.loss_scale for s in t.steps if s.loss_scale is not None]
    return {
        "suite": t.suite, "mode": t.mode, "seed": t.seed, "status": t.status, "batch_size": t.batch_size,
        "amp_active": t.amp.active, "dtype": t.amp.dtype, "level": t.amp.level,
        "samples_per_s": tp.samples_per_s, "step_time_median_s": tp.step_time_median_s,
        "step_time_p90_s": tp.step_time_p90_s, "measured_steps": tp.measured_steps, "window_s": tp.window_s,
        "extra_per_s": dict(tp.extra_per_s or {}),
        "step_times_s": [s.time_s for s in t.measured_steps()],
        "peak_allocated_bytes": m.peak_allocated_bytes, "peak_reserved_bytes": m.peak_reserved_bytes,
        "device_used_bytes": m.device_used_bytes, "device_used_source": m.device_used_source,
        "energy_j": m.energy_j, "energy_j_per_sample": m.energy_j_per_sample,
        "metrics": dict(t.metrics or {}), "skipped_steps": t.skipped_steps, "nonfinite_losses": t.nonfinite_losses,
        "loss_scale_min": min(scales) if scales else None, "loss_scale_last": scales[-1] if scales else None,
        "final_loss": next((s.loss for s in reversed(t.steps) if s.loss is not None), None),
        "wall_s": t.wall_s, "flags": dict(t.flags or {}),
    }


def check_data_parallel(t: Trial) -> list[CheckResult]:
    ranks = t.memory.per_rank
    devices = {(r.get("nvml_device") or {}).get("pci_bus_id") or (r.get("nvml_device") or {}).get("uuid")
               for r in ranks}
    measured = all((r.get("device_used_bytes") or 0) > 0 and (r.get("peak_allocated_bytes") or 0) > 0 for r in ranks)
    ok = t.status == "ok" and len(ranks) == 2 and measured and len(devices - {None}) == 2
    return [CheckResult(DATA_PARALLEL.name, f"{t.suite}/{t.mode} x2", ok,
                        f"status {t.status}; per-rank devices {sorted(d for d in devices if d)}; memory measured {measured}")]


def fidelity_checks(trials: list[Trial], mc: Machine | None = None) -> list[CheckResult]:
    """Each real AMP trial against its emulated twin (judge/fidelity.py); n/a where Paddle keeps the dtype off
    on this GPU (nothing real to compare with) or a trial of the pair did not finish."""
    from ampbench.judge.fidelity import compare

    mc = mc or Machine(gpus=1, unsupported={})
    by_mode = {t.mode: t for t in trials}
    out = []
    for name, emu in sorted(by_mode.items()):
        real = by_mode.get(name.removesuffix(EMULATED))
        if not name.endswith(EMULATED) or real is None:
            continue
        subject = f"{real.suite}/{real.mode}"
        why = mc.unsupported.get(real.amp.dtype, "")
        if why:
            out.append(CheckResult(EMULATION_FIDELITY.name, subject, None, f"n/a: {why}"))
        elif real.status != "ok" or emu.status != "ok" or not real.amp.active or not emu.amp.emulated:
            out.append(CheckResult(EMULATION_FIDELITY.name, subject, False,
                                   f"real {real.status} (AMP active {real.amp.active}), emulated {emu.status} "
                                   f"(emulated {emu.amp.emulated})"))
        else:
            fid = compare(real, emu)
            out.append(CheckResult(EMULATION_FIDELITY.name, subject, fid.ok, fid.detail()))
    return out
