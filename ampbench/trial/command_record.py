"""A command trial's record: the start-up hook's events (JSON lines per process, trial/command_channel.py) and the
program's own output turned into the Trial's steps, AMP evidence, memory, metric and status."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ampbench.core import wire
from ampbench.core.records import AmpInfo, DecorateOrder, Emulation, InactiveCode, Memory, StepRecord, Trial
from ampbench.trackers import shapes
from ampbench.trackers.memory import EVALS_CACHED_NOTE
from ampbench.trial.emulate.record import from_event
from ampbench.trial.precision import effective_lists, low_precision_calls, parse_op_stats
from ampbench.workloads.command.presets import LogScan

MAX_DATA_WAITS = 10_000_000   # steps with a data wait one process may report (each line holds at most wire.MAX_ITEMS)



@dataclass
class Proc:
    """What one process of the program reported (a rank under paddle.distributed.launch)."""

    pid: int
    start: dict[str, Any] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)
    ops: dict[str, str] = field(default_factory=dict)
    optimizer_ops: dict[str, str] = field(default_factory=dict)   # counted inside Optimizer.step (the hook)
    ops_from: int = 1   # the first step of the op window (2: the hook cleared model building and step 1)
    ops_error: str = ""
    memory: dict[str, Any] = field(default_factory=dict)
    end: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    data_waits: dict[int, float] = field(default_factory=dict)   # step -> its wait for the DataLoader
    shapes: dict[str, Any] = field(default_factory=dict)   # the hook's Linear/conv layers at step 1 (issue 35)
    shapes_error: str = ""   # why the hook could not list them (a model nested past the recursion limit)
    amp_order: list[dict[str, Any]] = field(default_factory=list)   # decorate / DataParallel calls, in order
    injected: list[dict[str, Any]] = field(default_factory=list)   # amp = "inject": what the hook applied
    saves: dict[int, float] = field(default_factory=dict)   # step -> seconds in paddle.save, left out of it
    emulation: dict[str, Any] = field(default_factory=dict)   # emulate = true: the emulator's record (or error)

    @property
    def rank(self) -> int:
        r = self.start.get("rank", 0)
        return r if isinstance(r, int) else 0


class EventReader:
    """The hook's events per sending process, from the trial's `EventChannel` (`take`: the (pid,
    message) pairs it accepted from the program's own process tree); each message is one event line."""

    def __init__(self, source: Any = None):
        self.source = source
        self.procs: dict[int, Proc] = {}
        self.malformed = wire.Malformed()   # events dropped by the vocabulary's checks (core/wire.py)

    def poll(self) -> list[tuple[Proc, dict[str, Any]]]:
        """New step events since the last poll, with their process."""
        new: list[tuple[Proc, dict[str, Any]]] = []
        for pid, data in self.source.take() if self.source is not None else ():
            new.extend(self.ingest(pid, data))
        return new

    def ingest(self, pid: int, data: bytes) -> list[tuple[Proc, dict[str, Any]]]:
        """Event lines one process sent (the sender's pid as the kernel gave it, never a name it chose).
        Each is checked against the hook's declared vocabulary (core/wire.py) first: a malformed one is
        dropped and counted in `malformed`, never raised, so the steps read so far are always kept."""
        new: list[tuple[Proc, dict[str, Any]]] = []
        proc = self.procs.setdefault(pid, Proc(pid=pid))
        for line in data.splitlines():
            ev = wire.parse(line, self.malformed)
            for one in wire.validate(ev, self.malformed) if ev is not None else ():
                try:
                    if self._apply(proc, one):
                        new.append((proc, one))
                except Exception as exc:   # noqa: BLE001  a checked event the reader still cannot take
                    self.malformed.add(f"{one.get(wire.KIND)}: {type(exc).__name__}")
        return new

    @staticmethod
    def _apply(proc: Proc, ev: dict[str, Any]) -> bool:
        """Take one checked event into its process's record; True for a new step (`poll` returns those,
        the worker follows the steps live).  A kind with nothing to take (a step without its number or
        time) is dropped."""
        kind = ev.get("e")
        if kind == "step":
            return _take_step(proc, ev)
        take = _TAKERS.get(str(kind))
        if take is not None:
            take(proc, ev)
        return False

    def lead(self) -> Proc | None:
        """The process whose steps the trial keeps: rank 0 with the most steps (ranks agree on step count)."""
        ranked = sorted(self.procs.values(), key=lambda p: (p.rank != 0, -len(p.steps), p.pid))
        return next((p for p in ranked if p.steps), ranked[0] if ranked else None)

    def stepping(self) -> list[Proc]:
        return [p for p in self.procs.values() if p.steps]


# ---------------------------------------------------------------- one event kind each
# The hook's events, one taker per kind (`EventReader._apply`).  The kinds a program can send without end
# (errors, decorate calls, data waits) stop being kept at a cap: a looping program cannot fill the worker.


def _take_step(proc: Proc, ev: dict[str, Any]) -> bool:
    """A step with its number and time is kept (True); one without cannot be placed or timed."""
    if isinstance(ev.get("step"), int) and isinstance(ev.get("t"), (int, float)):
        proc.steps.append(ev)
        return True
    return False


def _take_start(proc: Proc, ev: dict[str, Any]) -> None:
    """The process's start facts; a fact already there (a `device` event that came first) is kept."""
    proc.start = {**ev, **proc.start}


def _take_device(proc: Proc, ev: dict[str, Any]) -> None:
    """The device, named at the first step (the hook's `_name_device`): kept with the start facts."""
    proc.start = {**proc.start, **{k: v for k, v in ev.items() if k != "e"}}


def _take_ops(proc: Proc, ev: dict[str, Any]) -> None:
    """Paddle's operator stats: every call, those inside Optimizer.step apart, the step the window starts at
    (2: the hook cleared model building and step 1) and why there are none, if the hook could not read them."""
    calls = ev.get("calls")
    proc.ops = {str(k): str(v) for k, v in calls.items()} if isinstance(calls, dict) else {}
    apart = ev.get("optimizer_calls")
    proc.optimizer_ops = {str(k): str(v) for k, v in apart.items()} if isinstance(apart, dict) else {}
    proc.ops_from = ev["first_step"] if isinstance(ev.get("first_step"), int) else 1
    proc.ops_error = str(ev.get("error") or "")


def _take_memory(proc: Proc, ev: dict[str, Any]) -> None:
    """The allocator's peaks (read by `memory_of`)."""
    proc.memory = ev


def _take_end(proc: Proc, ev: dict[str, Any]) -> None:
    """Why and after how many steps the process ended."""
    proc.end = ev


def _take_error(proc: Proc, ev: dict[str, Any]) -> None:
    """An error the hook met (the first 100); one listing the layers is also why the shape audit has none."""
    if len(proc.errors) >= 100:
        return
    proc.errors.append(str(ev.get("error", "")))
    if ev.get("where") == "shapes":
        proc.shapes_error = str(ev.get("error", ""))[:300]


def _take_shapes(proc: Proc, ev: dict[str, Any]) -> None:
    """The Linear/conv layers at step 1, for the shape audit (an event without its list is dropped)."""
    if isinstance(ev.get("layers"), list):
        proc.shapes = ev


def _take_amp_call(proc: Proc, ev: dict[str, Any]) -> None:
    """A decorate / DataParallel call (`amp_order`) or what `amp = "inject"` applied (`inject`): 64 of both
    together, more than any program makes."""
    if len(proc.amp_order) + len(proc.injected) < 64:
        (proc.amp_order if ev.get("e") == "amp_order" else proc.injected).append(ev)


def _take_save(proc: Proc, ev: dict[str, Any]) -> None:
    """Seconds in paddle.save inside a step, added up per step (step and seconds checked: wire.SaveEvent)."""
    proc.saves[ev["step"]] = proc.saves.get(ev["step"], 0.0) + float(ev["s"])


def _take_data(proc: Proc, ev: dict[str, Any]) -> None:
    """The DataLoader waits of some steps, until MAX_DATA_WAITS (keys and values checked: wire.DataEvent)."""
    if len(proc.data_waits) < MAX_DATA_WAITS:
        proc.data_waits.update({int(k): float(v) for k, v in ev["waits"].items()})


def _take_emulation(proc: Proc, ev: dict[str, Any]) -> None:
    """The emulated AMP's record at the program's end (wire.EmulationEvent), or why there is none."""
    proc.emulation = ev


_TAKERS: dict[str, Callable[[Proc, dict[str, Any]], None]] = {
    "start": _take_start, "device": _take_device, "ops": _take_ops, "memory": _take_memory, "end": _take_end,
    "error": _take_error, "shapes": _take_shapes, "amp_order": _take_amp_call, "inject": _take_amp_call,
    "save": _take_save, "data": _take_data, "emulation": _take_emulation,
}


def step_record(ev: dict[str, Any], samples: int, warmup_steps: int) -> StepRecord:
    raw = ev.get("loss")
    loss = float(raw) if isinstance(raw, (int, float)) and math.isfinite(raw) else None
    scale = ev.get("scale")
    return StepRecord(step=int(ev["step"]), loss=loss, loss_seen=ev.get("loss_seen") is not False,
                      time_s=max(0.0, float(ev.get("t") or 0.0)),
                      loss_scale=float(scale) if isinstance(scale, (int, float)) else None,
                      found_inf=bool(ev.get("found_inf")), samples=samples, warmup=int(ev["step"]) <= warmup_steps)


def amp_info(trial: Trial, requested: bool, level: str, dtype: str, reader: EventReader, instrumented: bool,
             scaler_cfg: dict[str, Any]) -> AmpInfo:
    """Op dtype evidence from every stepping process; without it AMP is never called active."""
    amp = AmpInfo.model_validate({"requested": requested, "level": level, "dtype": dtype if requested else "float32",
                                  "scaler": scaler_cfg})
    procs = reader.stepping() or list(reader.procs.values())
    calls, apart = _summed(p.ops for p in procs), _summed(p.optimizer_ops for p in procs)
    amp.op_calls, amp.optimizer_op_calls = calls, apart
    if requested:   # the lists the program's auto_cast applied (defaults of this Paddle + the mode's custom ones)
        lists = effective_lists(dtype, level, list(amp.white_list), list(amp.black_list))
        amp.effective_white_list, amp.effective_black_list = lists["white"], lists["black"]
    low = low_precision_calls(calls)
    amp.active = bool(requested and low > 0)
    amp.evidence = _evidence_text(low, calls, apart, min((p.ops_from for p in procs), default=1))
    amp.scaler_enabled = any(s.loss_scale is not None for s in trial.steps)
    amp.decorate_order = decorate_order(reader)
    if requested and not amp.active:
        amp.inactive_code, amp.inactive_reason = _why_inactive(trial, reader, instrumented)
    return amp


def emulated_into(amp: AmpInfo, reader: EventReader) -> None:
    """A mode's emulate = true: the lead process's emulator record (`amp.emulation`); without one (the hook
    could not install it, or the program ended before saying) the trial is not emulated, and says why."""
    procs = reader.stepping() or list(reader.procs.values())
    ev = next((p.emulation for p in procs if p.emulation and not p.emulation.get("error")), None)
    if ev is None:
        why = next((str(p.emulation["error"]) for p in procs if p.emulation.get("error")), "")
        amp.inactive_code = "no-evidence"
        amp.inactive_reason = ("emulate = true, but the program's AMP was not emulated: "
                               + (why or "the hook sent no emulation record"))[:400]
        return
    amp.emulated = True
    amp.emulation = Emulation.model_validate(from_event(ev))
    amp.inactive_code, amp.inactive_reason = "", ""


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
    if proc is not None and not proc.shapes and proc.shapes_error:
        return shapes.absent(f"the start-up hook could not list the program's layers: {proc.shapes_error}")
    if proc is None or not proc.shapes:
        return {}
    rows, count = _shape_rows(proc.shapes)
    return shapes.audit_dims(rows, batch_size, count)


def _shape_rows(ev: dict[str, Any]) -> tuple[list[tuple[str, str, list[int]]], int]:
    """The hook's "shapes" event as (name, kind, [in, out]) rows (malformed rows dropped) and its layer count."""
    rows = []
    for r in ev.get("layers") or []:
        if (isinstance(r, list) and len(r) == 4 and isinstance(r[0], str) and isinstance(r[1], str)
                and all(isinstance(d, int) and not isinstance(d, bool) for d in r[2:])):
            rows.append((r[0][:200], r[1][:64], [int(r[2]), int(r[3])]))
    count = ev.get("count")
    return rows, count if isinstance(count, int) and count >= 0 else len(rows)


def decorate_order(reader: EventReader) -> DecorateOrder:
    """O2 with data parallel: "data-parallel-first" when any process decorated a model a paddle.DataParallel
    already wrapped (Paddle's AMP guide asks for decorate first), "decorate-first" when a decorated model was
    wrapped afterwards, "" when the program did not use both."""
    events = [e for p in reader.procs.values() for e in p.amp_order]
    if any(e.get("call") == "decorate" and e.get("after_data_parallel") is True for e in events):
        return "data-parallel-first"
    if any(e.get("call") == "data_parallel" and e.get("decorated") is True for e in events):
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
    """The allocator peak of every stepping process (the maxima; each rank in per_rank)."""
    procs = [p for p in reader.stepping() if p.memory]
    mem = Memory(rss_peak_bytes=rss_peak or None)
    if not procs:
        return mem
    mem.source = _memory_source(procs)
    mem.peak_allocated_bytes = _largest(procs, "peak_allocated")
    mem.peak_reserved_bytes = _largest(procs, "peak_reserved")
    errors = [str(p.memory.get("error")) for p in procs if p.memory.get("error")]
    if errors:   # the allocator key, as the built-in workloads record a peak not measured
        mem.errors = {"allocator" if mem.source == "cuda" else "hook": errors[0]}
    evals = _largest(procs, "evaluations")
    if mem.source == "cuda" and evals:
        mem.notes = {"evaluations": EVALS_CACHED_NOTE.format(n=evals)}
    if len(procs) > 1:
        mem.per_rank = [{"rank": p.rank, "pid": p.pid, **{k: v for k, v in p.memory.items() if k != "e"}}
                        for p in procs]
    return mem


def _memory_source(procs: list[Proc]) -> Literal["cuda", "host", "none"]:
    """Where the peaks were read: any rank on a GPU makes the trial's memory GPU memory."""
    sources = {str(p.memory.get("source")) for p in procs}
    return "cuda" if "cuda" in sources else "host" if "host" in sources else "none"


def _largest(procs: list[Proc], key: str) -> int | None:
    """The largest integer reading of `key` over the processes (None: no process reported one)."""
    return max((int(p.memory[key]) for p in procs if isinstance(p.memory.get(key), int)), default=None)


def throughput_check(ours: float, scan: LogScan, tolerance: float) -> dict[str, Any] | None:
    """The program's own samples/s (its log; the first line left out, it usually includes start-up)
    against ampbench's mean rate over the measured steps: the cross-check the report shows. Each line
    is one interval's rate over the same samples (PaddleOCR's, PaddleRec's, a Trainer's logging
    interval), so their samples over their time is the harmonic mean of the lines, comparable with
    ampbench's mean; their median, used before, came out above it whenever some intervals were slow
    (PaddleRec's DeepFM on a loaded machine: median 57.0, harmonic 49.9, ampbench 47.5 samples/s)."""
    theirs = scan.throughput[1:] or scan.throughput  # the first log line usually includes start-up
    if not theirs or ours <= 0:
        return None
    med = statistics.harmonic_mean(theirs)
    ratio = ours / med if med > 0 else math.inf
    return {"ampbench_samples_per_s": ours, "program_samples_per_s": med, "lines": len(scan.throughput), "ratio": ratio,
            "agrees": abs(ratio - 1) <= tolerance, "tolerance": tolerance}
