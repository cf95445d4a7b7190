"""A command trial's record: the start-up hook's events (JSON lines per process, trial/command_channel.py) and the
program's own output turned into the Trial's steps, AMP evidence, memory, metric and status."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ampbench.config.suite import ModeConfig
from ampbench.record import wire, wire_read
from ampbench.record.assemble import RankMemory, TrialAssembler, memory_from_wire, merge_ranks
from ampbench.record.models import AmpInfo, DecorateOrder, InactiveCode, Memory, StepRecord, Trial
from ampbench.record.rates import steps_rate
from ampbench.trackers import shapes
from ampbench.trackers.load import LoadSamples
from ampbench.trackers.memory import EVALS_CACHED_NOTE
from ampbench.trial.command_amp import record_calls, seen_calls
from ampbench.trial.emulate.record import from_event
from ampbench.trial.precision import low_precision_calls, parse_op_stats
from ampbench.workloads.command.presets import LogScan

MAX_DATA_WAITS = 10_000_000   # steps with a data wait one process may report (each line holds at most wire.MAX_ITEMS)



@dataclass
class Proc:
    """What one process of the program reported (a rank under paddle.distributed.launch), as the typed
    events of the wire (record/wire.py), checked once there."""

    pid: int
    start: wire.StartEvent | None = None
    device: wire.DeviceEvent | None = None   # at its first step: the device it trains on
    steps: list[wire.StepEvent] = field(default_factory=list)
    ops: dict[str, str] = field(default_factory=dict)
    optimizer_ops: dict[str, str] = field(default_factory=dict)   # counted inside Optimizer.step (the hook)
    ops_from: int = 1   # the first step of the op window (2: the hook cleared model building and step 1)
    ops_error: str = ""
    memory: wire.MemoryEvent | None = None
    end: wire.EndEvent | None = None
    errors: list[str] = field(default_factory=list)
    data_waits: dict[int, float] = field(default_factory=dict)   # step -> its wait for the DataLoader
    shapes: wire.ShapesEvent | None = None   # the hook's Linear/conv layers at step 1 (issue 35)
    shapes_error: str = ""   # why the hook could not list them (a model nested past the recursion limit)
    amp_order: list[wire.AmpOrderEvent] = field(default_factory=list)   # decorate / DataParallel calls, in order
    injected: list[wire.InjectEvent] = field(default_factory=list)   # amp = "inject": what the hook applied
    saves: dict[int, float] = field(default_factory=dict)   # step -> seconds in paddle.save, left out of it
    emulation: wire.EmulationEvent | None = None   # emulate = true: the emulator's record (or why none)

    @property
    def rank(self) -> int:
        return self.start.rank or 0 if self.start is not None else 0

    @property
    def reported(self) -> bool:
        """The hook reported from this process once its `import paddle` finished (a start or device event)."""
        return self.start is not None or self.device is not None


class EventReader:
    """The hook's events per sending process, from the trial's `EventChannel` (`take`: the (pid,
    message) pairs it accepted from the program's own process tree); each message is one event line."""

    def __init__(self, source: Any = None):
        self.source = source
        self.procs: dict[int, Proc] = {}
        self.malformed = wire_read.Malformed()   # events dropped by the vocabulary's checks (record/wire.py)

    def poll(self) -> list[tuple[Proc, wire.StepEvent]]:
        """New step events since the last poll, with their process."""
        new: list[tuple[Proc, wire.StepEvent]] = []
        for pid, data in self.source.take() if self.source is not None else ():
            new.extend(self.ingest(pid, data))
        return new

    def ingest(self, pid: int, data: bytes) -> list[tuple[Proc, wire.StepEvent]]:
        """Event lines one process sent (the sender's pid as the kernel gave it, never a name it chose).
        Each is checked against the hook's declared vocabulary (record/wire.py) first: a malformed one is
        dropped and counted in `malformed`, never raised, so the steps read so far are always kept."""
        new: list[tuple[Proc, wire.StepEvent]] = []
        proc = self.procs.setdefault(pid, Proc(pid=pid))
        for line in data.splitlines():
            ev = wire_read.parse(line, self.malformed)
            for one in wire_read.validate(ev, self.malformed) if ev is not None else ():
                try:
                    if isinstance(one, wire.StepEvent):
                        proc.steps.append(one)   # `poll` returns the new steps: the worker follows them live
                        new.append((proc, one))
                    else:
                        _TAKERS[type(one)](proc, one)
                except Exception as exc:   # noqa: BLE001  a checked event the reader still cannot take
                    self.malformed.add(f"{one.KIND}: {type(exc).__name__}")
        return new

    def lead(self) -> Proc | None:
        """The process whose steps the trial keeps: rank 0 with the most steps (ranks agree on step count)."""
        ranked = sorted(self.procs.values(), key=lambda p: (p.rank != 0, -len(p.steps), p.pid))
        return next((p for p in ranked if p.steps), ranked[0] if ranked else None)

    def stepping(self) -> list[Proc]:
        return [p for p in self.procs.values() if p.steps]


# ---------------------------------------------------------------- one event kind each
# The hook's events, one taker per kind (`EventReader.ingest`; a step is kept as it comes).  The kinds a
# program can send without end (errors, decorate calls, data waits) stop being kept at a cap: a looping program
# cannot fill the worker.


def _take_start(proc: Proc, ev: wire.StartEvent) -> None:
    """The process's start facts (the first start event's)."""
    proc.start = proc.start or ev


def _take_device(proc: Proc, ev: wire.DeviceEvent) -> None:
    """The device, named at the first step (the hook's `_name_device`)."""
    proc.device = ev


def _take_ops(proc: Proc, ev: wire.OpsEvent) -> None:
    """Paddle's operator stats: every call, those inside Optimizer.step apart, the step the window starts at
    (2: the hook cleared model building and step 1) and why there are none, if the hook could not read them."""
    proc.ops = dict(ev.calls or {})
    proc.optimizer_ops = dict(ev.optimizer_calls or {})
    proc.ops_from = ev.first_step if ev.first_step is not None else 1
    proc.ops_error = ev.error or ""


def _take_memory(proc: Proc, ev: wire.MemoryEvent) -> None:
    """The allocator's peaks (read by `memory_of`)."""
    proc.memory = ev


def _take_end(proc: Proc, ev: wire.EndEvent) -> None:
    """Why and after how many steps the process ended."""
    proc.end = ev


def _take_error(proc: Proc, ev: wire.ErrorEvent) -> None:
    """An error the hook met (the first 100); one listing the layers is also why the shape audit has none."""
    if len(proc.errors) >= 100:
        return
    proc.errors.append(ev.error or "")
    if ev.where == "shapes":
        proc.shapes_error = (ev.error or "")[:300]


def _take_shapes(proc: Proc, ev: wire.ShapesEvent) -> None:
    """The Linear/conv layers at step 1, for the shape audit."""
    proc.shapes = ev


def _take_amp_call(proc: Proc, ev: wire.AmpOrderEvent | wire.InjectEvent) -> None:
    """A decorate / DataParallel call (`amp_order`) or what `amp = "inject"` applied (`inject`): 64 of both
    together, more than any program makes."""
    if len(proc.amp_order) + len(proc.injected) < 64:
        if isinstance(ev, wire.AmpOrderEvent):
            proc.amp_order.append(ev)
        else:
            proc.injected.append(ev)


def _take_save(proc: Proc, ev: wire.SaveEvent) -> None:
    """Seconds in paddle.save inside a step, added up per step."""
    proc.saves[ev.step] = proc.saves.get(ev.step, 0.0) + ev.s


def _take_data(proc: Proc, ev: wire.DataEvent) -> None:
    """The DataLoader waits of some steps, until MAX_DATA_WAITS (keys checked as step numbers by the wire)."""
    if len(proc.data_waits) < MAX_DATA_WAITS:
        proc.data_waits.update({int(k): v for k, v in ev.waits.items()})


def _take_emulation(proc: Proc, ev: wire.EmulationEvent) -> None:
    """The emulated AMP's record at the program's end, or why there is none (`error`)."""
    proc.emulation = ev


_TAKERS: dict[type[wire.WireEvent], Callable[[Proc, Any], None]] = {
    wire.StartEvent: _take_start, wire.DeviceEvent: _take_device, wire.OpsEvent: _take_ops,
    wire.MemoryEvent: _take_memory, wire.EndEvent: _take_end, wire.ErrorEvent: _take_error,
    wire.ShapesEvent: _take_shapes, wire.AmpOrderEvent: _take_amp_call, wire.InjectEvent: _take_amp_call,
    wire.SaveEvent: _take_save, wire.DataEvent: _take_data, wire.EmulationEvent: _take_emulation,
}


def amp_record(record: TrialAssembler, mode: ModeConfig, reader: EventReader, instrumented: bool) -> None:
    """The AMP settings the trial ran with (the mode's, or what the program's own AMP calls used:
    trial/command_amp.py), then the op dtype evidence from every stepping process; without it AMP is never
    called active."""
    trial = record.trial
    amp = AmpInfo.model_validate({"requested": mode.amp, "level": str(mode.level),
                                  "dtype": mode.dtype if mode.amp else "float32",
                                  "scaler": mode.scaler.model_dump() if mode.amp else {}})
    lead = reader.lead()
    in_order = sorted(reader.procs.values(), key=lambda p: (p is not lead, p.pid))   # the lead process's first
    record_calls(amp, mode, seen_calls(ev for p in in_order for ev in p.amp_order))
    amp.scaler_enabled = any(s.loss_scale is not None for s in trial.steps)
    amp.decorate_order = decorate_order(reader)
    record.amp(amp)
    procs = reader.stepping() or list(reader.procs.values())
    calls, apart = _summed(p.ops for p in procs), _summed(p.optimizer_ops for p in procs)
    record.amp_evidence(calls, apart, low_precision_calls(calls),
                        _evidence_text(low_precision_calls(calls), calls, apart,
                                       min((p.ops_from for p in procs), default=1)),
                        lambda: _why_inactive(trial, reader, instrumented))


def emulated_into(record: TrialAssembler, reader: EventReader) -> None:
    """A mode's emulate = true: the lead process's emulator record (`amp.emulation`); without one (the hook
    could not install it, or the program ended before saying) the trial is not emulated, and says why."""
    procs = reader.stepping() or list(reader.procs.values())
    sent = [p.emulation for p in procs if p.emulation is not None]
    ev = next((e for e in sent if not e.error), None)
    if ev is None:
        why = next((str(e.error) for e in sent if e.error), "")
        amp = record.trial.amp
        amp.inactive_code = "no-evidence"
        amp.inactive_reason = ("emulate = true, but the program's AMP was not emulated: "
                               + (why or "the hook sent no emulation record"))[:400]
        return
    record.emulation(from_event({k: v for k, v in vars(ev).items() if v is not None}))


def _evidence_text(low: int, calls: dict[str, dict[str, int]], apart: dict[str, dict[str, int]], first: int) -> str:
    """The AMP evidence in one line: low-precision calls of all, over which steps, the optimizer's apart."""
    total = sum(sum(c.values()) for c in calls.values())
    where = "training steps from step 2 (model building and step 1 left out)" if first > 1 else "first steps"
    return (f"{low} low-precision op calls of {total} in the program's {where}, the optimizer's "
            f"{sum(sum(c.values()) for c in apart.values())} apart (Paddle operator stats)")


def _why_inactive(trial: Trial, reader: EventReader, instrumented: bool) -> tuple[InactiveCode, str]:
    """Why a requested AMP reads inactive, and its code for the amp-active rule's advice: "device" where the
    evidence was read and shows float32 only (the device or the mode's args), "no-evidence" where there was
    none to read (not instrumented, or the hook could not read Paddle's operator stats)."""
    errors = "; ".join(sorted({p.ops_error for p in reader.procs.values() if p.ops_error}))
    if not instrumented:
        return "no-evidence", "not instrumented (workload.instrument = false): no op dtype evidence"
    if errors:
        return "no-evidence", f"no op dtype evidence from the program ({errors})"
    return "device", (f"AMP inactive in the program on device {trial.env.device or 'unknown'}: every recorded op "
                      "ran in float32 (on a CPU Paddle build AMP is a no-op; on a GPU check the mode's args really "
                      "turn AMP on)")


def shape_audit(proc: Proc | None, batch_size: int) -> dict[str, Any]:
    """The Tensor Core shape audit of the layers the hook listed at step 1, judged as the built-in loop's
    (trackers/shapes.py); {} when the hook sent none, or only why it could not (`absent`)."""
    if proc is not None and proc.shapes is None and proc.shapes_error:
        return shapes.absent(f"the start-up hook could not list the program's layers: {proc.shapes_error}")
    if proc is None or proc.shapes is None:
        return {}
    rows, count = _shape_rows(proc.shapes)
    return shapes.audit_dims(rows, batch_size, count)


def _shape_rows(ev: wire.ShapesEvent) -> tuple[list[tuple[str, str, list[int]]], int]:
    """The hook's "shapes" event as (name, kind, [in, out]) rows and its layer count (each row checked by the
    wire: a name, a kind and two counts)."""
    rows = [(str(r[0])[:200], str(r[1])[:64], [int(r[2]), int(r[3])]) for r in ev.layers]
    return rows, ev.count if ev.count is not None else len(rows)


def decorate_order(reader: EventReader) -> DecorateOrder:
    """O2 with data parallel: "data-parallel-first" when any process decorated a model a paddle.DataParallel
    already wrapped (Paddle's AMP guide asks for decorate first), "decorate-first" when a decorated model was
    wrapped afterwards, "" when the program did not use both."""
    events = [e for p in reader.procs.values() for e in p.amp_order]
    if any(e.call == "decorate" and e.after_data_parallel is True for e in events):
        return "data-parallel-first"
    if any(e.call == "data_parallel" and e.decorated is True for e in events):
        return "decorate-first"
    return ""


def _summed(tables: Any) -> dict[str, dict[str, int]]:
    """Op counts of every process, added up per op and dtype."""
    calls: dict[str, dict[str, int]] = {}
    for table in tables:
        for op, c in parse_op_stats(table).items():
            agg = calls.setdefault(op, {})
            for k, v in c.items():
                agg[k] = agg.get(k, 0) + v
    return calls


def memory_of(reader: EventReader, rss_peak: int) -> Memory:
    """The allocator peak of every stepping process, merged as the built-in loop merges its ranks (the maxima;
    each rank in per_rank); the program tree's peak RSS."""
    procs = [(p, p.memory) for p in reader.stepping() if p.memory is not None]
    mem = Memory()
    merge_ranks(mem, [RankMemory(p.rank, memory_from_wire(ev), p.pid) for p, ev in procs])
    mem.rss_peak_bytes = rss_peak or None
    errors = [ev.error for _, ev in procs if ev.error]
    if errors:   # the allocator key, as the built-in workloads record a peak not measured
        mem.errors = {"allocator" if mem.source == "cuda" else "hook": errors[0]}
    evals = max((ev.evaluations for _, ev in procs if ev.evaluations is not None), default=None)
    if mem.source == "cuda" and evals:
        mem.notes = {"evaluations": EVALS_CACHED_NOTE.format(n=evals)}
    return mem


def throughput_check(ours: float, scan: LogScan, tolerance: float,
                     steps: list[StepRecord] | None = None) -> dict[str, Any] | None:
    """The program's own samples/s (its log; the first line left out, it usually includes start-up)
    against ampbench's mean rate over the measured steps: the cross-check the report shows. Each line
    is one interval's rate over the same samples (PaddleOCR's, PaddleRec's, a Trainer's logging
    interval), so their samples over their time is the harmonic mean of the lines, comparable with
    ampbench's mean; their median, used before, came out above it whenever some intervals were slow
    (PaddleRec's DeepFM on a loaded machine: median 57.0, harmonic 49.9, ampbench 47.5 samples/s).
    Where the format says which steps a line measured (`scan.windows`: PaddleClas's cumulative lines)
    and `steps` holds them all, the widest such line is compared with ampbench's samples over time of
    those very steps (`window`): the mean over all measured steps came out 1.07-1.17 of a PaddleClas line
    that agreed to 1.000 over its own iterations, on a loaded machine (docs/command.md)."""
    windowed = _windowed(scan, steps or [])
    if windowed is not None:
        ours_w, line, (a, b) = windowed
        ratio = ours_w / line
        return {"ampbench_samples_per_s": ours_w, "program_samples_per_s": line, "lines": len(scan.throughput),
                "ratio": ratio, "agrees": abs(ratio - 1) <= tolerance, "tolerance": tolerance, "window": [a, b]}
    theirs = scan.throughput[1:] or scan.throughput  # the first log line usually includes start-up
    if not theirs or ours <= 0:
        return None
    med = statistics.harmonic_mean(theirs)
    ratio = ours / med if med > 0 else math.inf
    return {"ampbench_samples_per_s": ours, "program_samples_per_s": med, "lines": len(scan.throughput), "ratio": ratio,
            "agrees": abs(ratio - 1) <= tolerance, "tolerance": tolerance}


def _windowed(scan: LogScan, steps: list[StepRecord]) -> tuple[float, float, tuple[int, int]] | None:
    """(ampbench's samples/s over the steps of the widest line that names its steps, that line's rate, the
    steps), or None when no line names them or a step of its window is missing (a line is not compared
    with a part of what it measured)."""
    lines = [(v, w) for v, w in zip(scan.throughput, scan.windows, strict=False) if w is not None]
    if not lines:
        return None
    theirs, (a, b) = max(lines, key=lambda x: (x[1][1] - x[1][0], x[1][1]))
    inside = window_steps(steps, [a, b])
    ours = steps_rate(inside)
    if len(inside) != b - a + 1 or ours <= 0:
        return None
    return ours, theirs, (a, b)


def window_steps(steps: list[StepRecord], window: list[int] | None) -> list[StepRecord]:
    """The steps a throughput check counted: those of its `window` (first, last step), else the measured ones."""
    if window is None:
        return [s for s in steps if not s.warmup]
    return [s for s in steps if window[0] <= s.step <= window[1]]


@dataclass
class Ran:
    """What running the program left: its exit code (None: never started), the tree's peak RSS, the GPU it
    reported, the machine's load sampled while it ran, the processes it left behind."""

    code: int | None = None
    peak: int = 0
    gpu: Any = None   # trial.command_gpu.ProgramGpu (it imports this module)
    load: LoadSamples | None = None
    left: list[str] = field(default_factory=list)
