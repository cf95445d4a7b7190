"""The step loop: timed steps, per-step records and events, evaluations, the measured window.

Timing policy (trackers/clock.py): a step is timed from before its first batch is fetched to the
end of its optimizer update on the device, the same for every mode and scaler. Only the step's
own work is inside the clock; its record and event are written after it stops. The loop keeps
per-step Python work small: on a ~0.5 ms toy step every microsecond shows.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field
from typing import Any

from ampbench.results import Memory, StepRecord
from ampbench.trial.context import TrialContext
from ampbench.trial.evaluation import evaluate
from ampbench.trial.setup import Parts

NAN = float("nan")


@dataclass
class LoopResult:
    """What the loop hands to the finish."""

    counts_total: dict[str, int] = field(default_factory=dict)
    op_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    train_wall: float = 0.0
    window_s: float | None = None
    memory: Memory = field(default_factory=Memory)
    nvml_window: dict[str, Any] = field(default_factory=dict)
    consecutive_bad: int = 0
    window_t0: float | None = None
    window_end: float | None = None
    eval_s: float = 0.0


def run_steps(tr: TrialContext, p: Parts) -> LoopResult:
    from ampbench.trackers import device
    from ampbench.trackers.clock import StepClock
    from ampbench.trackers.memory import MemoryTracker, rss_peak_bytes
    from ampbench.trial.faults import Fault
    from ampbench.trial.precision import collect_op_dtypes
    from ampbench.trial.replicas import fault_applies

    train, res = tr.suite.train, LoopResult()
    clock, mem = StepClock(device.synchronizer(p.gpu)), MemoryTracker(gpu=p.gpu)
    fault = Fault(tr.spec.fault if fault_applies() else None, tr.spec.fault_step)
    with contextlib.ExitStack() as stats:
        res.op_counts = stats.enter_context(collect_op_dtypes())
        tr.events.emit(event="start", total=tr.steps_total)
        for step in range(1, tr.steps_total + 1):
            warm = step <= train.warmup_steps
            if step == train.warmup_steps + 1:
                mem.start()  # opens the window: on a GPU, a device sync and the allocator's peak reset
                res.window_t0 = time.perf_counter()
            fault.maybe(step)
            p.numerics.begin(step)
            clock.start()
            loss_sum, samples, counts, outcome = one_step(tr, p, fault, step)
            dt = clock.stop()
            if not warm:
                res.window_end = time.perf_counter()
            p.numerics.end(step)
            res.train_wall += dt
            if step == train.amp_stats_steps:
                stats.close()
            if record_step(tr, res, step, warm, loss_sum, samples, counts, outcome, dt, clock.cpu_s):
                break
            if train.eval_every and step % train.eval_every == 0 and step < tr.steps_total:
                _timed_eval(tr, p, res, step, warm)
    res.memory = mem.stop() if res.window_t0 is not None else Memory(rss_peak_bytes=rss_peak_bytes())
    res.nvml_window = mem.window
    if res.window_t0 is not None and res.window_end is not None:
        res.window_s = res.window_end - res.window_t0 - res.eval_s
    return res


def one_step(tr: TrialContext, p: Parts, fault: Any, step: int) -> tuple[float, int, dict[str, int], Any]:
    """Forward/backward of every micro-batch, gradient sync, optimizer (and scheduler) step."""
    loss_sum, samples, counts = 0.0, 0, {}
    accum, rep = tr.accum, p.replicas
    for micro in range(accum):
        batch = next(p.batches)
        with p.prec.autocast(), (rep.micro_batch(p.model, micro, accum) if rep.active else contextlib.nullcontext()):
            loss = p.wl.loss(p.model, batch)
        if fault.poison(step):
            loss = loss * NAN
        if accum > 1:
            loss = loss / accum
        p.prec.backward(loss)
        loss_sum += float(loss.item())
        samples += batch.samples
        for k, v in batch.counts.items():
            counts[k] = counts.get(k, 0) + v
    if rep.active:
        rep.sync_grads()
        loss_sum, samples, counts = rep.reduce_step(loss_sum, samples, counts)
    outcome = p.prec.step(p.optimizer)
    if p.sched is not None:
        p.sched.step()
    return loss_sum, samples, counts, outcome


def record_step(tr: TrialContext, res: LoopResult, step: int, warm: bool, loss_sum: float, samples: int,
                counts: dict[str, int], outcome: Any, dt: float, cpu_s: float | None = None) -> bool:
    """Store the step, tell the runner; True when the trial diverged and must stop."""
    finite = math.isfinite(loss_sum)
    rec = StepRecord(step=step, loss=loss_sum if finite else None, time_s=dt, loss_scale=outcome.loss_scale,
                     found_inf=outcome.found_inf, samples=samples, warmup=warm, cpu_s=cpu_s)
    if not warm:
        for k, v in counts.items():
            res.counts_total[k] = res.counts_total.get(k, 0) + v
    t = tr.trial
    t.steps.append(rec)
    t.skipped_steps += int(outcome.found_inf)
    t.nonfinite_losses += int(not finite)
    res.consecutive_bad = 0 if finite else res.consecutive_bad + 1
    tr.events.emit(event="step", **rec.model_dump(mode="json"), raw_loss=repr(loss_sum))
    if res.consecutive_bad >= tr.suite.train.diverge_after:
        t.status = "diverged"
        t.error = f"loss was not finite for {res.consecutive_bad} consecutive steps (up to step {step})"
        return True
    return False


def _timed_eval(tr: TrialContext, p: Parts, res: LoopResult, step: int, warm: bool) -> None:
    t0 = time.perf_counter()
    evaluate(tr, p, step, res.train_wall)
    if not warm:
        res.eval_s += time.perf_counter() - t0
