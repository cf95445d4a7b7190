"""A worker's parent watchdog (trial/parent_watch.py) must not kill a worker whose ampbench is alive.

psutil's create_time adds the boot time a process read once from /proc/stat's btime, which the kernel
derives from the wall clock minus uptime; two processes can read it a second apart. The old watchdog
compared the token text exactly, so a worker whose btime read differed from ampbench's killed itself at
start-up ("worker killed by SIGKILL, not by ampbench", seen in CI on two unrelated tests)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil

from ampbench.core.protocol import TOKEN_SLACK_S, process_token, token_alive


def _shifted(token: str, by: float) -> str:
    pid, _, when = token.partition(":")
    return f"{pid}:{float(when) + by:.3f}"


def test_a_token_read_a_second_apart_is_still_the_same_process():
    mine = process_token(os.getpid())
    assert token_alive(mine)
    assert token_alive(_shifted(mine, 1.0)) and token_alive(_shifted(mine, -1.0))   # btime read 1 s apart
    assert _shifted(mine, 1.0) != mine                                              # the old exact test failed here


def test_a_reused_pid_a_dead_process_a_zombie_and_garbage_are_gone():
    mine = process_token(os.getpid())
    assert not token_alive(_shifted(mine, -(TOKEN_SLACK_S + 60)))   # the pid, but a process started later
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    token = process_token(child.pid)
    deadline = time.monotonic() + 30
    while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:   # exited, not yet reaped
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert not token_alive(token)
    child.wait()
    assert not token_alive(token)                                     # reaped: no such process
    assert not token_alive("") and not token_alive("abc:def")
