"""The hook's state: everything the patched functions share (one `State` per process, `S`), the
queue of events and the flusher that sends them, and the connection to ampbench's worker.

Events are JSON lines (record/wire.py declares each), one message each on this process's own
connection to the worker (trial/command_channel.py: a socket in a 0700 folder, reached with the
handshake token the worker put in the program's environment), sent by a background thread 4
times a second, outside the timed region; the steps since the last send are one line
(`wire.encode_steps`, at most wire.ROWS_PER_LINE rows).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import weakref
from collections import deque
from typing import Any

from . import protocol, wire

FLUSH_EVERY_S = 0.25
LOSS_EVERY_STEPS = 5   # default k: the loss is read at steps 1, 1 + k, ... (protocol.HOOK_LOSS_EVERY_ENV; steps.boundary)
CONNECT_FOR_S = 20.0   # how long the hook keeps trying to reach the worker's channel (a flood may fill its backlog)
_ABSENT = object()   # "the class had no attribute of its own" in a recorded patch


class State:
    """Everything the patched functions share; one per process."""

    def __init__(self, sock: Any):
        self.sock = sock   # this process's connection to ampbench's worker (None once it broke)
        self.pid = os.getpid()
        self.stop_after = int(os.environ.get(protocol.HOOK_STOP_AFTER_ENV, "0") or 0)
        self.stats_steps = int(os.environ.get(protocol.HOOK_STATS_STEPS_ENV, "2") or 2)
        self.warmup = int(os.environ.get(protocol.HOOK_WARMUP_ENV, "0") or 0)
        self.loss_every = max(1, int(os.environ.get(protocol.HOOK_LOSS_EVERY_ENV, "") or LOSS_EVERY_STEPS))
        self.loss_next = 1   # the next step whose loss is read: a fixed index, whatever the steps took
        self.pending: list[Any] = []   # event dicts, and step events as tuples
        self.lock = threading.RLock()
        self.step = 0
        self.depth = 0
        self.t_prev = time.perf_counter()
        self.memory_at = 0.0
        self.eval_t0: float | None = None
        self.eval_s = 0.0
        self.evals: list[list[float]] = []   # [start, end] of each evaluation since the last step
        self.losses: deque[Any] = deque(maxlen=64)   # backward() with no optimizer step of Paddle's: a bounded few
        self.scaled: dict[int, Any] = {}
        self.scaler: Any = None
        self.scale_used: Any = None   # the scale tensor scale() multiplied by this step (minimize() updates after)
        self.sync: Any = None   # Paddle's synchronize bound to the GPU the program trains on (`_name_device`)
        self.ordinal: int | None = None   # the GPU the program trains on (None: CPU), named at its first step
        self.nvml_word: bytes | None = None   # the worker's NVML word once waited for (device.wait_for_sampling)
        self.peaks: Any = None   # the window's allocator peak, read at every step's end
        self.stats_on = False
        self.ops_open = False   # the op window is open (steps 2..stats_steps+1): the optimizer's ops are counted apart
        self.opt_ops: dict[str, list[int]] = {}   # op -> [fp16, bf16, fp32, other] inside Optimizer.step/minimize
        self.next_step = 1   # the next step at which `rare` has work (ops stats, memory reset, the stop)
        self.paddle: Any = None
        self.emulator: Any = None   # trial/emulate's Emulator when the mode emulates AMP (boot.emulate)
        self.ended = False
        self.patched: list[tuple[Any, str, Any, Any]] = []   # (owner, name, Paddle's own, ours)
        self.layers: Any = weakref.WeakValueDictionary()   # Layers built before step 1 (`_patch_model_building`)
        self.wrapped: set[int] = set()      # ids of the layers a paddle.DataParallel wrapped
        self.decorated: set[int] = set()    # ids of the layers paddle.amp.decorate decorated at O2

    def patch(self, owner: Any, name: str, new: Any) -> None:
        """Replace owner.name, keeping Paddle's own so the patch can be undone (`unpatched`)."""
        self.patched.append((owner, name, vars(owner).get(name, _ABSENT), new))
        setattr(owner, name, new)

    def unpatched(self, undo: bool) -> None:
        """Put Paddle's own functions back (undo=True) or ours again: the overhead benchmark's bare
        blocks run the program exactly as it runs without this hook (scripts/bench_command_overhead.py)."""
        for owner, name, theirs, ours in self.patched:
            if not undo:
                setattr(owner, name, ours)
            elif theirs is _ABSENT:
                if name in vars(owner):
                    delattr(owner, name)
            else:
                setattr(owner, name, theirs)

    def emit(self, **ev: object) -> None:
        """Queue one event; it is serialised by the flusher, off the program's step (list.append is
        atomic under the GIL, so the hot path takes no lock). Step events are queued as bare tuples
        (`_STEP_KEYS`) by `boundary` itself: every call on the step's path costs the program time."""
        self.pending.append(ev)

    def flush(self) -> None:
        """Send what is pending (a background thread does it every FLUSH_EVERY_S, so steps before a
        hang or a kill still reach the worker; the program's own thread never waits on the socket).
        The lock is held from taking the events to sending them: the program's last flush (at its exit)
        waits for a send the flusher thread has begun. Taken and sent apart, a flusher that lost the core
        between the two was killed with the process after the exit flush had sent the last step: a rank of
        a loaded 2-core run recorded steps 1 and 6 of 6. Reentrant: `finish` may flush from a signal
        handler on the main thread."""
        if os.getpid() != self.pid:   # a forked child (a DataLoader worker) never reports, nor takes a lock
            return                      # a thread of its parent may have held at the fork
        with self.lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        n = len(self.pending)
        events, self.pending[:n] = self.pending[:n], []
        if not events or os.getpid() != self.pid:   # a forked child (a DataLoader worker) never reports
            return
        lines, rows = [], []
        for ev in events + [None]:   # a run of step tuples is one "steps" line (`wire.encode_steps`)
            if isinstance(ev, tuple):
                rows.append(ev)
                if len(rows) < wire.ROWS_PER_LINE:
                    continue
            if rows:
                lines.append(wire.encode_steps(rows))
                rows = []
            if ev is not None and not isinstance(ev, tuple):
                lines.append(json.dumps(ev))
        self.send(lines)

    def send(self, lines: list[str]) -> None:
        """Each line one message on the connection (a SOCK_SEQPACKET socket keeps them whole)."""
        for line in lines:
            data = line.encode("utf-8", "replace")
            if len(data) > wire.MAX_LINE:
                data = json.dumps({"e": "error", "where": "send",
                                   "error": f"an event of {len(data)} bytes was not sent"}).encode()
            if self.sock is None:
                return
            try:
                self.sock.sendall(data)
            except OSError:   # the worker is gone: nothing more is reported
                self.sock = None

    def start_flusher(self) -> None:
        def loop() -> None:
            while not self.ended:
                time.sleep(FLUSH_EVERY_S)   # read each time: the overhead benchmark sets it
                self.flush()
        threading.Thread(target=loop, name="ampbench-hook-flush", daemon=True).start()


S: State | None = None   # this process's state, once the worker accepted its connection


def connect() -> Any:
    """This process's own connection to ampbench's worker (protocol.HOOK_SOCKET_ENV: "TOKEN:PATH"),
    once the worker has checked the token and that this is a process of the program's tree and
    answered wire.HANDSHAKE_OK; None otherwise (the program then runs unmeasured). A connect() that
    fails (the socket's backlog full, as an outside flood keeps it) is retried with back-off for
    CONNECT_FOR_S; giving up is said on stderr (wire.DENIED), where the worker reads the cause."""
    import socket

    token, _, path = os.environ.get(protocol.HOOK_SOCKET_ENV, "").partition(":")
    if not (token and path):
        return None
    deadline, delay, tries, last = time.monotonic() + CONNECT_FOR_S, 0.005, 0, ""
    while True:
        tries += 1
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            sock.settimeout(10)
            sock.connect(path)
            sock.sendall(token.encode())
            if sock.recv(8) == wire.HANDSHAKE_OK:
                sock.settimeout(None)
                return sock
            last = "the worker closed the connection without accepting it"
        except OSError as exc:
            last = f"{type(exc).__name__}: {exc}"
        sock.close()
        if time.monotonic() + delay > deadline:
            print(f"{wire.DENIED}{tries} connection attempts over {CONNECT_FOR_S:.0f} s failed, the last: {last}",
                  file=sys.stderr, flush=True)
            return None
        time.sleep(delay)
        delay = min(delay * 2, 0.25)
