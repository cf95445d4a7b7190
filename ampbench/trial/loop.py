"""The step loop: timed steps, per-step records and events, evaluations, the measured window.

Timing policy (trackers/clock.py): a step is timed from before its first batch is fetched to the
end of its optimizer update on the device, the same for every mode and scaler. Only the step's
own work is inside the clock; its record and event are written after it stops. The loop keeps
per-step Python work small: on a ~0.5 ms toy step every microsecond shows.

No host read inside a step: the loss tensors and the scaler's scale/found-inf tensors are kept
as device values and read (`.item()`) after the clock stopped (`read_step`), so the device never
idles between backward and the optimizer update while the host waits for a number (paddleformers
keeps the loss on the device; PaddleOCR reads its stats after the update). On a GPU the clock's
stop synchronises the device anyway, so the reads after it are cheap. Data-parallel ranks
average the loss (one all-reduce) after the clock too.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field
from typing import Any

from ampbench.record.models import Memory, StepRecord
from ampbench.trackers.opstats import OpsApart
from ampbench.trial.context import TrialContext
from ampbench.trial.evaluation import evaluate
from ampbench.trial.setup import Parts

NAN = float("nan")
LOG_EVERY_S = 0.25
NO_CONTEXT = contextlib.nullcontext()  # reusable


@dataclass
class LoopResult:
    """What the loop hands to the finish."""

    counts_total: dict[str, int] = field(default_factory=dict)
    op_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    ops_apart: OpsApart = field(default_factory=OpsApart)   # the optimizer step's ops, apart from op_counts
    train_wall: float = 0.0
    window_s: float | None = None
    memory: Memory = field(default_factory=Memory)
    nvml_window: dict[str, Any] = field(default_factory=dict)
    consecutive_bad: int = 0
    window_t0: float | None = None
    window_end: float | None = None
    eval_s: float = 0.0
    load_mark: Any = None            # trackers.load.LoadMark at the window's start
    placement: dict[str, Any] = field(default_factory=dict)  # trackers.placement.sample at the window's start
    others_cpu: float | None = None  # cores other processes used over the window


def run_steps(tr: TrialContext, p: Parts) -> LoopResult:
    from ampbench.trackers import device, load, placement, shapes
    from ampbench.trackers.clock import StepClock
    from ampbench.trackers.memory import MemoryTracker, rss_peak_bytes
    from ampbench.trial.faults import Fault
    from ampbench.trial.precision import collect_op_dtypes
    from ampbench.trial.replicas import fault_applies

    # Every step is sent at once where a rank can be killed from outside (data parallel: the launcher
    # ends rank 0 when another rank dies) and when a test injects a fault on some rank.
    every = 0.0 if p.replicas.world > 1 or tr.spec.fault is not None else LOG_EVERY_S
    train, res, log = tr.suite.train, LoopResult(), StepLog(tr, every)
    clock, mem = StepClock(device.synchronizer(p.gpu)), MemoryTracker(gpu=p.gpu)
    fault = Fault(tr.spec.fault if fault_applies() else None, tr.spec.fault_step)
    try:
        with contextlib.ExitStack() as stats:
            res.op_counts = stats.enter_context(collect_op_dtypes(res.ops_apart))
            tr.events.emit(event="start", total=tr.steps_total)
            for step in range(1, tr.steps_total + 1):
                warm = step <= train.warmup_steps
                if step == train.warmup_steps + 1:
                    mem.start()  # opens the window: on a GPU, a device sync and the allocator's peak reset
                    res.window_t0 = time.perf_counter()
                    res.load_mark = load.mark()  # other processes' CPU use over the window (interference)
                    res.placement = placement.sample()  # where it ran (affinity, CPUs, NUMA node)
                if fault.kind is not None:
                    fault.maybe(step)
                p.numerics.begin(step)
                clock.start()
                raw = one_step(tr, p, fault, step, res.ops_apart)
                dt = clock.stop()
                if not warm:
                    res.window_end = time.perf_counter()
                p.numerics.end(step)
                out = read_step(p, raw)
                if step == 1:
                    p.amp.scaler_enabled = p.prec.refresh()  # Paddle may turn the scaler off at step 1
                    tr.trial.shape_audit = shapes.audit(p.model, tr.batch)  # the model as it trained
                res.train_wall += dt
                if step == train.op_stats_steps():   # the op-stats window ends inside warm-up
                    stats.close()
                if record_step(tr, res, log, step, warm, out, dt, clock.cpu_s, raw[4]):
                    break
                if train.eval_every and step % train.eval_every == 0 and step < tr.steps_total:
                    log.flush()
                    _timed_eval(tr, p, res, step, warm, mem)
    finally:
        log.flush()  # also when a step raised: the trial file keeps the steps done
    res.memory = mem.stop() if res.window_t0 is not None else Memory(rss_peak_bytes=rss_peak_bytes())
    res.nvml_window = mem.window
    res.others_cpu = load.others_cpu(res.load_mark)
    if res.window_t0 is not None and res.window_end is not None:
        res.window_s = res.window_end - res.window_t0 - res.eval_s
    return res


def one_step(tr: TrialContext, p: Parts, fault: Any, step: int,
             apart: OpsApart | None = None) -> tuple[Any, int, dict[str, int], Any, float]:
    """Forward/backward of every micro-batch, gradient sync, optimizer (and scheduler) step.

    Returns device values (the micro-batch losses, the scaler's handle): nothing is read to the host;
    and the seconds spent getting the batches (the data wait: a loader-bound step shows it, Paddle #42436)."""
    losses: list[Any] = []
    samples = 0
    counts: dict[str, int] = {}
    accum, rep, prec = tr.accum, p.replicas, p.prec
    dp = rep.world > 1
    poison = fault.kind is not None and fault.poison(step)
    wait = 0.0
    for micro in range(accum):
        t0 = time.perf_counter()
        batch = next(p.batches)
        wait += time.perf_counter() - t0
        with prec.autocast(), (rep.micro_batch(p.model, micro, accum) if dp else NO_CONTEXT):
            loss = p.wl.loss(p.model, batch)
        if poison:
            loss = loss * NAN
        if accum > 1:
            loss = loss / accum
        prec.backward(loss)
        losses.append(loss)
        samples += batch.samples
        if batch.counts:
            for k, v in batch.counts.items():
                counts[k] = counts.get(k, 0) + v
    if dp:
        rep.sync_grads()
    with apart.around() if apart is not None else NO_CONTEXT:
        handle = prec.step(p.optimizer)
    if p.sched is not None:
        p.sched.step()
    return losses, samples, counts, handle, wait


def read_step(p: Parts, raw: tuple[Any, int, dict[str, int], Any, float]) -> tuple[float, int, dict[str, int], Any]:
    """The step's numbers on the host, after its clock stopped: loss sum, samples, counts, scaler outcome."""
    losses, samples, counts, handle, _ = raw
    loss_sum = 0.0
    for loss in losses:
        loss_sum += float(loss.item())
    if p.replicas.world > 1:
        loss_sum, samples, counts = p.replicas.reduce_step(loss_sum, samples, counts)
    return loss_sum, samples, counts, p.prec.outcome(handle)


class StepLog:
    """Per-step results kept as plain tuples; StepRecords and the runner's step events are built in
    batches, at most every LOG_EVERY_S seconds, at the end and when the loop raises.

    Building a pydantic record, encoding JSON and writing a pipe after every ~0.5 ms step slowed
    the *next* step by 5-10% (caches; the runner waking on a shared core). A hard crash (segfault) of
    a single-process trial can lose the last quarter second of step events: the trial still records
    the crash with the steps the runner had received. Data-parallel trials send every step.
    """

    def __init__(self, tr: TrialContext, every_s: float = LOG_EVERY_S) -> None:
        self.tr, self.every_s = tr, every_s
        self.raw: list[tuple[Any, ...]] = []
        self.last = time.perf_counter()

    def add(self, row: tuple[Any, ...], now: float) -> None:
        self.raw.append(row)
        if now - self.last >= self.every_s:
            self.flush()

    def flush(self) -> None:
        ev = self.tr.events
        for step, loss, dt, scale, found, samples, warm, cpu, data in self.raw:
            finite = math.isfinite(loss)
            rec = StepRecord(step=step, loss=loss if finite else None, time_s=dt, loss_scale=scale, found_inf=found,
                             samples=samples, warmup=warm, cpu_s=cpu, data_s=data)
            self.tr.record.feed(rec)
            ev.queue(event="step", **rec.model_dump(mode="json"), raw_loss=repr(loss))
        self.raw.clear()
        ev.flush()
        self.last = time.perf_counter()


def record_step(tr: TrialContext, res: LoopResult, log: StepLog, step: int, warm: bool, out: tuple[Any, ...],
                dt: float, cpu_s: float, data_s: float) -> bool:
    """Keep the step; True when the trial diverged and must stop."""
    loss_sum, samples, counts, outcome = out
    log.add((step, loss_sum, dt, outcome.loss_scale, outcome.found_inf, samples, warm, cpu_s, data_s),
            time.perf_counter())
    if counts and not warm:
        for k, v in counts.items():
            res.counts_total[k] = res.counts_total.get(k, 0) + v
    if math.isfinite(loss_sum):   # the step's counts (skipped, non-finite) are the assembler's, as it is fed
        res.consecutive_bad = 0
        return False
    res.consecutive_bad += 1
    if res.consecutive_bad >= tr.suite.train.diverge_after:
        tr.record.outcome("diverged", f"loss was not finite for {res.consecutive_bad} consecutive steps "
                                      f"(up to step {step})")
        return True
    return False


def _timed_eval(tr: TrialContext, p: Parts, res: LoopResult, step: int, warm: bool, mem: Any = None) -> None:
    """A mid-run evaluation: its time, allocator peak, NVML samples and energy stay out of the window."""
    window = not warm and mem is not None and res.window_t0 is not None
    if window:
        mem.pause()
    t0 = time.perf_counter()
    evaluate(tr, p, step, res.train_wall)
    if not warm:
        res.eval_s += time.perf_counter() - t0
    if window:
        mem.resume()
