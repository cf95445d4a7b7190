"""Process trees: the parent-death guard, a tree's peak RSS, killing a whole tree (psutil).

Shared by the launcher (a worker and its ranks) and the command trial (the user's program and
whatever it starts): no process ampbench starts outlives it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys

import psutil

_PR_SET_PDEATHSIG = 1


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




def descendants(pid: int) -> list[int]:
    """Every live descendant of `pid` (its own children's children included)."""
    return [p.pid for p in _tree(pid)[1:]]
