"""One assembler for a trial's record, fed by the built-in loop and by the program hook alike.

Both producers of a trial, the built-in step loop (trial/loop.py, trial/setup.py, trial/finish.py) and a
user's program under the start-up hook (trial/command.py, trial/command_finish.py), send the same typed
inputs here, and this is the one place each part of the record is filled:

- `feed(step)`: each finished optimizer step's `StepRecord` (the built-in loop's step log, or a hook
  `wire.StepEvent` turned into one by `step_from_wire`), with the steps' counts (skipped, non-finite);
- `env(Env)` and `env_from(events)`: the machine's facts, then those a program's hook reported (the wire
  fields declared `into="env.*"`);
- `memory(Memory)`: the measured window's memory, every rank's merged by the one rule (`merge_ranks`: the
  maxima, energy summed once per GPU, each rank in `per_rank`; the built-in loop's ranks and a program's processes alike),
  and `memory_update(fields)` for figures measured over the whole trial (a command trial's NVML window); a
  hook's memory event becomes a rank's `Memory` through its `into="memory.*"` fields (`memory_from_wire`),
  checked against the model;
- `amp(AmpInfo)` (the settings) and `amp_evidence(...)`: the op dtype evidence, active or not and why;
  `emulation(record)`: an emulated mode's record (trial/emulate), emulated and not active;
- `interference(fields)`: evidence of a disturbed measurement, merged in;
- `outcome(status, error, log_tail)`: the status;
- `finish()`: every field derived from the steps and the measured figures, the throughput summary
  (`throughput`) and the energy per sample.

A part filled anywhere else would be filled twice (tests/test_one_measurement.py fails on an assignment of
one in trial/); the two producers once disagreed on energy per sample.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from pydantic import BaseModel, ValidationError

from ampbench.record import wire
from ampbench.record.models import (
    AmpInfo,
    Emulation,
    Env,
    InactiveCode,
    Interference,
    Memory,
    Status,
    StepRecord,
    Throughput,
    Trial,
)
from ampbench.record.rates import rates_from, trial_rate

M = TypeVar("M", bound=BaseModel)


def throughput(steps: list[StepRecord], counts: dict[str, int] | None = None,
               window_s: float | None = None) -> Throughput:
    """Samples/s over the measured (non-warm-up) steps; `counts` adds e.g. tokens/s.

    Computed from the stored per-step records (never from running averages), over the measured
    window only: the median per-step rate, the trial figure judge/measure.py defines for every surface."""
    measured = [s for s in steps if not s.warmup]
    if not measured:
        return Throughput(window_s=window_s)
    times = np.array([s.time_s for s in measured], dtype=float)
    total = float(times.sum())
    extra = {k: v / total for k, v in (counts or {}).items()} if total > 0 else {}
    rate = trial_rate(rates_from(list(times), [s.samples for s in measured]))
    return Throughput(
        samples_per_s=rate or 0.0,  # the median per-step rate: judge/measure.py's trial figure
        step_time_median_s=float(np.median(times)),
        step_time_p90_s=float(np.percentile(times, 90)),
        measured_steps=len(measured),
        extra_per_s=extra,
        window_s=window_s,
    )


def energy_per_sample(trial: Trial) -> float | None:
    """Joules per measured sample: the window's energy (NVML; summed over ranks) over the samples the
    measured steps recorded; None when either is missing."""
    samples = trial.measured_samples()
    energy = trial.memory.energy_j
    return energy / samples if energy is not None and samples else None


def step_from_wire(ev: wire.StepEvent, samples: int, warmup_steps: int, cpu_s: float | None = None) -> StepRecord:
    """A hook's step event as the trial's step: `samples` of one optimizer step over every rank; a loss
    the hook did not read (`loss_seen` false) means nothing, a non-finite one is None; `cpu_s`: its CPU
    seconds (cpu_seconds)."""
    return StepRecord(step=ev.step, loss=ev.loss, loss_seen=ev.loss_seen is not False, time_s=max(0.0, ev.t),
                      loss_scale=ev.scale, found_inf=bool(ev.found_inf), samples=samples,
                      warmup=ev.step <= warmup_steps, cpu_s=cpu_s)


def cpu_seconds(events: Iterable[wire.StepEvent]) -> dict[int, float]:
    """Each step's CPU seconds: the difference of the hook's process CPU clock between consecutive step ends (the
    built-in loop's `cpu_s`, the process's CPU over the step).  A step whose evaluation or checkpoint save was left
    out of its time has none (its CPU would count what its wall time does not), nor has the first."""
    out: dict[int, float] = {}
    prev: float | None = None
    for ev in events:
        if ev.cpu is not None and prev is not None and not ev.eval_s:
            out[ev.step] = max(0.0, ev.cpu - prev)
        prev = ev.cpu
    return out


def typed(model: type[M], values: dict[str, Any]) -> M:
    """`values` as `model`, a value its field does not accept left out (the field keeps its default): what a
    program's hook reported is checked against the record's own types, and never costs the record."""
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        bad = {str(e["loc"][0]) for e in exc.errors() if e["loc"]}
        return model.model_validate({k: v for k, v in values.items() if k not in bad})


def _into(events: Iterable[wire.WireEvent], part: str) -> dict[str, Any]:
    """The record fields of `part` ("env", "memory") the events fill, later events over earlier ones."""
    out: dict[str, Any] = {}
    for ev in events:
        out.update({k.split(".", 1)[1]: v for k, v in wire.filled(ev).items() if k.split(".", 1)[0] == part})
    return out


def memory_from_wire(ev: wire.MemoryEvent) -> Memory:
    """One process's memory event as its `Memory` (the fields declared `into="memory.*"`)."""
    return typed(Memory, _into([ev], "memory"))


# A rank's figures merged over ranks as their maximum: every int figure of Memory (a new one too)
MAX_FIELDS = tuple(k for k, f in Memory.model_fields.items() if f.annotation == (int | None))
PER_RANK = ("source", *MAX_FIELDS, "device_used_source", "energy_j", "nvml_device")


@dataclass(frozen=True)
class RankMemory:
    """One rank's (one process's) memory of the measured window, and which rank it is."""

    rank: int
    memory: Memory
    pid: int | None = None


MIG_ENERGY_NOTE = ("MIG: NVML's energy counter is the whole GPU's (every MIG instance on it, other tenants' work "
                   "included), counted once per GPU")


def energy_once_per_gpu(readings: Sequence[tuple[dict[str, Any] | None, float | None]]) -> tuple[float | None, bool]:
    """Joules of several windows (each with its device's `nvml_device`, trackers.nvml's `NvmlDevice.describe()`),
    each physical GPU counted once (issue 58.6): the counter (nvmlDeviceGetTotalEnergyConsumption) is read from the
    parent GPU, so two MIG instances of one GPU, or two processes on one GPU, read the same joules. Keyed by the
    GPU's PCI bus id (a MIG instance's is its parent's); one GPU's readings give their largest; a reading without
    a device is its own GPU. None when a GPU has no reading; the flag says whether a MIG instance was among them
    (the figure is then the whole GPU's)."""
    per_gpu: dict[str, list[float]] = {}
    mig = False
    for i, (dev, joules) in enumerate(readings):
        dev = dev or {}
        key = str(dev.get("pci_bus_id") or dev.get("uuid") or f"#{i}")
        mig = mig or bool(dev.get("mig"))
        per_gpu.setdefault(key, [])
        if joules is not None:
            per_gpu[key].append(float(joules))
    if not per_gpu or any(not v for v in per_gpu.values()):
        return None, mig
    return float(sum(max(v) for v in per_gpu.values())), mig


def merge_ranks(mem: Memory, ranks: Sequence[RankMemory]) -> None:
    """Every rank's figures into `mem`: each int figure the max over the ranks that measured it (None when
    none did), energy summed over the ranks' GPUs when every GPU was measured, each GPU once
    (`energy_once_per_gpu`: two ranks on two MIG instances of one GPU read one counter), the source "cuda" when
    any rank's is (then "host"), and with more than one rank each rank's figures in `per_rank`."""
    for key in MAX_FIELDS:
        vals = [int(v) for r in ranks if (v := getattr(r.memory, key)) is not None]
        setattr(mem, key, max(vals) if vals else None)
    mem.energy_j, mig = energy_once_per_gpu([(r.memory.nvml_device, r.memory.energy_j) for r in ranks])
    if mig and mem.energy_j is not None:
        mem.notes = {**mem.notes, "energy_j": MIG_ENERGY_NOTE}
    sources = {r.memory.source for r in ranks}
    mem.source = "cuda" if "cuda" in sources else "host" if "host" in sources else mem.source
    mem.per_rank = [{"rank": r.rank, **({"pid": r.pid} if r.pid is not None else {}),
                     **{k: getattr(r.memory, k) for k in PER_RANK}} for r in ranks] if len(ranks) > 1 else []


class TrialAssembler:
    """The record of one trial as its producer builds it: each part filled here, derived fields at `finish`."""

    def __init__(self, trial: Trial) -> None:
        self.trial = trial

    def feed(self, step: StepRecord) -> None:
        """One finished optimizer step, in step order: a skipped one (found_inf) and a non-finite loss (one
        the producer read) are counted."""
        t = self.trial
        t.steps.append(step)
        t.skipped_steps += step.found_inf
        t.nonfinite_losses += step.loss is None and step.loss_seen

    def feed_all(self, steps: Iterable[StepRecord]) -> None:
        for step in steps:
            self.feed(step)

    def env(self, env: Env) -> None:
        """The machine's facts, as the worker collected them."""
        self.trial.env = env

    def env_from(self, events: Iterable[wire.WireEvent]) -> None:
        """The facts a program's hook reported (its own Paddle, Python and device: the worker's environment
        is not the program's); a fact the hook could not read keeps the worker's."""
        facts = {k: v for k, v in _into(events, "env").items() if isinstance(v, str) and v}
        self.trial.env = typed(Env, {**self.trial.env.model_dump(), **facts})

    def memory(self, memory: Memory) -> None:
        """The measured window's memory of a single process."""
        self.trial.memory = memory

    def memory_update(self, fields: dict[str, Any]) -> None:
        """Figures measured over the whole trial (a command trial's NVML window); `errors` and `notes` are
        merged in."""
        mem = self.trial.memory
        for key, value in fields.items():
            setattr(mem, key, {**getattr(mem, key), **value} if key in ("errors", "notes") else value)

    def amp(self, amp: AmpInfo) -> None:
        """The AMP settings the trial ran with (the evidence follows with `amp_evidence`)."""
        self.trial.amp = amp

    def amp_evidence(self, calls: dict[str, dict[str, int]], apart: dict[str, dict[str, int]], low: int,
                     evidence: str, why_inactive: Callable[[], tuple[InactiveCode, str]]) -> None:
        """The op dtype evidence: op calls by dtype (the optimizer step's `apart`), `low` of them in low
        precision; AMP requested is active only where one ran, and otherwise says why (`why_inactive`)."""
        amp = self.trial.amp
        amp.op_calls, amp.optimizer_op_calls = calls, apart
        amp.active = bool(amp.requested and low > 0)
        amp.evidence = evidence
        if amp.requested and not amp.active:
            amp.inactive_code, amp.inactive_reason = why_inactive()

    def emulation(self, record: dict[str, Any]) -> None:
        """A mode's emulate = true: the emulator's record (trial/emulate, `Emulator.record()`); AMP stays not
        `active` (no low-precision kernel ran), it is `emulated`, and the evidence line says what was."""
        amp = self.trial.amp
        amp.emulated, amp.emulation = True, Emulation.model_validate(record)
        amp.inactive_code, amp.inactive_reason = "", ""
        amp.evidence = f"emulated {amp.dtype} {amp.level}: " + emulated_evidence(amp.emulation)

    def interference(self, fields: dict[str, Any]) -> None:
        """Evidence of a disturbed measurement (CPU share, other processes, NVML, where it ran), merged in."""
        current = self.trial.interference.model_dump() if self.trial.interference is not None else {}
        self.trial.interference = Interference.model_validate({**current, **fields})

    def outcome(self, status: Status, error: str | None = None, log_tail: str | None = None) -> None:
        """How the trial ended, and why when not ok (with the log's last lines when the producer has them)."""
        self.trial.status, self.trial.error = status, error
        if log_tail is not None:
            self.trial.log_tail = log_tail

    def finish(self, counts: dict[str, int] | None = None, window_s: float | None = None) -> Trial:
        """Set the derived fields, after every measured figure (memory, energy, every rank's) is in.
        `counts`: extra units over the measured steps (tokens); `window_s`: the measured window's wall time."""
        t = self.trial
        t.throughput = throughput(t.steps, counts, window_s=window_s)
        per_sample = energy_per_sample(t)
        if per_sample is not None:
            t.memory.energy_j_per_sample = per_sample
        return t


def emulated_evidence(e: Emulation) -> str:
    """`412 of 530 op calls under auto_cast in the low dtype over 60 step(s); lost values: 3 overflow` (an
    emulated trial's evidence line)."""
    low = sum(c.get("low", 0) for c in e.op_calls.values())
    total = low + sum(c.get("float32", 0) for c in e.op_calls.values())
    lost = ", ".join(f"{e.totals[k]} {k.replace('_', ' ')}" for k in ("overflow", "underflow", "grad_overflow",
                                                                   "grad_underflow", "lost_updates")
                     if e.totals.get(k))
    return (f"{low} of {total} op calls under auto_cast in the low dtype over {e.steps} step(s)"
            + (f"; lost values: {lost}" if lost else "; no value lost"))
