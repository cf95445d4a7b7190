"""One trial of a `command` suite: run the user's program, measured by the start-up hook, and record it.

The worker (a process of ampbench's own Python) runs the program as its child: the user's argv
with the placeholders filled, the suite's and the mode's env, and ampbench's hook folder first on
PYTHONPATH (unless `instrument = false`). The child runs in a session of its own (a signal it sends
to its process group never reaches the worker), dies with the worker (parent-death signal), and
stays in the worker's process tree (the worker is a subreaper: a double-forked daemon is re-parented
here), so the runner's timeout, Ctrl-C and SIGTERM kill the whole tree; processes the program leaves
behind are killed here, until none is left, and named. The program's output goes to
the trial log (at most `max_log_mib` bytes; a flood is cut, counted and its last bytes kept; memory
stays bounded for a line of any length) and through the
metric preset; the hook's step events (trial/command_channel.py: a socket only the program's own
processes are read from) are forwarded to the runner as they arrive, so a trial killed mid-way keeps
its steps. The trial file is written after the program's tree has exited.
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ampbench.core import protocol
from ampbench.core.errors import ResultsError
from ampbench.core.files import empty_folder
from ampbench.core.processes import become_subreaper, descendants, end_descendants, guarded, tree_rss_bytes
from ampbench.core.store import RunPaths
from ampbench.record import wire
from ampbench.record.assemble import step_from_wire
from ampbench.record.models import Env
from ampbench.record.trial_file import write_trial_file
from ampbench.trackers.load import LoadSamples
from ampbench.trial.command_channel import EventChannel
from ampbench.trial.command_gpu import ProgramGpu
from ampbench.trial.command_inject import INJECT_ENV, inject_settings
from ampbench.trial.command_record import EventReader, Ran
from ampbench.trial.context import Events, TrialContext
from ampbench.trial.spec import TrialSpec
from ampbench.workloads.command import HOOK_DIR
from ampbench.workloads.command.params import CommandParams, placeholder_values
from ampbench.workloads.command.presets import LogScan

POLL_S = 0.25
TAIL_LINES = 60


CHUNK = 64 * 2**10      # the most the reader takes in at once: a line without a newline is read in pieces
LINE_KEEP = 2000        # characters of a line kept in the tail (its end: where a traceback's last line is)
SCAN_KEEP = 64 * 2**10  # bytes of a line the metric scan sees (a metric line is short)
LAST_KEEP = 64 * 2**10  # bytes of output kept for the log once max_log_mib is reached


class Output:
    """Reads the program's merged stdout/stderr as bytes: to the trial log (at most `max_bytes` bytes,
    then the output's last LAST_KEEP bytes at the end), the metric scan and a tail of lines. Memory is
    bounded whatever the program prints: a line without a newline is read CHUNK bytes at a time and
    only its head (scan) and end (tail) are kept, so 128 MiB on one line does not grow the worker."""

    def __init__(self, scan: LogScan, max_bytes: int):
        self.scan, self.max_bytes = scan, max_bytes
        self.tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self.written = 0          # bytes in the log
        self.dropped = 0          # lines (or line pieces) not written to the log
        self.dropped_bytes = 0
        self._last = bytearray()  # the output's end, once it no longer goes to the log
        self.denied = ""          # why the hook could not reach the worker's channel (its wire.DENIED line)

    def run(self, stream: Any) -> None:
        sys.stderr.flush()
        log = sys.stderr.buffer
        head, end = bytearray(), bytearray()   # the current line: its first SCAN_KEEP and last bytes
        while piece := stream.readline(CHUNK):
            self._to_log(log, piece)
            if len(head) < SCAN_KEEP:
                head += piece[:SCAN_KEEP - len(head)]
            end += piece
            del end[:-4 * LINE_KEEP]
            if piece.endswith(b"\n"):
                self._line(head, end)
                head, end = bytearray(), bytearray()
        if head:
            self._line(head, end)
            self.dropped += 1 if self.dropped_bytes else 0   # the last line, unfinished
        if self.dropped_bytes:
            log.write(f"[ampbench] {self.dropped_bytes:,} bytes of output ({self.dropped:,} lines) were not "
                      f"logged; the output's last {len(self._last):,} bytes:\n".encode())
            log.write(bytes(self._last))
        log.flush()

    def _to_log(self, log: Any, piece: bytes) -> None:
        if not self.dropped_bytes and self.written + len(piece) <= self.max_bytes:
            log.write(piece)
            self.written += len(piece)
            return
        if not self.dropped_bytes:
            log.write(f"\n[ampbench] the program's output passed {self.max_bytes // 2**20} MiB: the log keeps "
                      "only its last bytes, at the end\n".encode())
        self.dropped += piece.endswith(b"\n")   # readline: a newline only at a piece's end
        self.dropped_bytes += len(piece)
        self._last += piece
        del self._last[:-LAST_KEEP]

    def _line(self, head: bytearray, end: bytearray) -> None:
        text = head.decode("utf-8", "replace").rstrip("\n")
        if not self.denied and text.startswith(wire.DENIED):
            self.denied = text[len(wire.DENIED):][:LINE_KEEP]
        self.scan.feed(text)
        self.tail.append(end.decode("utf-8", "replace").rstrip("\n")[-LINE_KEEP:])

    def tail_text(self) -> str:
        return "\n".join(self.tail)


def _values(tr: TrialContext, out: Path) -> dict[str, Any]:
    p = CommandParams.model_validate(tr.suite.workload)
    return placeholder_values(p, tr.steps_total, tr.batch, seed=tr.spec.seed, out=str(out), mode=tr.mode.name)


def command_line(tr: TrialContext, p: CommandParams, out: Path, channel: dict[str, str]
                 ) -> tuple[list[str], dict[str, str], str | None]:
    """The filled argv, the environment and the cwd of this trial's program."""
    v = _values(tr, out)
    argv = [a.format(**v) for a in [*p.command, *tr.mode.args]]
    env = {**os.environ, **{k: x.format(**v) for k, x in p.env.items()},
           **{k: x.format(**v) for k, x in tr.mode.env.items()}}
    if p.instrument:
        env["PYTHONPATH"] = os.pathsep.join(x for x in (str(HOOK_DIR), env.get("PYTHONPATH", "")) if x)
        env.update(channel)   # where the hook reports and its token (trial/command_channel.py)
        env[protocol.HOOK_STOP_AFTER_ENV] = str(tr.steps_total if p.stop_after_steps else 0)
        env[protocol.HOOK_STATS_STEPS_ENV] = str(tr.suite.train.op_stats_steps(first=2))   # inside warm-up
        env[protocol.HOOK_WARMUP_ENV] = str(tr.suite.train.warmup_steps)
        env[protocol.HOOK_LOSS_EVERY_ENV] = str(p.loss_every_steps)
        if tr.mode.amp_by == "inject":   # the hook applies this mode's AMP itself (trial/command_inject.py)
            env[INJECT_ENV] = inject_settings(tr.mode)
        if tr.mode.amp and tr.mode.emulate:   # the hook emulates the program's AMP (trial/emulate)
            env[protocol.HOOK_EMULATE_ENV] = "1"
    elif tr.mode.amp and tr.mode.emulate:
        raise ValueError(f"mode {tr.mode.name}: emulate = true needs the start-up hook: set workload.instrument = true")
    return argv, env, p.cwd.format(**v) if p.cwd else None


def _pump(tr: TrialContext, proc: subprocess.Popen, reader: EventReader, samples: int, gpu: ProgramGpu,
          load: LoadSamples) -> int:
    """Forward step events to the runner until the program ends (NVML starts on the GPUs its processes
    report; the machine's load is sampled at every poll); returns the tree's peak RSS."""
    peak, sent = 0, 0
    while True:
        done = proc.poll() is not None
        load.sample()
        new = reader.poll()
        gpu.see(reader.procs.values())
        for owner, ev in new:
            if owner is reader.lead() and ev.step > sent:
                rec = step_from_wire(ev, samples, tr.suite.train.warmup_steps)
                tr.events.queue(event="step", **rec.model_dump(mode="json"))
                sent = rec.step
        tr.events.flush()
        if done:
            return peak
        peak = max(peak, tree_rss_bytes(proc.pid))
        time.sleep(POLL_S)


def _watch(tr: TrialContext, proc: subprocess.Popen, output: Output, reader: EventReader,
           ack: Callable[[int, bytes], Any]) -> Ran:
    """The started program to its end: its output read, its steps forwarded, NVML and the machine's load
    watched (a GPU process is told through `ack` once NVML samples its device); its leftover processes killed
    once it is reaped (and the load sampled once more)."""
    t = threading.Thread(target=output.run, args=(proc.stdout,), daemon=True)
    t.start()
    gpu, load = ProgramGpu(proc.pid, ack=ack), LoadSamples(os.getpid())
    try:
        peak = _pump(tr, proc, reader, tr.batch, gpu, load)
        code = proc.wait()
    finally:
        gpu.stop()
    left = end_descendants(os.getpid())  # the program is reaped: whatever is left it started
    load.sample()
    t.join(timeout=10)
    return Ran(code, peak, gpu, load, left)


def run_command(spec: TrialSpec, events: Events) -> int:
    """The worker's whole job for a command suite; the trial file is always written."""
    tr = TrialContext(spec, events)
    p = CommandParams.model_validate(tr.suite.workload)
    trial_path = Path(spec.trial_path)
    out = RunPaths.output_dir_of(trial_path)
    tr.record.env(worker_env())
    scan = LogScan(p.metric.preset, dict(p.metric.patterns), p.metric.throughput_pattern)
    output = Output(scan, p.max_log_mib * 2**20)
    channel = EventChannel(lambda: set(descendants(os.getpid())))
    reader = EventReader(channel)
    launch_error, ran = "", Ran()
    try:
        empty_folder(out, root=trial_path.parent.parent)   # empty for every attempt (--resume too), never through a link
        argv, env, cwd = command_line(tr, p, out, channel.env())
        events.emit(event="phase", phase="program")
        become_subreaper()
        proc = subprocess.Popen(guarded(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
    except ResultsError as e:
        launch_error = f"could not prepare the program's folders: {e}"
    except (OSError, ValueError, KeyError, IndexError) as e:
        launch_error = f"could not start the program: {type(e).__name__}: {e}"
    else:
        ran = _watch(tr, proc, output, reader, channel.reply)
    channel.close()   # the program's tree has exited: what it sent is read, nothing more can arrive
    reader.poll()
    if output.denied and channel.refusals:
        output.denied += f"; {channel.summary()}"
    from ampbench.trial.command_finish import finish_command

    try:
        finish_command(tr, p, reader, output, launch_error, out, ran)
        _say_channel(tr, channel, reader)
    except Exception as exc:  # noqa: BLE001  recorded, never lost: the trial file says what happened
        tr.record.outcome("crashed", "".join(traceback.format_exception(exc))[-8000:], output.tail_text() or None)
    tr.stop_clock()
    write_trial_file(trial_path, tr.trial, spec.run_folder)   # inside the run folder, whatever the program did
    events.emit(event="done", status=tr.trial.status)
    return 0 if tr.trial.status == "ok" else 1


def _say_channel(tr: TrialContext, channel: EventChannel, reader: EventReader) -> None:
    """What the channel refused (connections from outside the program, by reason), messages over budget
    and events dropped as malformed (record/wire.py), kept with the trial."""
    info = getattr(tr.trial, "workload_info", None)
    if not isinstance(info, dict):
        return
    if channel.refusals or channel.dropped:
        info["events_refused"] = {"pids": channel.refused[:20], "count": sum(channel.refusals.values()),
                                  "reasons": dict(channel.refusals), "messages_over_budget": channel.dropped}
    if reader.malformed.count:
        info["events_malformed"] = {"count": reader.malformed.count, "reasons": dict(reader.malformed.reasons)}


def worker_env() -> Env:
    """The machine's facts without importing paddle here (the program's Paddle, device and Python
    come from the hook's start and device events, see command_finish)."""
    import platform

    import ampbench
    from ampbench.trackers.env import cpu_model, git_sha

    return Env(platform=platform.platform(), cpu_count=os.cpu_count() or 0, git_sha=git_sha(),
               ampbench=ampbench.__version__, device_name=cpu_model())

