"""One worker process: spawn it, pump its events, enforce limits, kill its whole tree, read its end.

Workers run in their own session (a Ctrl-C on the terminal reaches ampbench only), so ampbench is
responsible for them: on a timeout, a memory ceiling, Ctrl-C or SIGTERM the whole process tree is
killed before ampbench goes on or exits; and a worker never outlives ampbench, even a SIGKILLed
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from ampbench.core.protocol import EVENT_PREFIX, PARENT_ENV, process_token

_PR_SET_PDEATHSIG = 1


class Interrupted(BaseException):
    """Ctrl-C or SIGTERM reached ampbench. A BaseException (not KeyboardInterrupt) so typer/click do not
    turn it into a silent exit before the runner has stopped the worker and said how to resume."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def _raise_interrupted(signum: int, _frame: Any) -> None:
    raise Interrupted(signum)


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


@dataclass
class Limits:
    timeout_s: float
    memory_limit_bytes: int | None = None


@dataclass
class Outcome:
    """How a worker process ended, as far as the runner can tell."""

    returncode: int | None
    killed: str | None          # "timeout" or "oom" when the runner killed it, else None
    peak_rss: int
    wall_s: float
    oom_kills: int              # kernel OOM kills in our cgroup while it ran (-1: unknown)

    @property
    def signal(self) -> int | None:
        rc = self.returncode
        return -rc if rc is not None and rc < 0 else None


# ---------------------------------------------------------------- process facts (psutil)


def _tree(pid: int) -> list[psutil.Process]:
    """The process and every descendant (ranks a launcher started in sessions of their own included)."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def tree_rss_bytes(pid: int) -> int:
    """The largest resident set in the worker's process tree: for a data-parallel trial the ranks
    (each its own device's process), not the launcher; for a single process, the worker itself."""
    best = 0
    for proc in _tree(pid):
        with contextlib.suppress(psutil.Error):
            best = max(best, proc.memory_info().rss)
    return best


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


# ---------------------------------------------------------------- no orphans


# Run before the worker's own program (not as a preexec_fn, which is unsafe with threads): ask the
# kernel for SIGKILL when ampbench dies (the setting survives exec), give up if it is already gone.
_DEATH_GUARD = ("import ctypes, os, sys\n"
                "try:\n    ctypes.CDLL(None).prctl(%d, %d, 0, 0, 0)\nexcept Exception:\n    pass\n"
                "if os.getppid() != int(sys.argv[1]):\n    os._exit(1)\n"
                "os.execvp(sys.argv[2], sys.argv[2:])\n").replace("%d, %d", f"{_PR_SET_PDEATHSIG}, {int(signal.SIGKILL)}")


def guarded(cmd: list[str]) -> list[str]:
    """`cmd` behind the parent-death guard: the process (same pid after exec) dies with ampbench."""
    return [sys.executable, "-c", _DEATH_GUARD, str(os.getpid()), *cmd]


def kill_tree(pid: int, grace_s: float = 2.0) -> None:
    """SIGTERM, then SIGKILL, to the worker, its process groups and every descendant; descendants
    are listed before signalling, so a child re-parented mid-way is still reached."""
    procs = _tree(pid)
    groups = set()
    for proc in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            groups.add(os.getpgid(proc.pid))
    groups.discard(os.getpgrp())  # never our own group
    for g in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(g, signal.SIGTERM)
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for g in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(g, signal.SIGKILL)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()


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
    """The worker in its own session, dying with us (pdeathsig + the AMPBENCH_PARENT watchdog)."""
    return subprocess.Popen(
        guarded(cmd), stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True, errors="replace",
        env={**os.environ, **env, PARENT_ENV: process_token(os.getpid())}, start_new_session=True,
    )


def run_worker(cmd: list[str], env: dict[str, str], log_path: Path, limits: Limits,
               on_event: Callable[[dict[str, Any]], None]) -> Outcome:
    """Run a worker to its end (or kill it at a limit); any exception here, Ctrl-C included, kills
    the whole tree first and then propagates."""
    oom_before = cgroup_oom_kills()
    q: queue.Queue[dict[str, Any] | None] = queue.Queue()
    killed: str | None = None
    peak = 0
    t0 = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as log:
        proc = spawn(cmd, env, log)
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
                peak = max(peak, tree_rss_bytes(proc.pid))
                if limits.memory_limit_bytes and peak > limits.memory_limit_bytes:
                    killed = "oom"
                elif time.monotonic() - t0 > limits.timeout_s:
                    killed = "timeout"
                if killed:
                    kill_tree(proc.pid)
                    break
            proc.wait()
        except BaseException:
            kill_tree(proc.pid)
            with contextlib.suppress(Exception):
                proc.wait(timeout=5)
            raise
    oom_after = cgroup_oom_kills()
    return Outcome(returncode=proc.returncode, killed=killed, peak_rss=peak, wall_s=time.monotonic() - t0,
                   oom_kills=(oom_after - oom_before) if min(oom_before, oom_after) >= 0 else -1)


def worker_command(spec_path: Path) -> list[str]:
    return [sys.executable, "-m", "ampbench.trial.worker", str(spec_path)]
