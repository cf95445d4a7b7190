"""One worker process: spawn it, pump its events, enforce limits, kill its whole tree, read its end.

Workers run in their own session (a Ctrl-C on the terminal reaches ampbench only), so ampbench is
responsible for them: on a timeout, a memory ceiling, Ctrl-C or SIGTERM the whole process tree is
killed before ampbench goes on or exits; ampbench is their subreaper, so when a worker ends (or is
killed by the program it runs) whatever its tree left behind is found by its marker and killed; and a worker never outlives ampbench, even a SIGKILLed
one (the kernel's parent-death signal on the direct child, plus a watchdog thread in every worker
process, data-parallel ranks included, that ends it when the ampbench process is gone).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ampbench.core.files import open_for_writing
from ampbench.core.processes import (
    WORKER_ENV,
    become_subreaper,
    end_descendants,
    guarded,
    kill_tree,
    tree_rss_bytes,
    worker_marker,
)
from ampbench.core.protocol import EVENT_PREFIX, PARENT_ENV, process_token
from ampbench.launch.forkserver import ForkServer


class Interrupted(BaseException):
    """Ctrl-C or SIGTERM reached ampbench. A BaseException (not KeyboardInterrupt) so typer/click do not
    turn it into a silent exit before the runner has stopped the worker and said how to resume."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class Cancelled(Exception):
    """The run is stopping (an interrupt reached ampbench's main thread while trials ran side by side):
    this worker's tree was killed and no trial file is written for it (`--resume` runs it again)."""


def _raise_interrupted(signum: int, _frame: Any) -> None:
    raise Interrupted(signum)


@contextlib.contextmanager
def deferred_interrupts() -> Iterator[Callable[[], None]]:
    """Within: Ctrl-C and SIGTERM are only noted, and the `check()` this yields raises them where the
    caller chose (outside every lock).  Why: a handler that raises fires between any two bytecodes of
    the main thread, also inside a lock's critical section (queue.get's mutex, rich's console lock),
    which then stays held; the trial threads block on it for ever and the run never stops (seen under
    load: the status line went on after a Ctrl-C).  Only our handler and Python's default SIGINT
    handler are deferred; a signal noted but not yet checked is raised on leaving."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return
    pending: list[int] = []
    saved: dict[int, Any] = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    ours = {sig for sig, h in saved.items() if h is _raise_interrupted or h is signal.default_int_handler}

    def note(signum: int, _frame: Any) -> None:
        pending.append(signum)

    def check() -> None:
        if pending:
            signum = pending[0]
            pending.clear()
            if saved.get(signum) is signal.default_int_handler:
                raise KeyboardInterrupt
            raise Interrupted(signum)

    for sig in ours:
        signal.signal(sig, note)
    try:
        yield check
    finally:
        for sig in ours:
            signal.signal(sig, saved[sig])
    check()


def install_signal_handlers() -> None:
    """SIGINT and SIGTERM raise `Interrupted` in the main thread (the CLI installs this once); a signal
    the parent shell ignores (SIGINT of a background job) stays ignored."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, _raise_interrupted)


@contextlib.contextmanager
def keep_signal_handlers() -> Iterator[None]:
    """Importing paddle installs its own C++ SIGTERM handler (it aborts with a C++ report): around
    code that may import it in the ampbench process, our handlers are put back afterwards."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            if handler is not None:
                signal.signal(sig, handler)


RSS_EVERY_S = 0.2   # the worker tree's resident set is sampled this often (and the limits checked)


@dataclass
class Limits:
    timeout_s: float
    memory_limit_bytes: int | None = None

    def hit(self, peak_rss: int, elapsed_s: float) -> str | None:
        """Which limit a worker at this peak RSS and age has passed ("oom", "timeout"), if any."""
        if self.memory_limit_bytes and peak_rss > self.memory_limit_bytes:
            return "oom"
        return "timeout" if elapsed_s > self.timeout_s else None


@dataclass
class Outcome:
    """How a worker process ended, as far as the runner can tell."""

    returncode: int | None
    killed: str | None          # "timeout" or "oom" when the runner killed it, else None
    peak_rss: int
    wall_s: float
    oom_kills: int              # kernel OOM kills in our cgroup while it ran (-1: unknown)
    leftovers: list[str] = field(default_factory=list)  # `pid (name)` of processes of its tree killed after it ended

    @property
    def signal(self) -> int | None:
        rc = self.returncode
        return -rc if rc is not None and rc < 0 else None


# ---------------------------------------------------------------- process facts (psutil)


def cgroup_oom_kills() -> int:
    """The kernel OOM killer's count for our cgroup (v2 memory.events), or -1 where unreadable."""
    try:
        rel = Path("/proc/self/cgroup").read_text().strip().splitlines()[0].split(":", 2)[2]
        for line in Path("/sys/fs/cgroup", rel.lstrip("/"), "memory.events").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return -1


# ---------------------------------------------------------------- run one worker


def _reader(stream: Any, q: queue.Queue[dict[str, Any] | None]) -> None:
    try:
        for line in stream:
            if line.startswith(EVENT_PREFIX):
                with contextlib.suppress(ValueError):
                    ev = json.loads(line[len(EVENT_PREFIX):])
                    if isinstance(ev, dict):
                        q.put(ev)
    except (OSError, ValueError):
        pass
    q.put(None)


def spawn(cmd: list[str], env: dict[str, str], log: Any) -> subprocess.Popen:
    """The worker in its own session, dying with us (pdeathsig + the AMPBENCH_PARENT watchdog); we are
    its subreaper, so what its tree leaves behind is re-parented to us (run_worker finds it by marker)."""
    become_subreaper()
    return subprocess.Popen(
        guarded(cmd), stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True, errors="replace",
        env={**os.environ, **env, PARENT_ENV: process_token(os.getpid())}, start_new_session=True,
    )


def run_worker(cmd: list[str], env: dict[str, str], log_path: Path, limits: Limits,
               on_event: Callable[[dict[str, Any]], None], log_root: Path | None = None,
               stop: threading.Event | None = None, forks: ForkServer | None = None) -> Outcome:
    """Run a worker to its end (or kill it at a limit); any exception here, Ctrl-C included, kills
    the whole tree first and then propagates, and so does `stop` being set (as `Cancelled`: a run
    with trials side by side is interrupted). The log is opened without following a link (below
    `log_root`, the run folder, when given). With `forks`, the run's fork server starts the worker
    where it can (launch/forkserver.py: Paddle imported once per run), else it is spawned."""
    oom_before = cgroup_oom_kills()
    q: queue.Queue[dict[str, Any] | None] = queue.Queue()
    killed: str | None = None
    peak = 0
    t0 = time.monotonic()
    sampled = -RSS_EVERY_S
    marker = worker_marker()
    with open_for_writing(log_path, root=log_root) as log:
        proc = (forks.start(cmd, {**env, WORKER_ENV: marker}, log) if forks is not None else None) \
            or spawn(cmd, {**env, WORKER_ENV: marker}, log)
        try:
            threading.Thread(target=_reader, args=(proc.stdout, q), daemon=True).start()
            while True:
                try:
                    ev = q.get(timeout=0.2)
                except queue.Empty:
                    ev = {}
                if ev is None:
                    break
                if ev:
                    on_event(ev)
                if stop is not None and stop.is_set():
                    raise Cancelled("stopped: the run was interrupted")
                if time.monotonic() - sampled >= RSS_EVERY_S:   # not at every event: a burst of step events
                    sampled = time.monotonic()                    # read all of /proc each time (psutil's children)
                    peak = max(peak, tree_rss_bytes(proc.pid))
                if proc.poll() is not None:  # exited by itself: whatever the clock says now (Ctrl-Z, fg), not a kill
                    continue
                killed = limits.hit(peak, time.monotonic() - t0)
                if killed:
                    kill_tree(proc.pid)
                    break
            proc.wait()
        except BaseException:
            kill_tree(proc.pid)
            with contextlib.suppress(Exception):
                proc.wait(timeout=5)
            end_descendants(os.getpid(), (WORKER_ENV, marker))
            raise
    left = end_descendants(os.getpid(), (WORKER_ENV, marker))  # a program that killed its worker left these
    oom_after = cgroup_oom_kills()
    return Outcome(returncode=proc.returncode, killed=killed, peak_rss=peak, wall_s=time.monotonic() - t0,
                   oom_kills=(oom_after - oom_before) if min(oom_before, oom_after) >= 0 else -1, leftovers=left)


def worker_command(spec_path: Path) -> list[str]:
    return [sys.executable, "-m", "ampbench.trial.worker", str(spec_path)]
