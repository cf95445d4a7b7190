"""`ampbench selftest`: in about 10 minutes on one GPU, prove every GPU-side measurement works (nothing starts
after 10 minutes; a suite running then finishes, its trials bounded by their timeout_s, and a `deadline` row says so).

Runs the `gpu-smoke` profile (a few dozen steps per mode) of every bundled suite, then asserts
the evidence below on every trial; with two or more GPUs also a 2-rank data-parallel trial. One
table, one `selftest.json`; exit 0 only when every check holds, 1 when one fails, 3 at once on a
machine without a GPU (it prints what it would check: nothing GPU-side can be proven there).

A check reads n/a, with the reason, where this machine cannot support it (Paddle turns fp16 AMP
off below compute capability 7.0 and bf16 below 8.0; no NVML in the container; NVML answers
"Not Supported" for energy before Volta and in vGPU guests; Paddle 2.x has no allocator peak
reset; one visible GPU): it fails only where the measurement is wrong.
`selftest.json` also keeps every raw figure the GPU profiles' thresholds are set from
(`figures`, one row per trial; docs/gpu.md "From a selftest to thresholds").
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ampbench.core.files import atomic_write_json
from ampbench.core.names import new_run_id
from ampbench.core.opstat import on_list
from ampbench.judge.interference import SATURATED
from ampbench.record.models import Trial
from ampbench.report.console import table_box

PROFILE = "gpu-smoke"
NVML_NOTES = {"nvml.pid"}   # our PID not in NVML's list (containers): device-wide memory recorded, not a failure
# a reading the device does not offer (NVML_ERROR_NOT_SUPPORTED: energy before Volta, vGPU guests): "not measured"
NOT_SUPPORTED = "nvml.not_supported."
ENERGY_NOT_SUPPORTED = NOT_SUPPORTED + "nvmlDeviceGetTotalEnergyConsumption"
CHECKS: dict[str, str] = {
    "trial-ok": "every trial of every bundled suite's gpu-smoke profile finished (status ok)",
    "amp-active": "every AMP mode ran float16/bfloat16 calls of an op on Paddle's default white list for its "
                  "dtype (paddle.amp.amp_lists.white_list(); e.g. conv2d, matmul_v2, linear_v2) or its custom white list",
    "loss-scale": "every fp16 mode with a live GradScaler recorded a loss scale on every step",
    "memory-order": "0 < peak allocated <= peak reserved <= driver-seen (NVML) memory in every trial",
    "nvml-device": "NVML resolved the trial's own GPU (PCI bus id, UUID or MIG) with no NVML errors",
    "step-times": "per-step times add up to 80-100% of the measured window's wall time in every trial (below 80% "
                  "only where the time outside the steps is under 1 ms a step: the loop's bookkeeping; n/a where "
                  "other processes' share of the cores explains the rest)",
    "energy": "NVML energy over the measured window > 0 J in every trial (n/a where NVML answers Not Supported)",
    "data-parallel": "with >= 2 GPUs: a 2-rank trial with per-rank memory measured on two different NVML devices",
    "deadline": "n/a rows only: a suite that was running when the 10 minutes passed (it finished; nothing started later)",
    "emulation-fidelity": "the toy suite's AMP modes trained both ways, real AMP and emulate = true (same seed): loss "
                          "curves, skipped steps and loss scales agree within docs/emulation.md's tolerance",
}
EMULATED = "-emulated"   # the emulated twin of a mode in the fidelity run
FIDELITY_MODES = ('modes=[{name="fp32"}, {name="amp-o1-fp16", level="O1", dtype="float16"}, '
                  '{name="amp-o1-fp16-emulated", level="O1", dtype="float16", emulate=true}, '
                  '{name="amp-o2-bf16", level="O2", dtype="bfloat16"}, '
                  '{name="amp-o2-bf16-emulated", level="O2", dtype="bfloat16", emulate=true}]')
STEP_SUM_RANGE = (0.8, 1.0 + 1e-6)
# Time outside the steps a step may take before a share under 80% fails: the loop's own bookkeeping between
# steps (reading the loss, the step record, the event line) is ~0.3-0.6 ms of Python a step on this project's
# CPUs, so a short step (a fast GPU, the self-test's small MLP) reads under 80% with nothing wrong, while a
# missed device sync leaves the step's device time in that gap (whole milliseconds on the self-test's sizes).
STEP_GAP_ALLOWANCE_S = 1e-3
# the whole self-test's budget on one GPU: a suite (or the data-parallel trial) not started by then reads
# n/a with the reason; one already running finishes (its trials have their own timeouts) and a `deadline` row
# names it with the time the self-test really took
DEADLINE_S = 600.0


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


def machine_facts() -> Machine:
    from ampbench.trackers import cuda, device
    from ampbench.trackers.nvml import Session

    session = Session(cuda_bus_id=cuda.cuda_bus_id(), cuda_uuid=cuda.cuda_uuid()).open()
    session.close()
    cc = cuda.compute_capability()
    return Machine(gpus=cuda.visible_gpu_count(),
                   unsupported={d: device.amp_unsupported_reason(d) for d in ("float16", "bfloat16")},
                   nvml_error=session.error, allocator_reset=cuda.has_allocator_reset(),
                   paddle=cuda.paddle_version(), device_name=cuda.device_name(),
                   compute_capability=list(cc) if cc else None)


def evidence_ops(dtype: str, custom_white: list[str]) -> set[str]:
    """Ops whose low-precision calls prove AMP ran: Paddle's default white list for the dtype (O1's, which
    O2 also runs in low precision), plus the mode's custom white list."""
    from ampbench.trial.precision import default_lists

    return set(default_lists(dtype, "O1")["white"]) | set(custom_white)


# One check's outcome on one trial: ok (None: n/a here, the detail says why) and the detail.
Verdict = tuple[bool | None, str]


def _check_trial(t: Trial, mc: Machine | None = None) -> list[CheckResult]:
    """Every check that applies to one trial (`mc` None: a machine that supports everything), in CHECKS' order.
    A check that does not apply to this trial at all (amp-active on fp32) gives no row, unlike one that
    applies but cannot be measured on this machine (n/a, with the reason)."""
    mc = mc or Machine(gpus=1, unsupported={})
    verdicts: list[tuple[str, Verdict | None]] = [
        ("trial-ok", _trial_ok(t)),
        ("amp-active", _amp_active(t, mc)),
        ("loss-scale", _loss_scale(t)),
        ("memory-order", _memory_order(t, mc)),
        ("nvml-device", _nvml_device(t, mc)),
        ("step-times", _step_times(t)),
        ("energy", _energy(t, mc)),
    ]
    subj = f"{t.suite}/{t.mode}"
    return [CheckResult(name, subj, *v) for name, v in verdicts if v is not None]


def _trial_ok(t: Trial) -> Verdict:
    """The trial finished; a failed one shows the start of its error, which is what the reader needs first."""
    return t.status == "ok", t.status if t.status == "ok" else f"{t.status}: {(t.error or '')[:200]}"


def _amp_active(t: Trial, mc: Machine) -> Verdict | None:
    """An AMP mode ran low-precision calls of its evidence ops (None: an fp32 mode, nothing to prove).
    Where Paddle turns the dtype off on this GPU the check is n/a, and low-precision calls there would be
    the defect: Paddle said it would not run them."""
    if not t.amp.requested:
        return None
    low = _low_precision_calls(t)
    unsupported = mc.unsupported.get(t.amp.dtype, "")
    if unsupported and low:
        return False, f"{unsupported}, yet {t.amp.dtype} calls {low}"
    if unsupported:
        return None, f"n/a: {unsupported}"
    return t.amp.active and sum(low.values()) > 0, f"{t.amp.dtype} calls {low or 'none'}"


def _low_precision_calls(t: Trial) -> dict[str, int]:
    """The trial's calls in its AMP dtype of the ops that prove AMP ran (eager or PIR `pd_op.*` names),
    ops with no such call left out."""
    ops = evidence_ops(t.amp.dtype, t.amp.white_list)
    return {op: c.get(t.amp.dtype, 0) for op, c in t.amp.op_calls.items()
            if on_list(op, ops) and c.get(t.amp.dtype, 0)}


def _loss_scale(t: Trial) -> Verdict | None:
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


def _step_times(t: Trial) -> Verdict:
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


def _energy(t: Trial, mc: Machine) -> Verdict:
    """The energy check: n/a without NVML or where NVML says the device does not offer it."""
    m = t.memory
    if mc.nvml_error:
        return None, f"n/a: {mc.nvml_error}"
    if ENERGY_NOT_SUPPORTED in m.errors and m.energy_j is None:
        return None, f"n/a: {m.errors[ENERGY_NOT_SUPPORTED]}"
    return (m.energy_j or 0) > 0, f"{m.energy_j} J, {m.energy_j_per_sample} J/sample"


def _nvml_note(key: str) -> bool:
    """An NVML entry of Memory.errors that says "not measured here", not "measured wrong"."""
    return key in NVML_NOTES or key.startswith(NOT_SUPPORTED)


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


def _check_data_parallel(t: Trial) -> list[CheckResult]:
    ranks = t.memory.per_rank
    devices = {(r.get("nvml_device") or {}).get("pci_bus_id") or (r.get("nvml_device") or {}).get("uuid")
               for r in ranks}
    measured = all((r.get("device_used_bytes") or 0) > 0 and (r.get("peak_allocated_bytes") or 0) > 0 for r in ranks)
    ok = t.status == "ok" and len(ranks) == 2 and measured and len(devices - {None}) == 2
    return [CheckResult("data-parallel", f"{t.suite}/{t.mode} x2", ok,
                        f"status {t.status}; per-rank devices {sorted(d for d in devices if d)}; memory measured {measured}")]


def describe_checks(console: Console) -> None:
    console.print(Text(f"ampbench selftest runs the '{PROFILE}' profile of every bundled suite on a GPU and checks:"))
    for name, text in CHECKS.items():
        console.print(Text(f"  {name:14} {text}"))


def _run_suite(name: str, runs: Path, extra: list[str] | None = None, modes: list[str] | None = None,
               tag: str = "") -> list[Trial]:
    from ampbench.commands.run import RunOptions, execute
    from ampbench.results.run_dir import open_run

    run_id = f"selftest-{name}{tag}-{new_run_id()}"   # time, pid and random bits: two selftests never collide
    quiet = Console(quiet=True)
    execute(RunOptions(suite_file=Path(name), profile=PROFILE, out_dir=runs, report=False, run_id=run_id,
                       overrides=list(extra or []), modes=list(modes or [])), console=quiet)
    folders = sorted(runs.glob(f"*/{run_id}"))   # <suite name>/<run id>
    if not folders:
        raise RuntimeError(f"selftest: suite {name} left no run folder under {runs}")
    return open_run(folders[0]).trials


def run_selftest(out_dir: Path, console: Console, suites: list[str] | None = None) -> int:
    """0 all checks hold, 1 one failed, 3 no GPU or no Paddle here (nothing run)."""
    from ampbench.trackers.cuda import has_gpu, has_gpu_cheap, paddle_missing

    missing = paddle_missing() if has_gpu_cheap() else ""
    if missing:
        return _without_paddle(missing, console)
    if not has_gpu_cheap() or not has_gpu():
        console.print(Text("no GPU found: ampbench selftest proves GPU-side measurements and ran nothing (exit 3)."))
        describe_checks(console)
        return 3
    from ampbench.config.bundled import bundled_suites

    t0 = time.monotonic()
    mc = machine_facts()
    results: list[CheckResult] = []
    rows: list[dict[str, Any]] = []
    runs = out_dir / "runs"
    for name in sorted(suites or bundled_suites()):
        if _past_deadline(t0, name, results):
            continue
        started = time.monotonic()
        try:
            trials = _run_suite(name, runs)
        except Exception as exc:  # noqa: BLE001  a suite that cannot run here (missing extra, bad data) fails its check
            results.append(CheckResult("trial-ok", name, False, f"{type(exc).__name__}: {exc}"[:300]))
            continue
        finally:
            _ran_past_deadline(t0, started, name, results)
        for t in trials:
            results += _check_trial(t, mc)
            rows.append(figures(t))
    if mc.gpus < 2:   # Paddle's count of usable GPUs, not NVML's (which ignores CUDA_VISIBLE_DEVICES and MIG)
        results.append(CheckResult("data-parallel", "-", None, f"n/a: {mc.gpus} GPU visible to Paddle, needs two"))
    elif not _past_deadline(t0, "resnet x2", results, check="data-parallel"):
        started = time.monotonic()
        for t in _run_suite("resnet", runs, ["distributed.nproc_per_node=2"], ["fp32"], tag="-dp"):
            results += _check_data_parallel(t)
        _ran_past_deadline(t0, started, "resnet x2", results)
    if not _past_deadline(t0, "toy emulated", results, check="emulation-fidelity"):
        results += fidelity_checks(_run_suite("toy", runs, [FIDELITY_MODES], tag="-fidelity"), mc)
    if not rows and any(r.check == "trial-ok" and r.ok is None for r in results):
        _report(results, out_dir, console, time.monotonic() - t0, mc, rows)
        return 3   # the deadline left nothing run: nothing was proven
    return _report(results, out_dir, console, time.monotonic() - t0, mc, rows)


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
            out.append(CheckResult("emulation-fidelity", subject, None, f"n/a: {why}"))
        elif real.status != "ok" or emu.status != "ok" or not real.amp.active or not emu.amp.emulated:
            out.append(CheckResult("emulation-fidelity", subject, False,
                                   f"real {real.status} (AMP active {real.amp.active}), emulated {emu.status} "
                                   f"(emulated {emu.amp.emulated})"))
        else:
            fid = compare(real, emu)
            out.append(CheckResult("emulation-fidelity", subject, fid.ok, fid.detail()))
    return out


def _past_deadline(t0: float, subject: str, results: list[CheckResult], check: str = "trial-ok") -> bool:
    """Past DEADLINE_S: `subject` is not started and reads n/a with the reason."""
    spent = time.monotonic() - t0
    if spent <= DEADLINE_S:
        return False
    results.append(CheckResult(check, subject, None, f"n/a: not run, selftest's {DEADLINE_S / 60:.0f}-minute "
                                                     f"deadline passed ({spent:.0f} s spent)"))
    return True


def _ran_past_deadline(t0: float, started: float, subject: str, results: list[CheckResult]) -> None:
    """A suite started before DEADLINE_S and still running at it finished past it (a started suite is not stopped):
    said in a `deadline` row (n/a), with the time the self-test took, so "10 minutes" is never claimed silently."""
    spent = time.monotonic() - t0
    if started - t0 <= DEADLINE_S < spent:
        results.append(CheckResult("deadline", subject, None, f"n/a: {subject} was running when selftest's "
                                   f"{DEADLINE_S / 60:.0f}-minute deadline passed and finished at {spent / 60:.1f} min "
                                   "(a started suite is not stopped; each trial is bounded by its timeout_s)"))


def _without_paddle(why: str, console: Console) -> int:
    """A GPU machine whose interpreter has no Paddle: one line, what needs no Paddle (trackers/driver_facts.py:
    the driver, NVML's listing, the device, MIG, the energy counter), the checks it would run; exit 3."""
    from ampbench.trackers.driver_facts import driver_facts

    console.print(Text(f"paddle is not installed in this interpreter: {why}; install paddlepaddle-gpu (docs/gpu.md), "
                       "selftest ran nothing (exit 3)."))
    try:
        facts = driver_facts()
    except Exception as exc:  # noqa: BLE001  # a driver that cannot answer is said, never a traceback
        console.print(Text(f"FAIL nvml {type(exc).__name__}: {exc}"[:300]))
        facts = []
    for f in facts:
        console.print(Text(f"{'n/a ' if f.ok is None else ('ok  ' if f.ok else 'FAIL')} {f.name:12} {f.detail}"))
    describe_checks(console)
    return 3


def _report(results: list[CheckResult], out_dir: Path, console: Console, wall_s: float,
            mc: Machine | None = None, rows: list[dict[str, Any]] | None = None) -> int:
    table = Table(title=f"ampbench selftest ({wall_s / 60:.1f} min)", box=table_box(console))
    for col in ("check", "trial", "result", "detail"):
        table.add_column(col)
    for r in results:
        mark = "n/a" if r.ok is None else ("ok" if r.ok else "FAIL")
        table.add_row(Text(r.check), Text(r.subject), Text(mark, style="green" if r.ok else "red"), Text(r.detail))
    console.print(table)
    failed = [r for r in results if r.ok is False]
    doc: dict[str, Any] = {"schema": "ampbench.selftest/2", "passed": not failed, "wall_s": wall_s,
                           "machine": asdict(mc) if mc else None, "checks": CHECKS,
                           "results": [asdict(r) for r in results], "figures": list(rows or [])}
    atomic_write_json(out_dir / "selftest.json", doc)
    console.print(Text(f"selftest: {'all checks hold' if not failed else f'{len(failed)} check(s) failed'}; "
                       f"{out_dir / 'selftest.json'}"))
    return 0 if not failed else 1
