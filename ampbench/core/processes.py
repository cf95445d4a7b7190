"""Process trees: the parent-death guard, a tree's peak RSS, killing a whole tree (psutil), and the
subreaper that finds what a tree left behind.

Shared by the launcher (a worker and its ranks) and the command trial (the user's program and
whatever it starts): no process ampbench starts outlives it. Both are subreapers (Linux
PR_SET_CHILD_SUBREAPER): a daemon that double-forks is re-parented to the worker (or, when the
program killed its worker, to ampbench) instead of init, so it stays a descendant and is found;
`end_descendants` kills until none is left, so a daemon that forks a new copy on SIGTERM is killed
too. Without a cgroup, a process that both left the tree before ampbench saw it (ampbench SIGKILLed)
and dropped ampbench's environment marker can still escape: docs/command.md says so.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time

import psutil

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
WORKER_ENV = "AMPBENCH_WORKER"   # in every worker's (and so its program's) environment: whose leftovers they are
MARKER_PLACEHOLDER = "0" * 7 + "-" + "0" * 16   # a marker's width; no worker's (pid 0 is no process)


def worker_marker() -> str:
    """A new worker's marker, `PID-16HEX` of fixed width (pid_max <= 4194304: 7 digits): a forked worker
    writes it over its fork server's placeholder in place (launch/forkserver.py)."""
    import secrets

    return f"{os.getpid():07d}-{secrets.token_hex(8)}"


def _tree(pid: int) -> list[psutil.Process]:
    """The process and every descendant (ranks a launcher started in sessions of their own included)."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of `pid` and its whole tree so far: every live process's own and its reaped children's, and
    this process's reaped children (os.times): a command trial's program, its DataLoader workers and whatever
    it already reaped count as the trial's own CPU, not as another process's (trackers.load)."""
    mine = os.times()
    total = mine.children_user + mine.children_system if pid == os.getpid() else 0.0
    for p in _tree(pid):
        with contextlib.suppress(psutil.Error):
            t = p.cpu_times()
            total += t.user + t.system + (t.children_user + t.children_system if p.pid != os.getpid() else 0.0)
    return total


def tree_rss_bytes(pid: int) -> int:
    """The largest resident set in the worker's process tree: for a data-parallel trial the ranks
    (each its own device's process), not the launcher; for a single process, the worker itself."""
    best = 0
    for proc in _tree(pid):
        with contextlib.suppress(psutil.Error):
            best = max(best, proc.memory_info().rss)
    return best


# Run before the worker's own program (not as a preexec_fn, which is unsafe with threads): ask the
# kernel for SIGKILL when ampbench dies (the setting survives exec), give up if it is already gone.
_DEATH_GUARD = ("import ctypes, os, sys\n"
                "try:\n    ctypes.CDLL(None).prctl(%d, %d, 0, 0, 0)\nexcept Exception:\n    pass\n"
                "if os.getppid() != int(sys.argv[1]):\n    os._exit(1)\n"
                "os.execvp(sys.argv[2], sys.argv[2:])\n").replace("%d, %d", f"{_PR_SET_PDEATHSIG}, {int(signal.SIGKILL)}")


def guarded(cmd: list[str]) -> list[str]:
    """`cmd` behind the parent-death guard: the process (same pid after exec) dies with ampbench.
    The guard's own interpreter runs isolated and without `site` (-I -S): no sitecustomize (the
    user's, or the command hook on PYTHONPATH) runs in it, so theirs runs once, in their program."""
    return [sys.executable, "-I", "-S", "-c", _DEATH_GUARD, str(os.getpid()), *cmd]


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




def descendants(pid: int) -> list[int]:
    """Every live descendant of `pid` (its own children's children included)."""
    return [p.pid for p in _tree(pid)[1:]]


def become_subreaper() -> bool:
    """Linux: processes orphaned below this one (a daemonised child) are re-parented here, not to init,
    so they stay in the tree that timeouts and Ctrl-C kill and are found at the end. False elsewhere."""
    try:
        return int(ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _alive(proc: psutil.Process) -> bool:
    with contextlib.suppress(psutil.Error):
        return proc.status() != psutil.STATUS_ZOMBIE
    return False


def _marked(proc: psutil.Process, marker: tuple[str, str] | None) -> bool:
    if marker is None:
        return True
    with contextlib.suppress(psutil.Error):
        return proc.environ().get(marker[0]) == marker[1]
    return False


def end_descendants(pid: int, marker: tuple[str, str] | None = None, grace_s: float = 1.0,
                    limit_s: float = 10.0) -> list[str]:
    """Kill every live descendant of `pid` (with `marker` = (NAME, VALUE), only those whose environment
    has it) and keep looking until none is left: SIGTERM first, then SIGKILL to whatever is still or
    newly there (a daemon that forks a new copy on SIGTERM). Killed children of ours are reaped.
    Returns `pid (name)` of each process killed, for the trial to name."""
    seen: dict[int, str] = {}
    deadline = time.monotonic() + limit_s
    sig = signal.SIGTERM
    while True:
        procs = [p for p in _tree(pid)[1:] if _alive(p) and _marked(p, marker)]
        for p in procs:
            with contextlib.suppress(psutil.Error):
                seen.setdefault(p.pid, p.name())
            with contextlib.suppress(psutil.Error):
                p.send_signal(sig)
        psutil.wait_procs(procs, timeout=grace_s if sig == signal.SIGTERM else 0.2)
        if not procs or time.monotonic() > deadline:
            return [f"{p} ({name})" for p, name in sorted(seen.items())]
        sig = signal.SIGKILL
